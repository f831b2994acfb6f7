// Shared-memory Arena.
//
// Segment layout (one per rank, owned and initialised by that rank, mapped by every peer; a memfd,
// so nothing outlives the processes: segment.hpp):
//   page 0: Control: magic and identity, the progress counter, the futex word and sleeper count,
//           the two call headers, each on its own cache line so a spinning reader of one does not
//           slow the writer of another;
//   then:   the call log (a few bits per call, by sequence number: noteCall), two mailboxes of
//           slotBytes, page aligned, a ring of kRingDepth line slots (kLineSlotBytes each,
//           packed: 4 per page) and the eager heap (kEagerBytes).
//
// Waking: a waiter that has spun long enough registers in `sleepers`, re-reads the counter and
// sleeps on `wake` (FUTEX_WAIT on the value it read). post() stores the counter (release) and,
// only when it sees a sleeper, bumps `wake` and FUTEX_WAKEs. post() puts no store-load fence
// between the two: one would make every post wait until its stores, among them the data lines its
// readers are polling, had reached them, a cache-line transfer on every small call (evidence:
// docs/PERFORMANCE.md, "No fence between the arena's counter and its sleeper check"). So a waiter
// that registers while the poster's counter store still sits in the poster's store buffer can miss
// the wake-up; the store becomes visible within a microsecond or so (store buffers drain on their
// own, and at every context switch or VM exit), so a waiter's first sleep is kFirstSleepNs: a
// missed wake-up costs at most that. Later sleeps are 5 ms, so deadlines and the caller's poll
// (abort, dead peers) are checked even if every peer is gone.
#include "transports/shm/shm_arena.hpp"

#include <sched.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <algorithm>
#include <climits>
#include <ctime>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "transports/shm/huge_pages.hpp"
#include "transports/shm/segment.hpp"
#include "transports/shm/shared_memory.hpp"

namespace ferry::transport::shm {
namespace {

constexpr uint32_t kMagic = 0x41525246;  // "FRRA"
constexpr size_t kPage = 4096;
// Line slots (and the eager heap's descriptors in them): one-way calls let their writers run up
// to kRingDepth calls ahead of their readers, as eager sends would.
constexpr size_t kRingDepth = 512;
// The eager heap: one-way calls too big for a line slot fill it in turn (Exec::publishEager), so
// a writer runs ahead of its readers by as many calls as fit, kEagerBytes / size: no size at which
// the depth drops at once, where each drop of fixed slots was a cliff in a stream of calls
// (evidence: docs/PERFORMANCE.md, "The eager heap").
constexpr size_t kEagerBytes = 4 << 20;
// Line slots: calls of a few bytes with their flag and call description (LineHeader) in the same
// cache lines. 1 KiB holds up to 1008 B of data, up to where a line slot still beats the mailboxes
// (evidence: docs/PERFORMANCE.md, "Line slots of 1 KiB"), and packs the ring into 128 pages, where
// the 4 KiB ring slots take one page per call.
constexpr size_t kLineSlotBytes = 1024;
// The call log: a few bits per call (Arena::noteCall), by sequence number mod kCallLog. A rank
// can announce at most kRingDepth calls ahead of the slowest peer (it then waits in claimRing),
// so an entry outlives every reader by a wide margin.
constexpr size_t kCallLog = 2 * kRingDepth;
constexpr uint64_t kLogSeqMask = (uint64_t{1} << 28) - 1;
// Control page, then the call log.
constexpr size_t kHead = kPage + (kCallLog * sizeof(uint64_t) + kPage - 1) / kPage * kPage;
// The shortest spin an adaptive wait keeps (unless FERRY_SPIN_NS asks for less).
constexpr int64_t kMinSpinNs = 300;
// A waiter's first futex sleep (see "Waking" above): bounds what a missed wake-up costs.
constexpr long kFirstSleepNs = 50'000;
// A sched_yield that returns within this found nothing else to run on the core.
constexpr int64_t kLoneYieldNs = 3000;

struct alignas(64) PaddedHeader {
  CallHeader h;
};

struct Control {
  uint32_t magic;
  int32_t owner;
  int32_t size;
  int32_t pid;
  int32_t registryFd;  // the owner's shared-allocation registry (shared_memory.hpp), -1: none
  uint64_t slotBytes;
  alignas(64) std::atomic<uint64_t> posted;
  alignas(64) std::atomic<uint32_t> wake;
  std::atomic<uint32_t> sleepers;
  PaddedHeader headers[2];
};
static_assert(sizeof(Control) <= kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void cpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Sets the calling thread's timer slack to `ns` (0: leaves it) and restores it when destroyed.
class TimerSlack {
 public:
  explicit TimerSlack(unsigned long ns) {
    if (ns == 0) return;
    int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (old > 0 && static_cast<unsigned long>(old) > ns && prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0) == 0) old_ = old;
  }
  ~TimerSlack() {
    if (old_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_), 0, 0, 0);
  }
  TimerSlack(const TimerSlack&) = delete;
  TimerSlack& operator=(const TimerSlack&) = delete;

