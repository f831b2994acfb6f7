// What an algorithm runs with: the communicator's transport and resources, and one call's state.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "collectives/op.hpp"
#include "collectives/tag.hpp"
#include "ferry/status.hpp"
#include "base/deadline.hpp"
#include "transports/arena.hpp"
#include "transports/transport.hpp"

namespace ferry::coll {

/// Checks the runtime makes while a rank waits: abort requests, peers' liveness, errors other
/// ranks reported. Called every few milliseconds, never on the fast path.
class WaitHooks {
 public:
  virtual ~WaitHooks() = default;
  /// Ok to keep waiting on `peer`; otherwise the reason to stop.
  virtual Status poll(int peer) = 0;
  /// A wait in call #seq has blocked long: ask the other ranks for their calls (without waiting)
  /// and, at later calls, return kMismatch naming those whose answer shows another call #seq.
  virtual Status probeCalls(uint64_t seq, const OpDesc& mine) {
    (void)seq;
    (void)mine;
    return Status::ok();
  }
};

/// Where the call in progress stands, for state dumps from another thread (kill -USR1). Written
/// with relaxed stores by the calling thread; readers get a consistent-enough snapshot.
struct CallTrace {
  std::atomic<uint64_t> seq{0};            ///< sequence number of the current or last call
  std::atomic<const char*> call{nullptr};  ///< static description of the kind ("allReduce")
  std::atomic<size_t> count{0};
  std::atomic<uint64_t> desc{0};  ///< kind, type, op and root of the call (packDesc)
  std::atomic<const char*> phase{""};
  std::atomic<int> step{0};
  std::atomic<int> steps{0};
  std::atomic<int> peer{-1};  ///< awaited peer, -1 when not waiting
  std::atomic<bool> active{false};
  std::atomic<int64_t> startNs{0};  ///< steady clock, when the call started
};

/// A call's kind, type, op and root in one word, and back (its count travels apart).
inline uint64_t packDesc(const OpDesc& d) {
  return (static_cast<uint64_t>(d.kind) & 0xFF) | (static_cast<uint64_t>(d.type) & 0xFF) << 8 |
         (static_cast<uint64_t>(d.op) & 0xFF) << 16 | static_cast<uint64_t>(static_cast<uint32_t>(d.root)) << 32;
}
inline OpDesc unpackDesc(uint64_t v, size_t count) {
  return OpDesc{static_cast<CallKind>(v & 0xFF), count, static_cast<DataType>((v >> 8) & 0xFF),
                static_cast<RedOp>((v >> 16) & 0xFF), static_cast<int>(static_cast<uint32_t>(v >> 32))};
}

/// Host memory for intermediate results, owned by the communicator and grown on demand.
class Scratch {
 public:
  /// Where the memory comes from: aligned_alloc by default. The runtime hands single-host
  /// communicators memory peers can map (transports/shm/shared_memory.hpp), so a peer reading an
  /// intermediate result (a reduce's segments) copies it instead of a cross-memory read.
  /// alloc returns null on failure; the memory must be 64-byte aligned.
  struct Allocator {
    void* (*alloc)(size_t bytes);
    void (*free)(void* ptr);
  };
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  /// Take memory from `a` from now on (before the first get()).
  void setAllocator(Allocator a) { alloc_ = a; }
  /// At least `bytes` bytes, 64-byte aligned; valid until the next call.
  void* get(size_t bytes);
  ~Scratch();

