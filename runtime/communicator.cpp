// Comm's calls. Every method builds a Call and hands it to collective(), which validates it once
// (base/call_check.hpp) and runs it: stream-ordered calls through runtime/cuda/group.hpp,
// host calls through Comm::Impl (comm_impl.hpp), which plans them and runs the chosen row of the
// algorithm table (collectives/table.hpp).
#include <string>

#include "ferry/memory.hpp"
#include "runtime/comm_impl.hpp"
#include "runtime/cuda/cuda_api.hpp"

namespace ferry {

using coll::OpDesc;
using coll::Plan;

namespace {

// The device side's description of a stream-ordered call.
gpu::DevWork deviceWork(const Call& c) {
  gpu::DevWork w;
  w.kind = c.kind;
  w.send = c.send;
  w.recv = c.recv;
  w.count = c.count;
  w.type = c.type;
  w.op = c.op;
  w.root = c.root;
  return w;
}

// The last host call each thread validated, with the communicator's shape: a call equal to it in
// every field checkCall reads is valid, so loops that repeat a call skip the check.
struct CheckedCall {
  const void* impl = nullptr;
  int rank = -1, size = 0;
  Call call;
};
// constinit: no guard of a first use on every access (the initial value is a constant).
constinit thread_local CheckedCall tLastChecked{};

bool repeatsChecked(const void* impl, int rank, int size, const Call& c) {
  const CheckedCall& m = tLastChecked;
  return m.impl == impl && m.rank == rank && m.size == size && m.call.kind == c.kind && m.call.send == c.send &&
         m.call.recv == c.recv && m.call.count == c.count && m.call.type == c.type && m.call.op == c.op &&
         m.call.root == c.root;
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
void Comm::setReproducible(bool on) { impl_->reproducible = on; }
bool Comm::reproducible() const { return impl_->reproducible; }
size_t Comm::deviceMemoryBytes() const { return impl_->gpu ? impl_->gpu->memoryBytes() : 0; }

void Comm::abort(const std::string& reason) {
  if (impl_->watchdog) impl_->watchdog->abort(reason);
}

Status Comm::collective(const Call& call) {
  const bool p2p = call.kind == CallKind::kSend || call.kind == CallKind::kRecv;
  if (call.stream) {
    // A transfer to this rank is a copy, which pairs only inside a group (as in NCCL).
    CheckOptions options;
    options.hostBuffers = false;
    options.peerMayBeSelf = p2p && gpu::groupDepth() > 0;
    Status st = checkCall(call, impl_->rank, impl_->size, options);
    if (call.kind == CallKind::kBarrier && st.isOk()) {
      st = makeError(ErrorCode::kInvalidArgument,
                     "barrier on rank %d: there is no stream-ordered barrier (call it "
                     "without a stream)",
                     impl_->rank);
    }
    return gpu::submit(*this, impl_->gpu.get(), st, deviceWork(call), *call.stream);
  }
  if (p2p) {
    P2pOp op{call.kind == CallKind::kSend ? P2pOp::Kind::kSend : P2pOp::Kind::kRecv,
             call.kind == CallKind::kSend ? const_cast<void*>(call.send) : call.recv, call.count, call.type, call.root};
    return sendRecv({op});
  }
  if (!repeatsChecked(impl_.get(), impl_->rank, impl_->size, call)) {
    FERRY_TRY(checkCall(call, impl_->rank, impl_->size));
    tLastChecked = CheckedCall{impl_.get(), impl_->rank, impl_->size, call};
  }
  return impl_->runCollective(call);
}

std::shared_ptr<Work> Comm::collectiveAsync(const Call& call) {
  return enqueue([call](Comm& c) { return c.collective(call); });
}

Status Comm::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  return collective(Call::allReduce(send, recv, count, type, op));
}
Status Comm::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op) {
  return collective(Call::reduceScatter(send, recv, recvCount, type, op));
}
Status Comm::allGather(const void* send, void* recv, size_t sendCount, DataType type) {
  return collective(Call::allGather(send, recv, sendCount, type));
}
Status Comm::allToAll(const void* send, void* recv, size_t count, DataType type) {
  return collective(Call::allToAll(send, recv, count, type));
}
Status Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  return collective(Call::broadcast(send, recv, count, type, root));
}
Status Comm::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root) {
  return collective(Call::reduce(send, recv, count, type, op, root));
}
Status Comm::send(const void* buf, size_t count, DataType type, int peer) {
  return collective(Call::sendTo(buf, count, type, peer));
}
Status Comm::recv(void* buf, size_t count, DataType type, int peer) {
  return collective(Call::recvFrom(buf, count, type, peer));
}
Status Comm::barrier() { return collective(Call::barrier()); }

double Comm::predictSeconds(CallKind kind, size_t bytes) const {
  // Every communicator gets a tuner at init; a missing one means nothing is known about the cost.
  if (!impl_->tuner || bytes == 0) return 0.0;
  return impl_->tuner->predict(kind, bytes);
}

