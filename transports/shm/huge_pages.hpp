// Huge pages under the plain buffers peers read with cross-memory attach.
//
// process_vm_readv pins the owner's pages one by one before it copies. From a buffer on 4 KiB
// pages that halves the copy's rate; from one on 2 MiB pages it copies at memcpy's rate
// (docs/PERFORMANCE.md, "Huge pages under plain buffers"). So the owner of a plain buffer that
// peers read offers it here, and its whole huge-page-sized regions are moved onto huge pages
// (madvise MADV_COLLAPSE, Linux 6.1): the contents stay, only the backing changes. A region is
// collapsed on its second offer, not its first: collapsing copies it once, which a buffer read in
// one call only never earns back, and training loops pass the same buffers call after call.
//
// The kernel refuses what it must not move (pages pinned by a device driver or RDMA, device
// memory, hugetlbfs): those regions are retried rarely, at growing intervals, and stay as they
// are. Nothing here changes a buffer's contents or whether a call succeeds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace ferry::transport::shm {

class HugeBacking {
 public:
  /// Moves [addr, addr + bytes) (whole regions) onto huge pages: 0 or the errno it failed with.
  /// Called with no lock held, in the offering thread.
  using Collapse = std::function<int(void* addr, size_t bytes)>;

  /// `regionBytes`: the huge page size (a power of two). At most `maxRegions` regions are
  /// remembered; past that the memory of offers starts afresh.
  HugeBacking(size_t regionBytes, Collapse collapse, size_t maxRegions = size_t{1} << 16);

  /// The owner of [addr, addr + bytes) lets peers read it: collapse the whole regions in it that
  /// were offered before and are not on huge pages yet. Thread-safe; a range holding no whole
  /// region returns at once.
  void offer(const void* addr, size_t bytes);

  size_t regionBytes() const { return regionBytes_; }

  struct Counts {
    uint64_t calls = 0;      ///< runs handed to Collapse
    uint64_t collapsed = 0;  ///< regions moved (or found) on huge pages
    uint64_t refused = 0;    ///< regions the kernel refused
  };
  Counts counts() const;

  /// A region found on huge pages is offered to the kernel again after this many offers (cheap
  /// where it still is), so memory an application unmapped and mapped afresh is collapsed again.
  static constexpr uint32_t kRecheckOffers = 256;
  /// A refused region waits this many offers before the next try, doubling to kMaxBackoff.
  static constexpr uint32_t kFirstBackoff = 8;
  static constexpr uint32_t kMaxBackoff = 1024;

 private:
  enum class State : uint8_t { kSeen, kPending, kHuge, kRefused };
  struct Region {
    State state = State::kSeen;
    uint32_t wait = 0;     // offers before the next try (kHuge, kRefused)
    uint32_t backoff = 0;  // kRefused: the wait it was given
  };
  // Records Collapse's outcome for the run of `count` regions from `first`.
  void settle(uintptr_t first, size_t count, int err);

  const size_t regionBytes_;
  const Collapse collapse_;
  const size_t maxRegions_;
  mutable std::mutex mutex_;
  std::unordered_map<uintptr_t, Region> regions_;
  Counts counts_;
  std::atomic<bool> toldRefusal_{false};
};

/// The process's own, collapsing with the kernel's MADV_COLLAPSE in the call that offers: that one
/// call pays the copy, as a training loop's second step or a benchmark's warm-up does. Null where
/// transparent huge pages are off ("never") or unknown.
HugeBacking* processHugeBacking();

}  // namespace ferry::transport::shm
