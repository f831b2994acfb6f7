// Comm's calls: each validates its arguments and runs through Comm::Impl::run (comm_impl.hpp).
#include "runtime/comm_impl.hpp"

namespace ferry {

using coll::OpDesc;
using coll::OpKind;
using coll::Plan;

namespace {

// The table-driven checks every front end shares (base/call_check.hpp).
template <typename C>  // Comm::Impl (or anything with rank and size)
Status validate(const C& c, const char* fn, CallKind kind, const void* send, const void* recv, size_t count,
                DataType type, int op = 0, int root = 0, bool hostBuffers = true) {
  CallArgs a;
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.type = static_cast<int>(type);
  a.op = op;
  a.root = root;
  a.hostBuffers = hostBuffers;
  return checkCall(fn, a, c.rank, c.size);
}

}  // namespace

int Comm::rank() const { return impl_->rank; }
int Comm::size() const { return impl_->size; }
uint64_t Comm::id() const { return impl_->id; }
uint64_t Comm::measuredCalls() const {
  uint64_t n = impl_->measuredCalls;
  if (impl_->hier) n += impl_->hier->local().measuredCalls() + impl_->hier->cross().measuredCalls();
  return n;
}
Status Comm::error() const { return impl_->sticky(); }
int Comm::device() const { return impl_->device; }
size_t Comm::deviceMemoryBytes() const { return impl_->gpu ? impl_->gpu->memoryBytes() : 0; }

void Comm::abort(const std::string& reason) {
  if (impl_->watchdog) impl_->watchdog->abort(reason);
}

Status Comm::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  FERRY_TRY(validate(*impl_, "allReduce", CallKind::kAllReduce, send, recv, count, type, static_cast<int>(op)));
  OpDesc d{OpKind::kAllReduce, count, type, op, -1};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    switch (p.algorithm) {
      case coll::Algorithm::kHierarchical: return impl_->hier->allReduce(send, recv, count, type, op);
      case coll::Algorithm::kDoubling: return coll::doublingAllReduce(ex, send, recv, count, type, op);
      default:
        return p.protocol == coll::Protocol::kMessages ? coll::ringAllReduce(ex, send, recv, count, type, op)
                                                       : coll::arenaAllReduce(ex, p, send, recv, count, type, op);
    }
  });
}

Status Comm::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op) {
  FERRY_TRY(validate(*impl_, "reduceScatter", CallKind::kReduceScatter, send, recv, recvCount, type,
                     static_cast<int>(op)));
  OpDesc d{OpKind::kReduceScatter, recvCount, type, op, -1};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    if (p.algorithm == coll::Algorithm::kHierarchical) return impl_->hier->reduceScatter(send, recv, recvCount, type, op);
    return p.protocol == coll::Protocol::kMessages ? coll::ringReduceScatter(ex, send, recv, recvCount, type, op)
                                                   : coll::arenaReduceScatter(ex, p, send, recv, recvCount, type, op);
  });
}

Status Comm::allGather(const void* send, void* recv, size_t sendCount, DataType type) {
  FERRY_TRY(validate(*impl_, "allGather", CallKind::kAllGather, send, recv, sendCount, type));
  OpDesc d{OpKind::kAllGather, sendCount, type, RedOp::kSum, -1};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    if (p.algorithm == coll::Algorithm::kHierarchical) return impl_->hier->allGather(send, recv, sendCount, type);
    return p.protocol == coll::Protocol::kMessages ? coll::ringAllGather(ex, send, recv, sendCount, type)
                                                   : coll::arenaAllGather(ex, p, send, recv, sendCount, type);
  });
}

Status Comm::allToAll(const void* send, void* recv, size_t count, DataType type) {
  FERRY_TRY(validate(*impl_, "allToAll", CallKind::kAllToAll, send, recv, count, type));
  OpDesc d{OpKind::kAllToAll, count, type, RedOp::kSum, -1};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    if (p.algorithm == coll::Algorithm::kHierarchical) return impl_->hier->allToAll(send, recv, count, type);
    return p.protocol == coll::Protocol::kMessages ? coll::pairwiseAllToAll(ex, send, recv, count, type)
                                                   : coll::arenaAllToAll(ex, p, send, recv, count, type);
  });
}

