// ferry's C++ API: communicators and collectives on host memory.
//
// A Comm is one rank's handle on a group of ranks. Every collective is called by every rank of the
// communicator with matching arguments, and returns when this rank's part is complete (its output
// is ready and its input may be reused). Errors are returned, never thrown. After a remote or
// asynchronous failure (a peer died, a deadline passed, ranks disagreed) the communicator's error
// is sticky: every later call returns it, on every rank that learned of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/call.hpp"
#include "ferry/status.hpp"
#include "ferry/types.hpp"
#include "ferry/work.hpp"

namespace ferry {

/// Identifies one job's rendezvous, as ncclUniqueId: where the root listens and the job secret.
/// One rank creates it and passes the bytes to the others (any way it likes), who all call
/// Comm::create with it.
struct UniqueId {
  uint8_t bytes[128] = {};

  /// Start a rendezvous root in this process (on FERRY_SOCKET_IFNAME's address, else loopback)
  /// and describe it, with a fresh random secret.
  static Result<UniqueId> create();
  /// 256 hex digits, for passing through an environment variable or a file.
  std::string toHex() const;
  static Result<UniqueId> fromHex(const std::string& hex);
};

/// split()'s color for ranks that join no new communicator (NCCL_SPLIT_NOCOLOR).
inline constexpr int kSplitNoColor = -1;

/// One transfer of a Comm::sendRecv batch.
struct P2pOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  void* buffer = nullptr;  ///< read for a send, written for a receive
  size_t count = 0;
  DataType type = DataType::kUint8;
  int peer = -1;  ///< may be this rank: the transfer is then a local copy

  static P2pOp send(const void* buf, size_t count, DataType type, int peer) {
    return {Kind::kSend, const_cast<void*>(buf), count, type, peer};
  }
  static P2pOp recv(void* buf, size_t count, DataType type, int peer) { return {Kind::kRecv, buf, count, type, peer}; }
};

/// One rank's handle on a communicator.
class Comm {
 public:
  /// Join the job `id` as `rank` of `size` ranks. Blocks until every rank joined or the deadline
  /// (FERRY_TIMEOUT) passed; the error then names the ranks that never arrived.
  static Result<std::unique_ptr<Comm>> create(const UniqueId& id, int rank, int size);
  /// Join from the environment: rank and size from ferryrun, torchrun, Open MPI, PMI or Slurm; the
  /// rendezvous at FERRY_ADDR (or MASTER_ADDR:MASTER_PORT), where rank 0 listens; the secret from
  /// FERRY_SECRET when set.
  static Result<std::unique_ptr<Comm>> fromEnv();
  /// As create(), and this rank drives CUDA device `device` (>= 0): its GPU resources are set up
  /// during init, and collectives on device buffers run as ferry's kernels on the caller's stream.
  static Result<std::unique_ptr<Comm>> create(const UniqueId& id, int rank, int size, int device);
  /// Several ranks in this process (ncclCommInitAll): rank i drives CUDA device devices[i].
  /// Repeats are allowed, so several ranks may share one GPU. With a CUDA build and no device
  /// (devices[i] == -1 for every i), the ranks are host-only.
  static Result<std::vector<std::unique_ptr<Comm>>> initAll(const std::vector<int>& devices);

  /// Destroy: waits for nothing; peers that are still running collectives on this communicator
  /// will see this rank as gone.
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// Collective over this communicator: ranks passing the same color form a new communicator,
  /// ordered by key then by rank here. Ranks passing kSplitNoColor get a null pointer.
  Result<std::unique_ptr<Comm>> split(int color, int key);

  /// A new communicator of this one's ranks without those in `exclude` and without those found
  /// dead (ncclCommShrink): every remaining rank calls it, with the same list; ranks keep their
  /// order. It works after this communicator failed (a peer died, a deadline passed), when the
  /// transport is closed and the job's rendezvous root may be gone: the ranks meet again over TCP
  /// (each listens from init, see runtime/shrink.hpp). The lowest remaining rank leads; it leaves
  /// out a rank not in `exclude` only once that rank's process is gone, and otherwise waits for it
  /// until the deadline (FERRY_TIMEOUT). This communicator stays as it is (abort() or destroy it).
  Result<std::unique_ptr<Comm>> shrink(const std::vector<int>& exclude = {});

  int rank() const;
  int size() const;
  /// Random 64-bit id shared by the ranks of this communicator (for logs).
  uint64_t id() const;
  /// Calls so far (here and in the communicator's two levels) that the tuner ran to measure
  /// candidate plans (FERRY_TUNE_TRIALS): the first calls of each kind and size. A benchmark warms
  /// up until this stops growing, so that its timed calls all run the plan that was kept.
  uint64_t measuredCalls() const;
  /// The tuner's predicted seconds for one call of `kind` moving `bytes` (the vector for all-reduce,
  /// broadcast and reduce; one rank's block for the others) with the plan it would pick; 0 where the
  /// model knows nothing (one rank, point to point). What ncclGroupSimulateEnd reports.
  double predictSeconds(CallKind kind, size_t bytes) const;
  /// Ok, or the sticky error every call now returns.
  Status error() const;
  /// Mark the communicator failed; blocked and later calls return kAborted.
  void abort(const std::string& reason = "aborted by the application");
  /// The CUDA device this rank drives, or -1.
  int device() const;
  /// Reproducible mode (FERRY_REPRODUCIBLE sets the default): all-reduce, reduce-scatter and reduce
  /// of float16, float32, float64 and bfloat16 with sum or avg give bits that depend only on each
  /// element's values on the ranks, whatever the algorithm, protocol, message size, call split,
  /// rank order and placement (docs/RELIABILITY.md, "Reproducible reductions"). Every rank sets
  /// the same value between the same calls (a rank that differs is reported as a mismatch); split()
  /// passes it on. On the GPU kernel path, device buffers of calls it changes are staged through
  /// host memory (with the rest of their group); where one process holds several ranks that is
  /// impossible, and such calls fail with kInvalidUsage.
  void setReproducible(bool on);
  bool reproducible() const;
  /// Device memory this communicator holds for its kernels (FIFOs, counters), in bytes.
  size_t deviceMemoryBytes() const;

