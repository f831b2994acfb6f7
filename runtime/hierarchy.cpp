#include "runtime/hierarchy.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "ferry/memory.hpp"
#include "kernels/host/reduce.hpp"
#include "base/log.hpp"

namespace ferry {
namespace {

std::string listRanks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

Result<std::unique_ptr<Hierarchy>> Hierarchy::create(Comm& parent, const HostLayout& layout, const Factory& make,
                                                     ParentStopped parentStopped) {
  std::unique_ptr<Hierarchy> h(new Hierarchy());
  h->parentStopped_ = std::move(parentStopped);
  h->layout_ = layout;
  h->rank_ = parent.rank();
  h->host_ = layout.hostOf[static_cast<size_t>(h->rank_)];
  h->localIndex_ = layout.localOf[static_cast<size_t>(h->rank_)];
  // Every parent rank builds its local communicator, then its cross communicator: each rank is
  // in exactly one of each, so every parent rank takes part in the same rounds.
  const std::vector<int>& mine = layout.members[static_cast<size_t>(h->host_)];
  auto lrv = parentRendezvous(parent, mine);
  auto local = make(*lrv, h->localIndex_, static_cast<int>(mine.size()));
  if (!local.isOk()) {
    return makeError(local.status().code(), "rank %d cannot build the intra-host communicator of ranks %s: %s",
                     h->rank_, listRanks(mine).c_str(), local.status().message().c_str());
  }
  h->local_ = std::move(*local);
  const std::vector<int> group = layout.crossGroup(h->localIndex_);
  const int crossRank = static_cast<int>(std::find(group.begin(), group.end(), h->rank_) - group.begin());
  auto crv = parentRendezvous(parent, group);
  auto cross = make(*crv, crossRank, static_cast<int>(group.size()));
  if (!cross.isOk()) {
    return makeError(cross.status().code(), "rank %d cannot build the inter-host communicator of ranks %s: %s",
                     h->rank_, listRanks(group).c_str(), cross.status().message().c_str());
  }
  h->cross_ = std::move(*cross);
  FERRY_INFO(log::kInit, "hierarchy: %s; this rank is local %d of %d on host %d, cross rank %d of %d",
             layout.describe().c_str(), h->localIndex_, h->local_->size(), h->host_, h->cross_->rank(),
             h->cross_->size());
  return h;
}

Hierarchy::~Hierarchy() {
  // The sub-communicators go first: their calls may still use the scratch.
  cross_.reset();
  local_.reset();
  for (void* p : scratch_) (void)hostFree(p);
}

Status Hierarchy::unevenLayout(const char* call) const {
  return makeError(ErrorCode::kInternalError,
                   "hierarchical %s on rank %d: hosts hold different numbers of ranks (%s); only all-reduce, "
                   "broadcast and reduce have two-level schedules for that (the tuner should have chosen a flat one)",
                   call, rank_, layout_.describe().c_str());
}

Status Hierarchy::step(const Status& st, const char* call, const char* what, bool crossLevel) const {
  if (st.isOk()) return st;
  const std::vector<int> members =
      crossLevel ? layout_.crossGroup(localIndex_) : layout_.members[static_cast<size_t>(host_)];
  const bool parents = parentStopped_ && parentStopped_();
  return makeError(st.code(), "hierarchical %s on rank %d: the %s among ranks %s failed: %s", call, rank_, what,
                   listRanks(members).c_str(),
                   parents ? renumberBeforeParent(st.message(), members).c_str()
                           : renumberRanks(st.message(), members).c_str());
}

Result<uint8_t*> Hierarchy::scratch(int slot, size_t bytes) {
  if (bytes > scratchBytes_[slot]) {
    (void)hostFree(scratch_[slot]);
    scratch_[slot] = nullptr;
    scratchBytes_[slot] = 0;
    const size_t want = std::max(bytes, size_t{4096});
    auto p = hostAlloc(want);
    if (!p.isOk()) {
      return makeError(ErrorCode::kSystemError,
                       "rank %d cannot allocate %zu bytes of scratch for a hierarchical call: %s", rank_, want,
                       p.status().message().c_str());
    }
    scratch_[slot] = *p;
    scratchBytes_[slot] = want;
  }
  return static_cast<uint8_t*>(scratch_[slot]);
}

bool Hierarchy::localMajor() const {
  const int H = layout_.hosts, L = layout_.localSize(0);
  for (int r = 0; r < layout_.ranks(); ++r) {
    if (layout_.hostOf[static_cast<size_t>(r)] != r % H || layout_.localOf[static_cast<size_t>(r)] != r / H)
      return false;
  }
  return L > 0;
}

size_t Hierarchy::blockIndex(Order order, int host, int local) const {
  switch (order) {
    case Order::kRank: return static_cast<size_t>(layout_.rankAt(host, local));
    case Order::kLocalMajor: return static_cast<size_t>(local * hosts() + host);
    case Order::kHostMajor: return static_cast<size_t>(host * localSize() + local);
  }
  return 0;
}

void Hierarchy::permute(const uint8_t* from, Order fromOrder, uint8_t* to, Order toOrder, size_t bytes) const {
  for (int h = 0; h < hosts(); ++h) {
    for (int j = 0; j < localSize(); ++j) {
      std::memcpy(to + blockIndex(toOrder, h, j) * bytes, from + blockIndex(fromOrder, h, j) * bytes, bytes);
    }
  }
}

Status Hierarchy::run(const Call& c) {
  switch (c.kind) {
    case CallKind::kAllReduce: return allReduce(c.send, c.recv, c.count, c.type, c.op);
    case CallKind::kReduceScatter: return reduceScatter(c.send, c.recv, c.count, c.type, c.op);
    case CallKind::kAllGather: return allGather(c.send, c.recv, c.count, c.type);
    case CallKind::kAllToAll: return allToAll(c.send, c.recv, c.count, c.type);
    case CallKind::kBroadcast: return broadcast(c.send, c.recv, c.count, c.type, c.root);
    case CallKind::kReduce: return reduce(c.send, c.recv, c.count, c.type, c.op, c.root);
    default: break;
  }
  return makeError(ErrorCode::kInternalError, "%s: the two levels run no such collective", c.name());
}

Status Hierarchy::allReduce(const void* in, void* out, size_t count, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  const int L = localSize();
  const RedOp sum = op == RedOp::kAvg ? RedOp::kSum : op;
  const auto n = static_cast<uint32_t>(layout_.ranks());
  auto* o = static_cast<uint8_t*>(out);
  const auto* i = static_cast<const uint8_t*>(in);
  if (hosts() == 2 && streamChunkBytes_ > 0 && count * es >= 2 * streamChunkBytes_) {
    return allReduceTwoHosts(i, o, count, type, op);
  }
  if (!layout_.even() || count < static_cast<size_t>(L)) {
    // Through each host's first rank: hosts of different sizes cannot split the vector alike.
    FERRY_TRY(step(local_->reduce(in, out, count, type, sum, 0), "allReduce", "intra-host reduce", false));
    if (localIndex_ == 0) {
      FERRY_TRY(step(cross_->allReduce(out, out, count, type, sum), "allReduce", "inter-host all-reduce", true));
      if (op == RedOp::kAvg) kernels::divide(type, out, out, count, n);
    }
    return step(local_->broadcast(out, out, count, type, 0), "allReduce", "intra-host broadcast", false);
  }
  // Slice j of the vector is this rank's; the elements past L equal slices ride with the last.
  const size_t block = count / static_cast<size_t>(L), main = block * static_cast<size_t>(L), tail = count - main;
  uint8_t* mine = o + static_cast<size_t>(localIndex_) * block * es;
  FERRY_TRY(step(local_->reduceScatter(in, mine, block, type, sum), "allReduce", "intra-host reduce-scatter", false));
  if (tail > 0) {
    FERRY_TRY(step(local_->reduce(i + main * es, o + main * es, tail, type, sum, L - 1), "allReduce",
                   "intra-host reduce of the last elements", false));
  }
  const size_t crossCount = block + (localIndex_ == L - 1 ? tail : 0);
  FERRY_TRY(step(cross_->allReduce(mine, mine, crossCount, type, sum), "allReduce", "inter-host all-reduce", true));
  if (op == RedOp::kAvg) kernels::divide(type, mine, mine, crossCount, n);
  FERRY_TRY(step(local_->allGather(mine, o, block, type), "allReduce", "intra-host all-gather", false));
  if (tail > 0) {
    FERRY_TRY(step(local_->broadcast(o + main * es, o + main * es, tail, type, L - 1), "allReduce",
                   "intra-host broadcast of the last elements", false));
  }
  return Status::ok();
}

Status Hierarchy::allReduceTwoHosts(const uint8_t* in, uint8_t* out, size_t count, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  const RedOp sum = op == RedOp::kAvg ? RedOp::kSum : op;
  const auto n = static_cast<uint32_t>(layout_.ranks());
  const size_t chunk = std::max<size_t>(streamChunkBytes_ / es, 1), chunks = (count + chunk - 1) / chunk;
  const bool leader = localIndex_ == 0;
  const int peer = 1 - cross_->rank();
  auto at = [&](size_t k) { return k * chunk * es; };
  auto len = [&](size_t k) { return std::min(chunk, count - k * chunk); };
  uint8_t* theirs = nullptr;
  if (leader) {
    auto t = scratch(0, chunk * es);
    FERRY_TRY(t);
    theirs = *t;
  }
  auto gather = [&](size_t k) {
    return step(local_->reduce(in + at(k), out + at(k), len(k), type, sum, 0), "allReduce", "intra-host reduce", false);
  };
  FERRY_TRY(gather(0));
  for (size_t k = 0; k <= chunks; ++k) {
    // Chunk k leaves with chunk k-1's receive: the call returns once chunk k is in the socket,
    // which then has a chunk to send while this rank reduces the next one.
    if (leader) {
      std::vector<P2pOp> ops;
      if (k < chunks) ops.push_back(P2pOp::send(out + at(k), len(k), type, peer));
      if (k > 0) ops.push_back(P2pOp::recv(theirs, len(k - 1), type, peer));
      FERRY_TRY(step(cross_->sendRecv(ops), "allReduce", "inter-host exchange", true));
    }
    if (k + 1 < chunks) FERRY_TRY(gather(k + 1));
    if (k == 0) continue;
    uint8_t* done = out + at(k - 1);
    if (leader) {
      // Both leaders add the same two partial sums, in either order: the same bits. Avg rounds
      // the sum, then divides, as allReduce's other schedules do: the same bits whichever runs.
      kernels::reduce(type, sum, done, done, theirs, len(k - 1));
      if (op == RedOp::kAvg) kernels::divide(type, done, done, len(k - 1), n);
    }
    FERRY_TRY(step(local_->broadcast(done, done, len(k - 1), type, 0), "allReduce", "intra-host broadcast", false));
  }
  return Status::ok();
}

Status Hierarchy::reduceScatter(const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  if (!layout_.even()) return unevenLayout("reduceScatter");
  const size_t es = dataTypeSize(type), bytes = recvCount * es;
  const int H = hosts(), L = localSize();
  const RedOp sum = op == RedOp::kAvg ? RedOp::kSum : op;
  // Local index j's share: the blocks of the ranks of local index j on every host, in host order.
  const uint8_t* src = static_cast<const uint8_t*>(in);
  if (!localMajor()) {
    auto p = scratch(0, bytes * static_cast<size_t>(H * L));
    FERRY_TRY(p);
    permute(src, Order::kRank, *p, Order::kLocalMajor, bytes);
    src = *p;
  }
  auto q = scratch(1, bytes * static_cast<size_t>(H));
  FERRY_TRY(q);
  FERRY_TRY(step(local_->reduceScatter(src, *q, recvCount * static_cast<size_t>(H), type, sum), "reduceScatter",
                 "intra-host reduce-scatter", false));
  FERRY_TRY(
      step(cross_->reduceScatter(*q, out, recvCount, type, sum), "reduceScatter", "inter-host reduce-scatter", true));
  if (op == RedOp::kAvg) kernels::divide(type, out, out, recvCount, static_cast<uint32_t>(layout_.ranks()));
  return Status::ok();
}

Status Hierarchy::allGather(const void* in, void* out, size_t sendCount, DataType type) {
  if (!layout_.even()) return unevenLayout("allGather");
  const size_t es = dataTypeSize(type), bytes = sendCount * es;
  const int H = hosts(), L = localSize();
  auto t = scratch(0, bytes * static_cast<size_t>(H));
  FERRY_TRY(t);
  FERRY_TRY(step(cross_->allGather(in, *t, sendCount, type), "allGather", "inter-host all-gather", true));
  if (localMajor()) {
    return step(local_->allGather(*t, out, sendCount * static_cast<size_t>(H), type), "allGather",
                "intra-host all-gather", false);
  }
  auto u = scratch(1, bytes * static_cast<size_t>(H * L));
  FERRY_TRY(u);
  FERRY_TRY(step(local_->allGather(*t, *u, sendCount * static_cast<size_t>(H), type), "allGather",
                 "intra-host all-gather", false));
  permute(*u, Order::kLocalMajor, static_cast<uint8_t*>(out), Order::kRank, bytes);
  return Status::ok();
}

Status Hierarchy::allToAll(const void* in, void* out, size_t count, DataType type) {
  if (!layout_.even()) return unevenLayout("allToAll");
  const size_t es = dataTypeSize(type), bytes = count * es;
  const int H = hosts(), L = localSize();
  const bool lm = localMajor();
  // 1. Within the host: local index j gets every block of this host bound for local index j.
  const uint8_t* src = static_cast<const uint8_t*>(in);
  if (!lm) {
    auto p = scratch(0, bytes * static_cast<size_t>(H * L));
    FERRY_TRY(p);
    permute(src, Order::kRank, *p, Order::kLocalMajor, bytes);
    src = *p;
  }
  auto q = scratch(1, bytes * static_cast<size_t>(H * L));
  FERRY_TRY(q);
  FERRY_TRY(step(local_->allToAll(src, *q, count * static_cast<size_t>(H), type), "allToAll", "intra-host all-to-all",
                 false));
  // q[j'][h]: from local j' of this host, bound for host h. 2. Across hosts, per host: r[h][j'].
  auto r = scratch(0, bytes * static_cast<size_t>(H * L));
  FERRY_TRY(r);
  permute(*q, Order::kLocalMajor, *r, Order::kHostMajor, bytes);
  // s[h][j']: from local j' of host h. Host-major rank order is exactly that: straight into out.
  bool hostMajor = true;
  for (int x = 0; x < layout_.ranks(); ++x) {
    hostMajor &= layout_.hostOf[static_cast<size_t>(x)] == x / L && layout_.localOf[static_cast<size_t>(x)] == x % L;
  }
  if (hostMajor) {
    return step(cross_->allToAll(*r, out, count * static_cast<size_t>(L), type), "allToAll", "inter-host all-to-all",
                true);
  }
  FERRY_TRY(
      step(cross_->allToAll(*r, *q, count * static_cast<size_t>(L), type), "allToAll", "inter-host all-to-all", true));
  permute(*q, Order::kHostMajor, static_cast<uint8_t*>(out), Order::kRank, bytes);
  return Status::ok();
}

Status Hierarchy::broadcast(const void* in, void* out, size_t count, DataType type, int root) {
  const int rootHost = layout_.hostOf[static_cast<size_t>(root)],
            rootLocal = layout_.localOf[static_cast<size_t>(root)];
  if (layout_.even()) {
    // Across in the cross group of the root's local index (it spans every host), then within. The
    // root sends `in` across as it is (in place there: an in-place root writes nothing) and leaves
    // its own copy to `out` to the intra-host step, whose readers do not wait for it: copied before
    // the crossing, it held up both steps (evidence: docs/PERFORMANCE.md, "Several hosts: What
    // stands between", item 3).
    const bool isRoot = rank_ == root;
    if (localIndex_ == rootLocal) {
      void* crossOut = isRoot ? const_cast<void*>(in) : out;
      FERRY_TRY(
          step(cross_->broadcast(in, crossOut, count, type, rootHost), "broadcast", "inter-host broadcast", true));
    }
    return step(local_->broadcast(isRoot ? in : out, out, count, type, rootLocal), "broadcast", "intra-host broadcast",
                false);
  }
  // Hosts of different sizes: through every host's first rank (cross group 0 spans every host).
  if (host_ == rootHost) {
    FERRY_TRY(step(local_->broadcast(in, out, count, type, rootLocal), "broadcast", "intra-host broadcast", false));
  }
  if (localIndex_ == 0) {
    FERRY_TRY(step(cross_->broadcast(out, out, count, type, rootHost), "broadcast", "inter-host broadcast", true));
  }
  if (host_ != rootHost) {
    FERRY_TRY(step(local_->broadcast(out, out, count, type, 0), "broadcast", "intra-host broadcast", false));
  }
  return Status::ok();
}

Status Hierarchy::reduce(const void* in, void* out, size_t count, DataType type, RedOp op, int root) {
  const size_t es = dataTypeSize(type);
  const int rootHost = layout_.hostOf[static_cast<size_t>(root)],
            rootLocal = layout_.localOf[static_cast<size_t>(root)];
  const RedOp sum = op == RedOp::kAvg ? RedOp::kSum : op;
  const bool isRoot = rank_ == root;
  auto t = scratch(0, count * es);
  FERRY_TRY(t);
  // Even: within each host to the rank of the root's local index, then across in its cross group.
  // Otherwise through every host's first rank, which hands the result to the root at the end.
  const int via = layout_.even() ? rootLocal : 0;
  FERRY_TRY(step(local_->reduce(in, *t, count, type, sum, via), "reduce", "intra-host reduce", false));
  if (localIndex_ == via) {
    void* dst = host_ == rootHost && via == rootLocal ? out : *t;
    FERRY_TRY(step(cross_->reduce(*t, dst, count, type, sum, rootHost), "reduce", "inter-host reduce", true));
  }
  if (host_ == rootHost && via != rootLocal) {
    if (localIndex_ == via) {
      FERRY_TRY(step(local_->send(*t, count, type, rootLocal), "reduce", "intra-host hand-over to the root", false));
    } else if (isRoot) {
      FERRY_TRY(step(local_->recv(out, count, type, via), "reduce", "intra-host hand-over to the root", false));
    }
  }
  if (isRoot && op == RedOp::kAvg) kernels::divide(type, out, out, count, static_cast<uint32_t>(layout_.ranks()));
  return Status::ok();
}

}  // namespace ferry
