// Checking and running the C API's collective and point-to-point calls.
#include "nccl/ops.hpp"

#include <limits>
#include <memory>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"
#include "nccl/group.hpp"

namespace ferry::nccl {
namespace {

bool reduces(OpKind k) { return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter; }

}  // namespace

CallKind callKind(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce: return CallKind::kAllReduce;
    case OpKind::kBroadcast: return CallKind::kBroadcast;
    case OpKind::kReduce: return CallKind::kReduce;
    case OpKind::kAllGather: return CallKind::kAllGather;
    case OpKind::kReduceScatter: return CallKind::kReduceScatter;
    case OpKind::kSend: return CallKind::kSend;
    case OpKind::kRecv: return CallKind::kRecv;
  }
  return CallKind::kAllReduce;
}

Status prepare(ncclComm_t comm, const RawArgs& raw, Op* op) {
  const char* fn = op->fn;
  if (comm == nullptr) return argError(fn, "comm is NULL");
  // A reduction handle past the built-in ones names a PreMulSum reduction of this communicator.
  int builtIn = raw.redOp;
  if (reduces(op->kind) && raw.redOp >= ncclNumOps) {
    op->preMul = comm->redOps.find(raw.redOp);
    if (!op->preMul) {
      return argError(fn, "op %d on rank %d is neither a built-in reduction (%s) nor a live PreMulSum reduction of "
                          "this communicator", raw.redOp, comm->rank, redOpList());
    }
    builtIn = static_cast<int>(RedOp::kSum);
  }
  // Every other argument: the checks the C++ API runs (base/call_check.hpp).
  CallArgs a;
  a.kind = callKind(op->kind);
  a.send = op->send;
  a.recv = op->recv;
  a.count = op->count;
  a.type = raw.type;
  a.op = builtIn;
  a.root = op->peer;
  a.peerMayBeSelf = true;  // a copy to this rank, which pairs inside a group (NCCL allows it)
  // Device buffers go to the stream-ordered overloads; host buffers keep the blocking host calls.
  op->device = gpu::pointerKind(op->send) == gpu::MemKind::kDevice ||
               gpu::pointerKind(op->recv) == gpu::MemKind::kDevice;
  a.hostBuffers = !op->device;
  if (op->kind == OpKind::kRecv) a.send = nullptr;
  if (op->kind == OpKind::kSend) a.recv = nullptr;
  Status st = checkCall(fn, a, comm->rank, comm->size);
  if (!st.isOk()) return st;
  op->type = static_cast<DataType>(raw.type);
  if (reduces(op->kind)) {
    if (op->preMul && op->preMul->type != op->type) {
      return argError(fn, "PreMulSum op %d was created for %s but the call uses %s", raw.redOp,
                      dataTypeName(op->preMul->type), dataTypeName(op->type));
    }
    op->op = static_cast<RedOp>(builtIn);
  }
  return Status::ok();
}

Status runCollective(Comm& comm, const Op& o) {
  const void* send = o.send;
  std::unique_ptr<char[]> scaled;
  if (o.preMul) {
    // Scale a copy: the caller's input must not change, and in place the input is the output.
    size_t n = o.kind == OpKind::kReduceScatter ? o.count * static_cast<size_t>(comm.size()) : o.count;
    if (n > 0) {
      scaled.reset(new char[n * dataTypeSize(o.type)]);
      scaleInto(scaled.get(), o.send, n, *o.preMul);
      send = scaled.get();
    }
  }
  switch (o.kind) {
    case OpKind::kAllReduce: return comm.allReduce(send, o.recv, o.count, o.type, o.op);
    case OpKind::kReduceScatter: return comm.reduceScatter(send, o.recv, o.count, o.type, o.op);
    case OpKind::kReduce: return comm.reduce(send, o.recv, o.count, o.type, o.op, o.peer);
    case OpKind::kAllGather: return comm.allGather(send, o.recv, o.count, o.type);
    case OpKind::kBroadcast: return comm.broadcast(send, o.recv, o.count, o.type, o.peer);
    case OpKind::kSend:
    case OpKind::kRecv: break;
  }
  return runPointToPoint(comm, {&o});
}

Status runPointToPoint(Comm& comm, const std::vector<const Op*>& ops) {
  std::vector<P2pOp> batch;
  batch.reserve(ops.size());
  for (const Op* o : ops) {
    batch.push_back(o->kind == OpKind::kSend ? P2pOp::send(o->send, o->count, o->type, o->peer)
                                             : P2pOp::recv(o->recv, o->count, o->type, o->peer));
  }
  return comm.sendRecv(batch);
}

Status runOnStream(Comm& comm, const Op& o) {
  if (o.preMul) {
    return argError(o.fn, "PreMulSum reductions (ncclRedOpCreatePreMulSum) are not supported on device buffers yet");
  }
  switch (o.kind) {
    case OpKind::kAllReduce: return comm.allReduce(o.send, o.recv, o.count, o.type, o.op, o.stream);
    case OpKind::kReduceScatter: return comm.reduceScatter(o.send, o.recv, o.count, o.type, o.op, o.stream);
    case OpKind::kReduce: return comm.reduce(o.send, o.recv, o.count, o.type, o.op, o.peer, o.stream);
    case OpKind::kAllGather: return comm.allGather(o.send, o.recv, o.count, o.type, o.stream);
    case OpKind::kBroadcast: return comm.broadcast(o.send, o.recv, o.count, o.type, o.peer, o.stream);
    case OpKind::kSend: return comm.send(o.send, o.count, o.type, o.peer, o.stream);
    case OpKind::kRecv: return comm.recv(o.recv, o.count, o.type, o.peer, o.stream);
  }
  return Status::ok();
}

Outcome submit(ncclComm_t comm, const RawArgs& raw, Op op) {
  Status st = prepare(comm, raw, &op);
  if (inGroup()) {
    // NCCL's rule: the call reports its own error, and the group's end reports it again.
    if (!st.isOk()) {
      noteGroupError(st);
      return st;
    }
    enqueue(comm, std::move(op));
    return Status::ok();
  }
  if (!st.isOk()) return st;
  return comm->call(op.fn, [&](Comm& c) {
    if (op.device) return runOnStream(c, op);
    return op.pointToPoint() ? runPointToPoint(c, {&op}) : runCollective(c, op);
  });
}

}  // namespace ferry::nccl