  /// Run `call` (every method below builds one): validated once, then stream-ordered where
  /// call.stream is set (the overloads taking a Stream) and otherwise now, on the host, returning
  /// when this rank's part is complete. Errors name call.name().
  Status collective(const Call& call);
  /// collective(call) queued with enqueue(): the buffers must stay valid until the work is done.
  std::shared_ptr<Work> collectiveAsync(const Call& call);

  /// recv[i] = op over ranks of send[i], for i < count. In place when send == recv.
  Status allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  /// recv[i] = op over ranks of send[rank * recvCount + i]. In place when recv == send + rank*recvCount.
  Status reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op);
  /// recv[r * sendCount + i] = rank r's send[i]. In place when send == recv + rank*sendCount.
  Status allGather(const void* send, void* recv, size_t sendCount, DataType type);
  /// recv[r * count + i] = rank r's send[rank * count + i]. In place when send == recv.
  Status allToAll(const void* send, void* recv, size_t count, DataType type);
  /// recv = root's send on every rank (send is read on the root only).
  Status broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  /// On root, recv[i] = op over ranks of send[i] (recv is written on the root only).
  Status reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root);
  /// Send count elements to `peer`, which calls recv with the same count and type.
  Status send(const void* buf, size_t count, DataType type, int peer);
  Status recv(void* buf, size_t count, DataType type, int peer);
  /// Post every transfer of `ops` at once, then wait for all (NCCL's grouped send/recv): matching
  /// sends and receives complete whatever order each rank lists them in. Transfers between this
  /// rank and itself are copies, paired in the order they appear. Between two ranks, transfers
  /// pair in order too, so their counts and types must agree one by one.
  Status sendRecv(const std::vector<P2pOp>& ops);
  /// Returns once every rank has entered the barrier.
  Status barrier();

  /// Register a host buffer this rank passes call after call (NCCL's ncclCommRegister): its pages
  /// become shared memory in place, so calls on it run as on hostAlloc memory (ferry::hostRegister
  /// in ferry/memory.hpp says what that asks of the caller). Device memory needs no registration
  /// (the stream-ordered path maps peers' buffers itself) and is refused. Returns the handle for
  /// deregisterBuffer; deregister before freeing the buffer.
  Result<void*> registerBuffer(void* buf, size_t bytes);
  Status deregisterBuffer(void* handle);

  /// Stream-ordered collectives (NCCL's semantics). With device buffers (on a communicator created
  /// with a device) the operation is enqueued on `stream` and the call returns without waiting for
  /// the GPU; it completes in stream order and may be captured in a CUDA graph. With host buffers it
  /// runs now, after the work already on `stream` (a null stream: at once, without CUDA).
  /// Between groupStart() and groupEnd() the calls are only recorded.
  Status allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op, Stream stream);
  Status reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op, Stream stream);
  Status allGather(const void* send, void* recv, size_t sendCount, DataType type, Stream stream);
  Status allToAll(const void* send, void* recv, size_t count, DataType type, Stream stream);
  Status broadcast(const void* send, void* recv, size_t count, DataType type, int root, Stream stream);
  Status reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root, Stream stream);
  Status send(const void* buf, size_t count, DataType type, int peer, Stream stream);
  Status recv(void* buf, size_t count, DataType type, int peer, Stream stream);

  /// Asynchronous operation: queue `op` to run on this communicator's progress thread after
  /// everything queued before it, and return at once. `op` may call any method of this
  /// communicator (they run in its order); the buffers it uses must stay valid until the work is
  /// done. A blocking call made meanwhile from another thread waits for the queue to drain first.
  std::shared_ptr<Work> enqueue(std::function<Status(Comm&)> op);
  /// The host calls above queued with enqueue() (collectiveAsync).
  std::shared_ptr<Work> allReduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op);
  std::shared_ptr<Work> reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type, RedOp op);
  std::shared_ptr<Work> allGatherAsync(const void* send, void* recv, size_t sendCount, DataType type);
  std::shared_ptr<Work> broadcastAsync(const void* send, void* recv, size_t count, DataType type, int root);
  std::shared_ptr<Work> allToAllAsync(const void* send, void* recv, size_t count, DataType type);
  std::shared_ptr<Work> reduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op, int root);
  std::shared_ptr<Work> sendAsync(const void* buf, size_t count, DataType type, int peer);
  std::shared_ptr<Work> recvAsync(void* buf, size_t count, DataType type, int peer);
  std::shared_ptr<Work> barrierAsync();

  struct Impl;

 private:
  explicit Comm(std::unique_ptr<Impl> impl);
  /// The last step of every way to make a communicator: a communicator spanning hosts builds its
  /// two levels (runtime/hierarchy.hpp) and measures the network between them.
  static Result<std::unique_ptr<Comm>> finish(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Group calls for the stream-ordered collectives (ncclGroupStart / ncclGroupEnd): the calls this
/// thread makes in between, on any communicators, are issued at the outermost groupEnd(), each
/// communicator's device work fused into as few kernel launches as fit; send/recv pairs inside a
/// group never deadlock whatever their order on each rank. An error inside the group is returned
/// by groupEnd(). Groups nest.
Status groupStart();
Status groupEnd();

}  // namespace ferry