 private:
  Allocator alloc_{nullptr, nullptr};
  void* data_ = nullptr;
  size_t size_ = 0;
};

class TwoLevels;

/// The communicator's side: long-lived, shared by every call.
struct Context {
  transport::Transport* transport = nullptr;
  int rank = 0;
  int size = 1;
  WaitHooks* hooks = nullptr;
  Scratch* scratch = nullptr;      ///< intermediate results of one call (e.g. reduce-scatter partials)
  Scratch* staging = nullptr;      ///< receive slots of the pipelines
  size_t sliceBytes = 256 * 1024;  ///< pipelining granularity
  int depth = 8;                   ///< receives posted ahead per ring
  bool checkMismatch = true;
  CallTrace* trace = nullptr;   ///< optional: the runtime's view of the call in progress
  TwoLevels* levels = nullptr;  ///< the two levels of a communicator spanning hosts (table.hpp), or null
  /// The rails ring (algorithms.hpp, railsAllReduce): the ranks host by host (position -> rank,
  /// every host's ranks ascending; empty: ranks are numbered host by host already), ranks per host
  /// where every host has as many (else 1), and rails: rings at once, one per NIC of a host.
  std::vector<int> hostOrder;
  int hostRanks = 1;
  int rails = 1;
  /// The ranks' shared memory when every rank is on this host (null otherwise): the single-host
  /// algorithms (arena_algorithms.cpp) run over it, and every collective announces itself in it so that a
  /// peer running something else is named within milliseconds whatever algorithm either runs.
  transport::Arena* arena = nullptr;
  size_t chunkBytes = 256 * 1024;  ///< single-host algorithms: bytes per read-and-reduce chunk
  /// Every rank can read every other's memory (cross-memory attach works between every pair): the
  /// same on every rank. Algorithms that read peers' buffers need it, mapped or not (a peer's
  /// buffer some rank cannot map is read that way).
  bool peerReads = false;
  /// Below this many bytes per call (the vector, or all ranks' blocks together) plans that read
  /// peers' shared buffers in place are not chosen (FERRY_SHARED_MIN_BYTES): not by the tuner,
  /// not by the pipelined reductions' switch; reads other plans make still go in place. The first
  /// access to each page of a peer's buffer not touched for a while costs a fault where the
  /// mailboxes stay warm; only large calls win back that cost (evidence: docs/PERFORMANCE.md,
  /// "Reading peers' buffers in place").
  size_t sharedMinBytes = size_t{32} << 20;
  /// Calls whose buffers on this host (every rank's input and output) add up to this many bytes
  /// write their outputs with streaming stores (kernels::copyStreaming; FERRY_STREAM_MIN_BYTES,
  /// by default the last-level cache): such an output is not cached when the call begins nor
  /// when its reader comes, and ordinary stores would first read each of its lines from memory.
  /// SIZE_MAX: never.
  size_t streamMinBytes = SIZE_MAX;
  /// Lower bounds of each rank's arena counter (counters only grow): a wait this already
  /// satisfies reads nothing from shared memory. A reader trailing a broadcast root, or a root
  /// whose readers are far enough along, then takes no cache miss on those counters.
  std::vector<uint64_t> seen;
  /// Whether, in the last call that looked (Exec::noteShared), every rank's announced buffers lay
  /// in memory its peers map (ferry::hostAlloc). Every rank looks in the same calls at the same
  /// headers, so every rank holds the same value: the tuner may choose by it.
  bool peersShared = false;
  /// This rank's eager heap (Exec::publishEager): where the next call's data goes, and the calls
  /// whose data is still there, in heap order from `eagerNext` on (oldest first), so a writer
  /// knows which call last used the bytes it is about to fill.
  struct EagerUse {
    uint64_t seq;
    size_t begin;
  };
  size_t eagerNext = 0;
  std::deque<EagerUse> eagerUses;
  /// Calls of this rank that no peer's call was compared with yet, per peer, oldest first, a run
  /// of the same call as one entry: a rank whose part waits on no peer (a small broadcast's root,
  /// a small reduce's senders) compares its call with each peer's call log once that peer noted
  /// the same call (Exec::finish). Calls older than the arena's ring depth are skipped: a peer's
  /// log may no longer hold them.
  struct Unchecked {  // calls first..last, all with this digest and description
    uint64_t first;
    uint64_t last;
    uint32_t digest;
    OpDesc desc;
  };
  struct UncheckedRing {
    std::vector<Unchecked> entries;
    size_t head = 0;  // oldest
    size_t size = 0;
  };
  std::vector<UncheckedRing> unchecked;  // entries: a power of two (the arena's ring depth)
  /// The newest run, not yet in the rings: every ring would get the same entry, so a stream of
  /// the same call extends this one (two compares and a store a call) and joins the rings when
  /// another call comes or before calls are compared (Exec::flushStreak).
  Unchecked streak{};
  bool hasStreak = false;
  size_t uncheckedCount = 0;  // ring entries, and the streak
  OpDesc lastUnchecked;       // the latest call kept
  /// The last call's fingerprint and digest (Exec's tag and call log), for the call that repeats
  /// it: loops of small calls ask them every call.
  struct Remembered {
    bool valid = false;
    OpDesc desc;
    uint32_t algorithm = 0, protocol = 0;
    uint32_t value = 0;
    uint32_t line = 0;  // lastDigest: the call as a line slot's header packs it
    bool holds(const OpDesc& d, uint32_t a = 0, uint32_t p = 0) const {
      return valid && d.kind == desc.kind && d.count == desc.count && d.type == desc.type && d.op == desc.op &&
             d.root == desc.root && a == algorithm && p == protocol;
    }
  };
  Remembered lastFingerprint, lastDigest;
  size_t uncheckedDepth = 0;  // entries of each ring
  /// Over messages, the last rank of a broadcast's chain acknowledges the call to the root with
  /// an empty message, and a reduce's root acknowledges it to the head of its chain; the receiving
  /// side posts a receive for it (a "guard"). A rank that took itself for the root receives another
  /// rank's data in its guard and names the disagreement. For calls of a few bytes one
  /// acknowledgement covers a stream of the same call: it is sent and its guard posted every
  /// kAckEvery calls and before any other call (Exec::begin), so a disagreement is named at the
  /// latest in the next different call. From kEagerAckBytes, every call is acknowledged, its guard
  /// posted before its data moves (a message that completes only once received would otherwise
  /// wait forever on a rank that took itself for the root too).
  struct PendingAck {
    transport::Request request;
    uint64_t seq;
    OpDesc desc;
  };
  struct AckDue {
    bool due = false;
    int peer = -1;
    uint64_t seq = 0;
    OpDesc desc;
  };
  static constexpr uint64_t kAckEvery = 64;
  static constexpr size_t kEagerAckBytes = 256 * 1024;
  AckDue ackToSend;                         // this rank owes `peer` an acknowledgement of call `seq`
  AckDue ackToExpect;                       // this rank has yet to post the guard for `peer`'s acknowledgement
  std::deque<PendingAck> acks;              // posted guards, oldest first
  std::deque<transport::Request> ackSends;  // acknowledgements in flight, retired once sent
  /// Requests abandoned by failed calls while UCX may still complete them; freed with the context.
  std::vector<std::unique_ptr<std::deque<transport::Request>>> graveyard;
};

/// Post the acknowledgement this rank still owes (Context::ackToSend), if any: Exec::begin sends
/// it before a different call, and the communicator before it closes its transport.
Status sendOwedAck(Context& ctx);

/// One call in progress: posts messages tagged for this call and waits for them with the call's
/// deadline, naming the operation, phase, step and peer in every error.
class Exec {
 public:
  /// The call fails with kTimeout when a wait blocks longer than `timeoutSeconds` (infinite, FERRY_TIMEOUT=none: never)
  /// past the call's first wait that blocks: calls that never block read no clock.
  Exec(Context& ctx, const OpDesc& desc, uint64_t seq, TagClass tagClass, double timeoutSeconds);
  ~Exec() {
    if (requests_ != nullptr) retireRequests();
    if (ctx_.trace != nullptr) ctx_.trace->active.store(false, std::memory_order_release);
  }
  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;

