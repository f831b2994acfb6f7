// Two-level collectives for communicators that span hosts.
//
// A communicator whose ranks sit on several hosts, some with more than one rank, gets two private
// sub-communicators per rank (host_layout.hpp): `local`, its host's ranks, which run the
// single-host algorithms through shared memory, and `cross`, the ranks of its local index on the
// other hosts, which talk over the network (FERRY_TRANSPORT=auto: ferry's own TCP transport, or UCX
// where an RDMA port is active; createTransport in runtime/comm_build.cpp). Each collective is then
// a short schedule of calls on the two. All-reduce, the case the network makes expensive:
//
//   local reduce-scatter      each of a host's L ranks ends with 1/L of the host's sum
//   cross all-reduce          the L slices cross the network at once, one per local rank
//   local all-gather          every rank assembles the whole vector again
//
// so every host sends and receives 2(H-1)/H of the vector over its link (H hosts), where a flat
// ring over all n ranks sends 2(n-1)/n: with 2 hosts of 2 ranks, 1x against 1.5x. On two hosts
// joined by a link much slower than memory, large all-reduces go through each host's first rank
// in chunks instead, the crossing overlapped with the intra-host steps (allReduceTwoHosts). Reduce-scatter
// and all-gather go the same way (the blocks permuted so each local rank's share is contiguous),
// all-to-all aggregates every host's blocks per destination host before they cross (one message
// per pair of hosts and local index instead of one per pair of ranks), broadcast and reduce cross
// once, in the cross group of the root's local index. Layouts where hosts hold different numbers
// of ranks keep all-reduce, broadcast and reduce on two levels through each host's first rank
// (the leader); the others fall back to the flat algorithms (the tuner knows).
//
// Failures: a step that fails names the step and the ranks of the sub-communicator in this
// communicator's numbering. The sub-communicators' waits also poll this communicator's watchdog,
// so a rank that fails in one level releases the ranks waiting in the other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/comm.hpp"
#include "collectives/table.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime/host_layout.hpp"

namespace ferry {

class Hierarchy final : public coll::TwoLevels {
 public:
  /// Builds a sub-communicator of `size` ranks through `rv` (this rank is `rank` there).
  using Factory = std::function<Result<std::unique_ptr<Comm>>(Rendezvous& rv, int rank, int size)>;
  /// Whether the parent's own watchdog stopped the sub-communicators (an abort, or an error another
  /// rank reported): the part of their error that the parent's watchdog gave them then already
  /// speaks in the parent's numbering (renumberBeforeParent, runtime/host_layout.hpp).
  using ParentStopped = std::function<bool()>;

  /// Every rank of `parent` calls this at the same point: builds the local and cross
  /// sub-communicators through the parent's own collectives.
  static Result<std::unique_ptr<Hierarchy>> create(Comm& parent, const HostLayout& layout, const Factory& make,
                                                   ParentStopped parentStopped);
  ~Hierarchy();

  const HostLayout& layout() const { return layout_; }
  Comm& local() { return *local_; }
  Comm& cross() { return *cross_; }
  /// Ranks on this rank's host, and hosts.
  int localSize() const { return local_->size(); }
  int hosts() const { return layout_.hosts; }

  /// Two hosts: all-reduces of at least two chunks of `bytes` go through each host's first rank,
  /// chunk by chunk (allReduceTwoHosts); 0: never. The same on every rank.
  void setStreamChunkBytes(size_t bytes) { streamChunkBytes_ = bytes; }
  size_t streamChunkBytes() const { return streamChunkBytes_; }

  /// The schedules (see above); buffers and counts as Comm's collectives, already validated.
  /// The hierarchical rows of the algorithm table run here: the call's collective, below.
  Status run(const Call& call) override;

  Status allReduce(const void* in, void* out, size_t count, DataType type, RedOp op);
  Status reduceScatter(const void* in, void* out, size_t recvCount, DataType type, RedOp op);
  Status allGather(const void* in, void* out, size_t sendCount, DataType type);
  Status allToAll(const void* in, void* out, size_t count, DataType type);
  Status broadcast(const void* in, void* out, size_t count, DataType type, int root);
  Status reduce(const void* in, void* out, size_t count, DataType type, RedOp op, int root);

 private:
  Hierarchy() = default;
  /// `st` with the step and the sub-communicator's members named, when it failed; ranks the
  /// sub-communicator's message names are translated to this communicator's numbering.
  Status step(const Status& st, const char* call, const char* what, bool crossLevel) const;
  /// All-reduce on two hosts over links much slower than memory: each host's first rank takes
  /// the host's sum of one chunk (intra-host reduce), exchanges it with the other host's first
  /// rank, adds the two and hands the result to its host (intra-host broadcast), and the three
  /// steps of consecutive chunks overlap: chunk k crosses while chunk k+1 is reduced and chunk
  /// k-1 broadcast. One flow per direction between the hosts, kept full from the first chunk to
  /// the last, where the per-local-index schedule runs L flows that share the link and the two
  /// intra-host steps before and after the crossing.
  Status allReduceTwoHosts(const uint8_t* in, uint8_t* out, size_t count, DataType type, RedOp op);
  /// The error of a schedule that needs hosts of equal sizes, called on others.
  Status unevenLayout(const char* call) const;
  /// Scratch memory (ferry::hostAlloc: the local level reads it in place), `bytes` at least,
  /// slot 0 or 1; valid until the next call.
  Result<uint8_t*> scratch(int slot, size_t bytes);
  /// How n blocks of one rank's buffer are laid out: by rank; by local index, then host (j * H +
  /// h: each local index's blocks together, as the local level splits them); by host, then local
  /// index (h * L + j: each host's blocks together, as the cross level exchanges them).
  enum class Order { kRank, kLocalMajor, kHostMajor };
  size_t blockIndex(Order order, int host, int local) const;
  /// Copy every block (host h, local index j) of `bytes` from `from` in one order to `to` in another.
  void permute(const uint8_t* from, Order fromOrder, uint8_t* to, Order toOrder, size_t bytes) const;
  /// Whether rank order is local-major (rank = local * hosts + host): then the blocks of a cross
  /// group's ranks are already contiguous and no permutation is needed.
  bool localMajor() const;

  HostLayout layout_;
  int rank_ = 0;
  int host_ = 0;
  int localIndex_ = 0;
  ParentStopped parentStopped_;
  std::unique_ptr<Comm> local_;
  std::unique_ptr<Comm> cross_;
  void* scratch_[2] = {nullptr, nullptr};
  size_t scratchBytes_[2] = {0, 0};
  size_t streamChunkBytes_ = 0;
};

}  // namespace ferry
