// Host memory the other processes of this host can map: what ferry::hostAlloc hands out.
//
// Each allocation is its own memfd, mapped shared in the owner. The owner lists its allocations in
// a registry: one more memfd of a few pages, a table of {base address, bytes, id, fd} guarded by a
// version counter (a seqlock: odd while the owner rewrites it). A peer that knows the owner's pid
// and the registry's fd number (published in the owner's arena segment) opens
// /proc/<pid>/fd/<registry fd> and maps the table read-only; to read an address of the owner's it
// finds the allocation holding it there and maps that allocation the same way, once, cached.
// Then a "single-copy read" of a peer's buffer is a plain memcpy (or a reduction straight from
// it), where cross-memory attach pins and maps every page on every call.
//
// Nothing here is needed for correctness: every reader falls back to cross-memory attach (or the
// mailboxes) where mapping fails, and buffers outside the registry are read that way anyway.
// Opening another process's /proc/<pid>/fd needs the same access as reading its memory
// (PTRACE_MODE_READ: same user; Yama's ptrace_scope does not restrict it).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::transport::shm {

/// `bytes` (0 counts as 1) of zeroed, page-aligned host memory listed in this process's registry.
/// Errors name the size and the system call that failed.
Result<void*> allocShared(size_t bytes);
/// Release what allocShared returned; kInvalidArgument for any other pointer.
Status freeShared(void* ptr);
/// Make [ptr, ptr + bytes) of ordinary memory shared in place: its pages (the range rounded out to
/// whole pages) are replaced by a memfd mapping at the same address holding the same bytes, and
/// listed in the registry like allocShared's, so peers map it. A range inside one listed allocation
/// (allocShared's or adopted) counts one more reference to it. Returns the handle for
/// releaseAdopted. kInvalidArgument for a null or empty range, one that partly overlaps a listed
/// allocation, or pages that are not private read-write memory (a shared file mapping must stay
/// its file's). The caller must not write the pages while this runs: writes between the copy and
/// the swap would be lost.
Result<void*> adoptShared(void* ptr, size_t bytes);
/// Drop one reference taken by adoptShared; at the last one an adopted range gets private
/// anonymous pages again (same bytes) and leaves the registry. kInvalidArgument for any other handle.
Status releaseAdopted(void* handle);
/// Whether [ptr, ptr + bytes) lies inside one allocation of allocShared that peers can map (one
/// the registry lists). Lock-free; one relaxed load when this process has none.
bool isShared(const void* ptr, size_t bytes);
/// The registry's file descriptor in this process, created on first use; -1 if it cannot be made.
int registryFd();
/// One access per 4 KiB page of [p, p + bytes): a load, or with `write` a store of what the page
/// holds. What maps shared pages before a stream of calls walks through them: a first access to a
/// page costs a fault in the guest, and on a paravirtualised guest (whose hypervisor fills page
/// tables of its own) more again. Loads and stores, not MAP_POPULATE or MADV_POPULATE_*: only the
/// accesses made the first copies fast in every run (evidence: docs/PERFORMANCE.md, "Touching
/// pages with loads and stores").
void touchPages(void* p, size_t bytes, bool write);

/// One peer process's registry as this process sees it, and the allocations of it mapped here.
class PeerMemory {
 public:
  PeerMemory() = default;
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  /// Map process `pid`'s registry (its fd `fd`). False, and this peer is read by other means,
  /// when it cannot be opened or is not a registry.
  bool attach(pid_t pid, int fd);
  /// Where [remote, remote + bytes) of the peer is mapped in this process, or null when it is not
  /// in the peer's registry or cannot be mapped. The pointer stays valid until the peer frees the
  /// allocation and a later call notices it (callers use it within one collective call, during
  /// which the owner keeps its buffers).
  const uint8_t* map(uint64_t remote, size_t bytes);

 private:
  struct Mapping {
    uint64_t id;
    uint64_t base;
    uint64_t bytes;
    void* local;
  };
  struct Known {  // an entry of the peer's table
    uint64_t id;
    uint64_t base;
    uint64_t bytes;
    int64_t fd;
  };
  /// Re-read the peer's table (known_) and unmap what it no longer lists.
  bool refresh();

  pid_t pid_ = 0;
  const void* registry_ = nullptr;   // the peer's table, mapped read-only
  uint64_t version_ = ~uint64_t{0};  // registry version the cache was last checked against
  std::vector<Known> known_;         // the table at version_
  std::vector<Mapping> maps_;
  size_t last_ = 0;  // index of the last mapping that served a read
};

}  // namespace ferry::transport::shm