  int rank() const { return ctx_.rank; }
  int size() const { return ctx_.size; }
  Context& context() { return ctx_; }
  const Context& context() const { return ctx_; }
  const OpDesc& desc() const { return desc_; }
  uint64_t seq() const { return seq_; }
  TagClass tagClass() const { return tagClass_; }

  /// Name the phase and step for error messages ("reduce-scatter", step 2 of 3).
  void setPhase(const char* phase, int step, int steps) {
    phase_ = phase;
    step_ = step;
    steps_ = steps;
    if (ctx_.trace != nullptr) {
      ctx_.trace->phase.store(phase, std::memory_order_relaxed);
      ctx_.trace->step.store(step, std::memory_order_relaxed);
      ctx_.trace->steps.store(steps, std::memory_order_relaxed);
    }
  }

  /// Post a send / receive; the returned request stays valid for the life of this Exec. `as`
  /// (kept alive by the caller until the wait) replaces the call's description for this one
  /// message, for batches whose messages differ in count or type.
  Result<transport::Request*> send(int peer, const void* buf, size_t bytes, const OpDesc* as = nullptr);
  Result<transport::Request*> recv(int peer, void* buf, size_t bytes, const OpDesc* as = nullptr);
  /// Wait for one request; for a receive, check that the sender ran the same call and sent
  /// exactly the bytes expected.
  Status wait(transport::Request* req);
  /// Wait for every request posted so far.
  Status waitAll();
  // Single-host calls over the arena (ctx.arena != null). Phases count up from 1 within a call
  // (pipelined algorithms use two per chunk); the arena counter holds (seq << kPhaseBits) + phase.
  static constexpr int kPhaseBits = 24;