 private:
  int old_ = 0;
};

class ShmArena final : public Arena {
 public:
  explicit ShmArena(const ArenaOptions& o)
      : rank_(o.rank), size_(o.size), commId_(o.commId), slotBytes_((o.slotBytes + kPage - 1) & ~(kPage - 1)),
        spinNs_(o.spinNs), spinBudgetNs_(o.spinNs), yieldNs_(o.yieldNs), pollSleep_(o.pollSleep),
        huge_(o.hugePages ? processHugeBacking() : nullptr), maps_(o.size, nullptr), pids_(o.size, 0),
        peerMemory_(static_cast<size_t>(o.size)) {}

  ~ShmArena() override {
    sealed();
    for (int r = 0; r < size_; ++r) {
      if (maps_[r] != nullptr) munmap(maps_[r], segmentBytes());
    }
  }

  Status init() {
    // Cross-memory attach needs ptrace access to the reader; under Yama's restricted mode only
    // declared tracers have it. Declaring any process is what the peers of a job need; it grants
    // nothing a process of the same user could not already get by other means.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    probe_ = kMagic ^ static_cast<uint64_t>(getpid());
    char name[96];
    std::snprintf(name, sizeof(name), "ferry-arena-%016llx-%d", static_cast<unsigned long long>(commId_), rank_);
    name_ = name;
    auto fd = createSegment(name_, segmentBytes());
    FERRY_TRY(fd);
    fd_ = *fd;
    void* p = mmap(nullptr, segmentBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      return makeError(ErrorCode::kSystemError, "cannot map shared segment %s: %s", name, std::strerror(errno));
    }
    maps_[rank_] = p;
    pids_[rank_] = getpid();
    prefault(rank_, true);
    Control* c = control(rank_);
    c->owner = rank_;
    c->size = size_;
    c->pid = static_cast<int32_t>(getpid());
    c->registryFd = registryFd();
    c->slotBytes = slotBytes_;
    c->posted.store(0, std::memory_order_relaxed);
    c->wake.store(0, std::memory_order_relaxed);
    c->sleepers.store(0, std::memory_order_relaxed);
    for (auto& h : c->headers) h.h.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    c->magic = kMagic;
    return Status::ok();
  }

  // [pid: 8 bytes][address of probe_: 8][segment descriptor: 8][segment name]
  std::vector<uint8_t> localAddress() const override {
    std::vector<uint8_t> a(24);
    int64_t pid = getpid();
    uint64_t probeAddr = reinterpret_cast<uintptr_t>(&probe_);
    int64_t fd = fd_;
    std::memcpy(a.data(), &pid, 8);
    std::memcpy(a.data() + 8, &probeAddr, 8);
    std::memcpy(a.data() + 16, &fd, 8);
    a.insert(a.end(), name_.begin(), name_.end());
    return a;
  }