Status Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  FERRY_TRY(validate(*impl_, "broadcast", CallKind::kBroadcast, send, recv, count, type, 0, root));
  OpDesc d{OpKind::kBroadcast, count, type, RedOp::kSum, root};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    if (p.algorithm == coll::Algorithm::kHierarchical) return impl_->hier->broadcast(send, recv, count, type, root);
    return p.protocol == coll::Protocol::kMessages ? coll::chainBroadcast(ex, send, recv, count, type, root)
                                                   : coll::arenaBroadcast(ex, p, send, recv, count, type, root);
  });
}

Status Comm::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root) {
  FERRY_TRY(validate(*impl_, "reduce", CallKind::kReduce, send, recv, count, type, static_cast<int>(op), root));
  OpDesc d{OpKind::kReduce, count, type, op, root};
  return impl_->run(d, coll::TagClass::kCollective,
                    [&](coll::Exec& ex, const Plan& p) {
    if (p.algorithm == coll::Algorithm::kHierarchical) return impl_->hier->reduce(send, recv, count, type, op, root);
    return p.protocol == coll::Protocol::kMessages ? coll::chainReduce(ex, send, recv, count, type, op, root)
                                                   : coll::arenaReduce(ex, p, send, recv, count, type, op, root);
  });
}

namespace {
template <typename C>
Status validateP2p(const C& c, bool isSend, const void* buf, size_t count, DataType type, int peer, bool allowSelf,
                   bool hostBuffers) {
  CallArgs a;
  a.kind = isSend ? CallKind::kSend : CallKind::kRecv;
  (isSend ? a.send : a.recv) = buf;
  a.count = count;
  a.type = static_cast<int>(type);
  a.root = peer;
  a.peerMayBeSelf = allowSelf;
  a.hostBuffers = hostBuffers;
  return checkCall(isSend ? "send" : "recv", a, c.rank, c.size);
}
}  // namespace

Status Comm::send(const void* buf, size_t count, DataType type, int peer) {
  return sendRecv({P2pOp::send(buf, count, type, peer)});
}

Status Comm::recv(void* buf, size_t count, DataType type, int peer) {
  return sendRecv({P2pOp::recv(buf, count, type, peer)});
}

Status Comm::sendRecv(const std::vector<P2pOp>& ops) {
  std::vector<coll::P2pItem> items;
  items.reserve(ops.size());
  const bool single = ops.size() == 1;
  for (const P2pOp& op : ops) {
    FERRY_TRY(validateP2p(*impl_, op.kind == P2pOp::Kind::kSend, op.buffer, op.count, op.type, op.peer, !single, true));
    items.push_back({op.kind == P2pOp::Kind::kSend, op.buffer, op.count * dataTypeSize(op.type), op.peer,
                     OpDesc{OpKind::kSend, op.count, op.type, RedOp::kSum, -1}});
  }
  if (items.empty()) return Status::ok();
  OpDesc d = items[0].desc;
  return impl_->run(d, coll::TagClass::kPointToPoint, [&](coll::Exec& ex, const Plan&) { return coll::batchSendRecv(ex, items); });
}

std::shared_ptr<Work> Comm::enqueue(std::function<Status(Comm&)> op) {
  return impl_->queue.enqueue([this, op = std::move(op)] { return op(*this); });
}

std::shared_ptr<Work> Comm::allReduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  return enqueue([=](Comm& c) { return c.allReduce(send, recv, count, type, op); });
}

std::shared_ptr<Work> Comm::reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type, RedOp op) {
  return enqueue([=](Comm& c) { return c.reduceScatter(send, recv, recvCount, type, op); });
}