  /// Publish this call in the arena header with the algorithm and protocol the rank chose and two
  /// of its buffers that peers may read. No-op without an arena.
  void announce(uint32_t algorithm, uint32_t protocol, const void* addr0, const void* addr1);
  /// Before announce(): peers will read [addr, addr + bytes) of this rank's with readPeer() in this
  /// call; the arena may prepare it for that (Arena::exposeForRead). No-op without an arena.
  void exposeForRead(const void* addr, size_t bytes);
  /// This rank finished `phase` (1 .. 2^24-1) of the call; phase 0: it entered the call (posted
  /// by the runtime for every collective call, whatever its algorithm).
  void post(int phase);
  /// Wait until `peer` finished `phase` of this call; at phase 1 also check that it runs the
  /// same call (kMismatch naming both sides otherwise).
  Status await(int peer, int phase);
  /// await() every other rank, starting with rank+1.
  Status awaitAll(int phase);
  /// Before writing this call's mailbox: wait until every peer entered the previous call (so it
  /// finished reading what this rank wrote there two calls ago). Usually costs n loads.
  Status claimMailbox() { return claimSlots(2); }
  /// Before writing line slot `seq`: every peer entered call seq - depth + 1.
  Status claimRing() { return claimSlots(ctx_.arena->ringDepth()); }
  /// Buffers used in turn by calls seq mod `depth`: wait until every peer entered call
  /// seq - depth + 1, so it finished the call that last used this one.
  Status claimSlots(uint64_t depth);
  /// Wait until `peer`'s counter reaches `target` or, with `word`, that word (in `peer`'s
  /// segment, written before the counter) reaches `wordTarget`.
  Status awaitCounter(int peer, uint64_t target, const std::atomic<uint64_t>* word = nullptr, uint64_t wordTarget = 0);
  /// Calls of a few bytes travel in line slots (Arena::lineSlot), data, flag and call description
  /// in one or a few cache lines: a reader waits on, checks and copies that slot alone. The most
  /// data one carries (0: no line slots).
  size_t lineBytes() const {
    return ctx_.arena != nullptr ? ctx_.arena->lineSlotBytes() - sizeof(transport::LineHeader) : 0;
  }
  /// After announce(): claim this rank's line slot for this call (as a ring slot), fill it with
  /// `bytes` (<= lineBytes()) of `data`, then its flag, and post phase 1 (which wakes readers
  /// sleeping on the counter).
  Status publishLine(const void* data, size_t bytes);
  /// Wait for `peer`'s line slot of this call (publishLine()) and check that the peer runs the
  /// same call (kMismatch naming both otherwise); the slot's data, valid until this rank enters
  /// call seq + 1.
  Result<const uint8_t*> awaitLine(int peer);
  /// awaitLine() every other rank, starting with rank+1.
  Status awaitLines();
  /// The data in rank `r`'s line slot of this call (after publishLine() or awaitLine()).
  const uint8_t* lineData(int r) {
    return static_cast<const uint8_t*>(ctx_.arena->lineSlot(r, seq_)) + sizeof(transport::LineHeader);
  }
  /// One-way calls too big for a line slot and up to eagerMax() bytes go through the writer's
  /// eager heap (Arena::eagerHeap), which they fill in turn: the data there, its offset and size
  /// in the call's line slot. So the writer runs as many calls ahead of its readers as fit in the
  /// heap (at least 16), and waits only for the readers of the calls it overwrites.
  size_t eagerMax() const { return ctx_.arena != nullptr ? ctx_.arena->eagerBytes() / 16 : 0; }
  /// As publishLine(), for `bytes` (<= eagerMax()) of `data` through this rank's eager heap.
  Status publishEager(const void* data, size_t bytes);
  /// As awaitLine(), for data publishEager() placed: where it is, valid until this rank enters
  /// call seq + 1; kMismatch where the peer published another size.
  Result<const uint8_t*> awaitEager(int peer, size_t bytes);
  /// awaitEager() every other rank, starting with rank+1; eagerData() then finds their data.
  Status awaitEagers(size_t bytes);
  /// Rank `r`'s data of this call in its eager heap (after publishEager() or awaitEager()).
  const uint8_t* eagerData(int r);
  /// After the call succeeded on this rank: where it compared its call with no peer's (it waited
  /// on none), compare it with the call log of every peer that has noted the same call, and keep
  /// the others for later calls; compare what earlier calls kept. kMismatch names both calls.
  Status finish() {
    if (!ctx_.acks.empty()) FERRY_TRY(checkAcks(false));
    if (compared_ && ctx_.uncheckedCount == 0) return Status::ok();
    return checkUnchecked();
  }
  /// Before the call runs (after the Exec is made and, on one host, its phase 0 posted): where a
  /// stream of calls that waited on nobody ends (unchecked calls, outstanding acknowledgements),
  /// wait for the peers' side of them and compare.
  Status begin();
  /// The root of a chain's acknowledgement (see Context::acks): this rank expects one from
  /// `peer` for this call of `bytes`, or owes one to `peer`.
  Status expectAck(int peer, size_t bytes);
  Status oweAck(int peer, size_t bytes);
  /// Copy `bytes` at address `remote` of `peer`'s process into `local`.
  Status readPeer(int peer, uint64_t remote, void* local, size_t bytes);
  /// Where [remote, remote + bytes) of `peer` is mapped here (it lies in memory the peer
  /// allocated as shared), or null: read it with readPeer().
  const uint8_t* mappedPeer(int peer, uint64_t remote, size_t bytes) { return ctx_.arena->mapped(peer, remote, bytes); }
  /// After every rank announced this call (phase 1 awaited from all): whether every buffer any
  /// rank announced (null ones aside) is mappable by its peers. Records the answer in
  /// context().peersShared, unless no rank announced a buffer.
  bool noteShared();
  /// The buffer addresses `peer` announced for this call.
  uint64_t peerAddr(int peer, int which);
  /// Mailbox of rank `r` for this call's parity.
  uint8_t* slot(int r) { return static_cast<uint8_t*>(ctx_.arena->slot(r, static_cast<int>(seq_ & 1))); }
  /// Ok unless `peer` announced this call with different arguments, algorithm or protocol.
  Status checkPeerCall(int peer);
  /// Ok unless `peer`'s call `theirs` (with that algorithm and protocol) differs from this one.
  Status compareCall(int peer, const OpDesc& theirs, uint32_t algorithm, uint32_t protocol);