Result<void*> Comm::registerBuffer(void* buf, size_t bytes) {
  if (buf != nullptr && gpu::pointerKind(buf) == gpu::MemKind::kDevice) {
    return makeError(ErrorCode::kInvalidArgument,
                     "registerBuffer on rank %d: buf %p is device memory (expected host memory; device buffers "
                     "need no registration)",
                     impl_->rank, buf);
  }
  auto handle = hostRegister(buf, bytes);
  if (!handle.isOk()) {
    return Status(handle.status().code(),
                  "registerBuffer on rank " + std::to_string(impl_->rank) + ": " + handle.status().message());
  }
  return handle;
}

Status Comm::deregisterBuffer(void* handle) {
  Status st = hostDeregister(handle);
  if (st.isOk()) return st;
  return Status(st.code(), "deregisterBuffer on rank " + std::to_string(impl_->rank) + ": " + st.message());
}

Status Comm::allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op, Stream stream) {
  return collective(Call::allReduce(send, recv, count, type, op).on(stream));
}
Status Comm::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op, Stream stream) {
  return collective(Call::reduceScatter(send, recv, recvCount, type, op).on(stream));
}
Status Comm::allGather(const void* send, void* recv, size_t sendCount, DataType type, Stream stream) {
  return collective(Call::allGather(send, recv, sendCount, type).on(stream));
}
Status Comm::allToAll(const void* send, void* recv, size_t count, DataType type, Stream stream) {
  return collective(Call::allToAll(send, recv, count, type).on(stream));
}
Status Comm::broadcast(const void* send, void* recv, size_t count, DataType type, int root, Stream stream) {
  return collective(Call::broadcast(send, recv, count, type, root).on(stream));
}
Status Comm::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root, Stream stream) {
  return collective(Call::reduce(send, recv, count, type, op, root).on(stream));
}
Status Comm::send(const void* buf, size_t count, DataType type, int peer, Stream stream) {
  return collective(Call::sendTo(buf, count, type, peer).on(stream));
}
Status Comm::recv(void* buf, size_t count, DataType type, int peer, Stream stream) {
  return collective(Call::recvFrom(buf, count, type, peer).on(stream));
}

std::shared_ptr<Work> Comm::allReduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  return collectiveAsync(Call::allReduce(send, recv, count, type, op));
}
std::shared_ptr<Work> Comm::reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type,
                                               RedOp op) {
  return collectiveAsync(Call::reduceScatter(send, recv, recvCount, type, op));
}
std::shared_ptr<Work> Comm::allGatherAsync(const void* send, void* recv, size_t sendCount, DataType type) {
  return collectiveAsync(Call::allGather(send, recv, sendCount, type));
}
std::shared_ptr<Work> Comm::allToAllAsync(const void* send, void* recv, size_t count, DataType type) {
  return collectiveAsync(Call::allToAll(send, recv, count, type));
}
std::shared_ptr<Work> Comm::broadcastAsync(const void* send, void* recv, size_t count, DataType type, int root) {
  return collectiveAsync(Call::broadcast(send, recv, count, type, root));
}
std::shared_ptr<Work> Comm::reduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op, int root) {
  return collectiveAsync(Call::reduce(send, recv, count, type, op, root));
}
std::shared_ptr<Work> Comm::sendAsync(const void* buf, size_t count, DataType type, int peer) {
  return collectiveAsync(Call::sendTo(buf, count, type, peer));
}
std::shared_ptr<Work> Comm::recvAsync(void* buf, size_t count, DataType type, int peer) {
  return collectiveAsync(Call::recvFrom(buf, count, type, peer));
}
std::shared_ptr<Work> Comm::barrierAsync() { return collectiveAsync(Call::barrier()); }

Status Comm::sendRecv(const std::vector<P2pOp>& ops) {
  std::vector<coll::P2pItem> items;
  items.reserve(ops.size());
  // A transfer to this rank is a copy, which pairs only within a batch of several.
  CheckOptions options;
  options.peerMayBeSelf = ops.size() > 1;
  for (const P2pOp& op : ops) {
    const bool isSend = op.kind == P2pOp::Kind::kSend;
    const Call call = isSend ? Call::sendTo(op.buffer, op.count, op.type, op.peer)
                             : Call::recvFrom(op.buffer, op.count, op.type, op.peer);
    FERRY_TRY(checkCall(call, impl_->rank, impl_->size, options));
    items.push_back({isSend, op.buffer, op.count * dataTypeSize(op.type), op.peer,
                     OpDesc{CallKind::kSend, op.count, op.type, RedOp::kSum, -1}});
  }
  if (items.empty()) return Status::ok();
  return impl_->run(items[0].desc, coll::TagClass::kPointToPoint,
                    [&](coll::Exec& ex, const Plan&) { return coll::batchSendRecv(ex, items); });
}

std::shared_ptr<Work> Comm::enqueue(std::function<Status(Comm&)> op) {
  return impl_->queue.enqueue([this, op = std::move(op)] { return op(*this); });
}

}  // namespace ferry