  Status connect(const std::vector<std::vector<uint8_t>>& addrs) override {
    canRead_ = true;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (addrs[p].size() <= 24 || addrs[p].size() > 24 + 90) {
        return makeError(ErrorCode::kInternalError, "rank %d published a malformed shared-memory arena address", p);
      }
      int64_t pid = 0, fd = -1;
      uint64_t probeAddr = 0;
      std::memcpy(&pid, addrs[p].data(), 8);
      std::memcpy(&probeAddr, addrs[p].data() + 8, 8);
      std::memcpy(&fd, addrs[p].data() + 16, 8);
      pids_[p] = static_cast<pid_t>(pid);
      std::string name(addrs[p].begin() + 24, addrs[p].end());
      auto mapped = mapPeerSegment(pids_[p], fd, name, segmentBytes());
      if (!mapped.isOk()) {
        return makeError(mapped.status().code(), "rank %d cannot map rank %d's shared segment: %s", rank_, p,
                         mapped.status().message().c_str());
      }
      void* m = *mapped;
      maps_[p] = m;
      prefault(p, false);
      Control* c = control(p);
      if (c->magic != kMagic || c->owner != p || c->size != size_ || c->slotBytes != slotBytes_) {
        return makeError(ErrorCode::kInternalError,
                         "rank %d's shared segment %s does not belong to this communicator (owner %d, size %d)", p,
                         name.c_str(), c->owner, c->size);
      }
      // Peers' shared allocations (ferry::hostAlloc) are mapped on first use; none if this fails.
      peerMemory_[p] = std::make_unique<PeerMemory>();
      if (!peerMemory_[p]->attach(pids_[p], c->registryFd)) peerMemory_[p].reset();
      // Single-copy reads need ptrace access to the peer; containers and hardened kernels may
      // refuse it. Probe once; the runtime falls back to copies through the mailboxes.
      uint64_t seen = 0;
      iovec local{&seen, sizeof(seen)};
      iovec remote{reinterpret_cast<void*>(probeAddr), sizeof(seen)};
      ssize_t got = process_vm_readv(pids_[p], &local, 1, &remote, 1, 0);
      if (got != static_cast<ssize_t>(sizeof(seen)) || seen != (kMagic ^ static_cast<uint64_t>(pid))) {
        if (canRead_) {
          FERRY_INFO(log::kTransport,
                     "cross-memory attach to rank %d (pid %lld) is not permitted (%s): large "
                     "messages on this host take two copies through shared memory",
                     p, static_cast<long long>(pid), got < 0 ? std::strerror(errno) : "probe mismatch");
        }
        canRead_ = false;
      }
    }
    return Status::ok();
  }