std::shared_ptr<Work> Comm::allGatherAsync(const void* send, void* recv, size_t sendCount, DataType type) {
  return enqueue([=](Comm& c) { return c.allGather(send, recv, sendCount, type); });
}

std::shared_ptr<Work> Comm::broadcastAsync(const void* send, void* recv, size_t count, DataType type, int root) {
  return enqueue([=](Comm& c) { return c.broadcast(send, recv, count, type, root); });
}

std::shared_ptr<Work> Comm::allToAllAsync(const void* send, void* recv, size_t count, DataType type) {
  return enqueue([=](Comm& c) { return c.allToAll(send, recv, count, type); });
}

Status Comm::barrier() {
  OpDesc d{OpKind::kBarrier, 0, DataType::kUint8, RedOp::kSum, -1};
  return impl_->run(d, coll::TagClass::kCollective, [&](coll::Exec& ex, const Plan&) { return coll::disseminationBarrier(ex); });
}

// Stream-ordered calls: the host API's checks, then one DevWork submitted (issued now, or recorded
// by the thread's open group); runtime/cuda/stream_issue.hpp routes it by its buffers.
namespace {
gpu::DevWork work(gpu::WorkKind kind, const void* send, void* recv, size_t count, DataType type, RedOp op,
                   int root) {
  gpu::DevWork w;
  w.kind = kind;
  w.send = send;
  w.recv = recv;
  w.count = count;
  w.type = type;
  w.op = op;
  w.root = root;
  return w;
}
}  // namespace

Status Comm::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op, Stream stream) {
  Status st = validate(*impl_, "allReduce", CallKind::kAllReduce, send, recv, count, type, static_cast<int>(op), 0,
                       false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kAllReduce, send, recv, count, type, op, 0), stream);
}

Status Comm::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op, Stream stream) {
  Status st = validate(*impl_, "reduceScatter", CallKind::kReduceScatter, send, recv, recvCount, type,
                       static_cast<int>(op), 0, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kReduceScatter, send, recv, recvCount, type, op, 0), stream);
}

Status Comm::allGather(const void* send, void* recv, size_t sendCount, DataType type, Stream stream) {
  Status st = validate(*impl_, "allGather", CallKind::kAllGather, send, recv, sendCount, type, 0, 0, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kAllGather, send, recv, sendCount, type, RedOp::kSum, 0), stream);
}

Status Comm::allToAll(const void* send, void* recv, size_t count, DataType type, Stream stream) {
  Status st = validate(*impl_, "allToAll", CallKind::kAllToAll, send, recv, count, type, 0, 0, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kAllToAll, send, recv, count, type, RedOp::kSum, 0), stream);
}

Status Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root, Stream stream) {
  Status st = validate(*impl_, "broadcast", CallKind::kBroadcast, send, recv, count, type, 0, root, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kBroadcast, send, recv, count, type, RedOp::kSum, root), stream);
}

Status Comm::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root, Stream stream) {
  Status st = validate(*impl_, "reduce", CallKind::kReduce, send, recv, count, type, static_cast<int>(op), root,
                       false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kReduce, send, recv, count, type, op, root), stream);
}

Status Comm::send(const void* buf, size_t count, DataType type, int peer, Stream stream) {
  // A transfer to this rank is a copy, which pairs only inside a group (as in NCCL).
  Status st = validateP2p(*impl_, true, buf, count, type, peer, gpu::groupDepth() > 0, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kSend, buf, nullptr, count, type, RedOp::kSum, peer), stream);
}

Status Comm::recv(void* buf, size_t count, DataType type, int peer, Stream stream) {
  Status st = validateP2p(*impl_, false, buf, count, type, peer, gpu::groupDepth() > 0, false);
  return gpu::submit(*this, impl_->gpu.get(), st,
                      work(gpu::WorkKind::kRecv, nullptr, buf, count, type, RedOp::kSum, peer), stream);
}

}  // namespace ferry