  /// After a failure: cancel every pending request and drive the transport until none is
  /// pending or `seconds` passed, so nothing writes into the caller's buffers afterwards.
  /// Returns false when some request could not be retired.
  bool drain(double seconds);

 private:
  Status failure(transport::Request* req, Status why);
  Status failure(int peer, bool sending, Status why);
  Status finishWait(transport::Request* req);
  Status checkReceive(transport::Request* req);
  /// What a call posted and has not retired: drained briefly, else kept in Context::graveyard.
  void retireRequests();
  Status checkUnchecked();
  /// Move Context::streak into every peer's ring.
  void flushStreak();
  Status compareUnchecked();
  Status uncheckedMismatch(int peer, uint64_t seq, const OpDesc& mine);
  Status checkAcks(bool all);
  Status sendAck();
  Status postGuard();
  /// Start the call's clock and deadline, at its first wait that blocks: a stream of small calls
  /// that never block then reads no clock, where a virtual machine's clock reads are a large share
  /// of a small call (evidence: docs/PERFORMANCE.md, "The call's clock starts at its first
  /// blocking wait").
  void startClock();

  Context& ctx_;
  OpDesc desc_;
  uint64_t seq_;
  TagClass tagClass_;
  bool repeatsPrevious_;  // the communicator's previous call had this description (Context::lastFingerprint)
  uint64_t tag_;
  uint32_t algorithm_ = 0;
  uint32_t protocol_ = 0;
  bool announced_ = false;
  bool compared_ = false;  // this call was compared with at least one peer's
  uint32_t digest_ = 0;    // of the call as announced (kind, count, type, op, root, algorithm, protocol)
  uint32_t lineCall_ = 0;  // the call as announced, packed for line slots' headers
  double timeout_;
  bool clockStarted_ = false;
  Deadline deadline_;  // valid once clockStarted_
  Clock::time_point start_;
  const char* phase_ = "";
  int step_ = 0;
  int steps_ = 0;
  std::unique_ptr<std::deque<transport::Request>> requests_;
};

}  // namespace ferry::coll