  // Peers have mapped the segment: its descriptor served only them.
  void sealed() override {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t slotBytes() const override { return slotBytes_; }
  bool canRead() const override { return canRead_; }

  void* slot(int r, int parity) override {
    return static_cast<char*>(maps_[r]) + kHead + static_cast<size_t>(parity & 1) * slotBytes_;
  }
  CallHeader& header(int r, int parity) override { return control(r)->headers[parity & 1].h; }
  size_t ringDepth() const override { return kRingDepth; }
  void* lineSlot(int r, uint64_t index) override {
    return static_cast<char*>(maps_[r]) + kHead + 2 * slotBytes_ + (index % kRingDepth) * kLineSlotBytes;
  }
  size_t lineSlotBytes() const override { return kLineSlotBytes; }
  uint8_t* eagerHeap(int r) override {
    return static_cast<uint8_t*>(maps_[r]) + kHead + 2 * slotBytes_ + kRingDepth * kLineSlotBytes;
  }
  size_t eagerBytes() const override { return kEagerBytes; }

  void post(uint64_t value) override {
    Control* c = control(rank_);
    c->posted.store(value, std::memory_order_release);
    // No fence before this load ("Waking" above): a sleeper registering right now may be missed.
    if (c->sleepers.load(std::memory_order_relaxed) != 0) {
      c->wake.fetch_add(1, std::memory_order_seq_cst);
      futex(&c->wake, FUTEX_WAKE, INT_MAX, nullptr);
    }
  }

  uint64_t posted(int r) const override { return control(r)->posted.load(std::memory_order_acquire); }

  Status wait(int r, uint64_t target, Deadline deadline, const std::function<Status()>& poll,
              const std::atomic<uint64_t>* word, uint64_t wordTarget) override {
    Control* c = control(r);
    // The spin polls one line: the word where one is given (its writer posts the counter after),
    // else the counter. Later stages, which sleep on the counter, check both.
    const std::atomic<uint64_t>* spinOn = word != nullptr ? word : &c->posted;
    const uint64_t spinTarget = word != nullptr ? wordTarget : target;
    auto done = [&] {
      return (word != nullptr && word->load(std::memory_order_acquire) >= wordTarget) ||
             c->posted.load(std::memory_order_acquire) >= target;
    };
    if (spinOn->load(std::memory_order_acquire) >= spinTarget) return Status::ok();
    Clock::time_point start = Clock::now();
    Clock::time_point spinUntil = start + std::chrono::nanoseconds(spinBudgetNs_);
    // Spinning only pays while the awaited peer runs on another core. When it shares ours (more
    // ranks than cores, or other processes crowding the cores) every spin runs to its end while
    // the peer cannot run, and a call of a few bytes takes the whole spin. So the budget adapts:
    // halved by each wait that outlasts it while the core was wanted elsewhere, doubled back (up
    // to spinNs_) by each that ends within it, or soon after while nothing else wanted the core
    // (the yields below tell). The clock is read every 8 pauses: a pause takes 10 to 140 cycles
    // depending on the CPU (evidence: docs/PERFORMANCE.md, "The arena's adaptive spin").
    for (unsigned i = 1;; ++i) {
      cpuPause();
      if (spinOn->load(std::memory_order_acquire) >= spinTarget) {
        spinBudgetNs_ = std::min(spinNs_, 2 * spinBudgetNs_);
        return Status::ok();
      }
      if ((i & 7) == 0 && Clock::now() >= spinUntil) break;
    }
    // Then yield for a while: when ranks outnumber cores the peer we wait for is often runnable
    // on our own core, and yielding hands it the core at once, where sleeping would add a
    // wake-up through the kernel. With a core per rank, sched_yield returns at once.
    const Clock::time_point yieldFrom = Clock::now();
    Clock::time_point yieldUntil = yieldFrom + std::chrono::nanoseconds(yieldNs_);
    for (unsigned i = 1;; ++i) {
      sched_yield();
      if (done()) {
        // If no yield gave the core away (each returned within kLoneYieldNs), nothing else wanted
        // this core: the spin would have caught the peer as cheaply, and sooner than a loop of
        // system calls, so spin longer next time. Otherwise the peer (or another process) ran
        // here in our place: spinning would only have delayed it, so spin less.
        const int64_t yielded = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - yieldFrom).count();
        if (yielded <= static_cast<int64_t>(i) * kLoneYieldNs) {
          spinBudgetNs_ = std::min(spinNs_, 2 * spinBudgetNs_);
        } else {
          spinBudgetNs_ = std::max(std::min<int64_t>(spinNs_, kMinSpinNs), spinBudgetNs_ / 2);
        }
        return Status::ok();
      }
      if ((i & 7) == 0 && Clock::now() >= yieldUntil) break;
    }
    spinBudgetNs_ = std::max(std::min<int64_t>(spinNs_, kMinSpinNs), spinBudgetNs_ / 2);
    Clock::time_point nextCheck = Clock::now();
    const timespec firstSleep{0, kFirstSleepNs}, nap{0, 5'000'000};
    bool slept = false;
    long napNs = 2000;
    // The kernel lengthens every sleep by the thread's timer slack (50 us by default), which
    // would make the first naps 25 times longer than asked; narrowed while this wait naps.
    TimerSlack slack(pollSleep_ ? 1000 : 0);
    for (;;) {
      if (pollSleep_) {
        // Oversubscribed: short timed naps. The poster never pays a wake-up syscall, so a rank
        // that runs ahead (a broadcast root) keeps its core, and nappers catch up in batches.
        timespec ts{0, napNs};
        nanosleep(&ts, nullptr);
        napNs = std::min<long>(napNs * 2, 100000);
      } else {
        c->sleepers.fetch_add(1, std::memory_order_seq_cst);
        uint32_t w = c->wake.load(std::memory_order_seq_cst);
        if (c->posted.load(std::memory_order_seq_cst) < target) {
          futex(&c->wake, FUTEX_WAIT, w, slept ? &nap : &firstSleep);
        }
        slept = true;
        c->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (done()) return Status::ok();
      Clock::time_point now = Clock::now();
      if (now >= nextCheck) {
        nextCheck = now + std::chrono::milliseconds(5);
        if (deadline.expired()) {
          return makeError(ErrorCode::kTimeout, "timed out after %.1f s (FERRY_TIMEOUT)", secondsSince(start));
        }
        if (poll) {
          Status st = poll();
          // The peer may have posted and exited between our last look and the poll.
          if (!st.isOk()) return done() ? Status::ok() : st;
        }
      }
    }
  }

  // An entry: the low 28 bits of seq, the digest, the 4 bits. An entry is rewritten kCallLog
  // calls later, so 28 bits of seq tell its call apart from any other a reader can ask about.
  void noteCall(uint64_t seq, uint32_t bits, uint32_t digest) override {
    const uint64_t v = (seq & kLogSeqMask) << 36 | uint64_t{digest} << 4 | (bits & 15u);
    callLog(rank_)[seq % kCallLog].store(v, std::memory_order_relaxed);
  }

  bool callBits(int r, uint64_t seq, uint32_t* bits, uint32_t* digest) const override {
    uint64_t v = callLog(r)[seq % kCallLog].load(std::memory_order_relaxed);
    if ((v >> 36) != (seq & kLogSeqMask)) return false;
    *bits = static_cast<uint32_t>(v & 15u);
    if (digest != nullptr) *digest = static_cast<uint32_t>(v >> 4);
    return true;
  }

  uint64_t matchCalls(int r, uint64_t first, uint64_t last, uint32_t digest, bool* differs) const override {
    *differs = false;
    const std::atomic<uint64_t>* log = callLog(r);
    for (uint64_t seq = first; seq <= last; ++seq) {
      const uint64_t v = log[seq % kCallLog].load(std::memory_order_relaxed);
      if ((v >> 36) != (seq & kLogSeqMask)) return seq;
      if (static_cast<uint32_t>(v >> 4) != digest) {
        *differs = true;
        return seq;
      }
    }
    return last + 1;
  }

  const uint8_t* mapped(int r, uint64_t remote, size_t bytes) override {
    PeerMemory* m = peerMemory_[static_cast<size_t>(r)].get();
    return m != nullptr ? m->map(remote, bytes) : nullptr;
  }

  bool mappable(const void* addr, size_t bytes) const override { return isShared(addr, bytes); }

  void exposeForRead(const void* addr, size_t bytes) override {
    if (huge_ == nullptr || addr == nullptr || bytes < huge_->regionBytes() || !canRead_) return;
    if (isShared(addr, bytes)) return;  // peers map it: read() copies without pinning pages
    huge_->offer(addr, bytes);
  }

  Status read(int r, uint64_t remote, void* local, size_t bytes) override {
    if (const uint8_t* m = mapped(r, remote, bytes)) {
      std::memcpy(local, m, bytes);
      return Status::ok();
    }
    auto* dst = static_cast<char*>(local);
    while (bytes > 0) {
      iovec l{dst, bytes};
      iovec rm{reinterpret_cast<void*>(remote), bytes};
      ssize_t got = process_vm_readv(pids_[r], &l, 1, &rm, 1, 0);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        return makeError(got < 0 && errno == ESRCH ? ErrorCode::kRemoteError : ErrorCode::kSystemError,
                         "cannot read %zu bytes at 0x%llx of rank %d (pid %d): %s", bytes,
                         static_cast<unsigned long long>(remote), r, static_cast<int>(pids_[r]),
                         got < 0 ? std::strerror(errno) : "nothing read");
      }
      dst += got;
      remote += static_cast<uint64_t>(got);
      bytes -= static_cast<size_t>(got);
    }
    return Status::ok();
  }

 private:
  size_t ringsBytes() const { return kRingDepth * kLineSlotBytes + kEagerBytes; }
  size_t segmentBytes() const { return kHead + 2 * slotBytes_ + ringsBytes(); }
  std::atomic<uint64_t>* callLog(int r) const {
    return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(maps_[r]) + kPage);
  }

  // Map the control page, the call log and the rings now (touchPages): a stream of small calls
  // walks through a new ring slot every call, and a first access in each of the n ranks on the
  // way would cost more than the call (evidence: docs/PERFORMANCE.md, "Touching the arena's rings
  // when it connects"). The owner's segment is fresh
  // (zero) and its control page written by init(); mailboxes are reused every other call and
  // fault in once.
  void prefault(int r, bool write) {
    char* base = static_cast<char*>(maps_[r]);
    const size_t from = write ? kPage : 0;
    touchPages(base + from, kHead - from, write);
    touchPages(base + kHead + 2 * slotBytes_, ringsBytes(), write);
  }
  Control* control(int r) const { return static_cast<Control*>(maps_[r]); }

  int rank_;
  int size_;
  uint64_t commId_;
  size_t slotBytes_;
  int64_t spinNs_;
  int64_t spinBudgetNs_;  // how long the next wait spins (adapted by wait())
  int64_t yieldNs_;
  bool pollSleep_;
  HugeBacking* const huge_;  // null: plain buffers stay on the pages they have
  std::vector<void*> maps_;
  std::vector<pid_t> pids_;
  std::vector<std::unique_ptr<PeerMemory>> peerMemory_;  // per peer; null: its memory is not mapped
  std::string name_;  // the segment's memfd name, which peers check before they map it
  int fd_ = -1;       // the segment until sealed(): peers open it as /proc/<pid>/fd/<fd_>
  bool canRead_ = false;
  uint64_t probe_ = 0;
};

}  // namespace

Result<std::unique_ptr<Arena>> createShmArena(const ArenaOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return makeError(ErrorCode::kInvalidArgument, "shared-memory arena: rank %d of %d is invalid", options.rank,
                     options.size);
  }
  auto a = std::make_unique<ShmArena>(options);
  FERRY_TRY(a->init());
  return std::unique_ptr<Arena>(std::move(a));
}

}  // namespace ferry::transport::shm
