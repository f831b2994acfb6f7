// Checking and running the C API's collective and point-to-point calls.
#include "runtime/nccl/ops.hpp"

#include <limits>
#include <memory>

#include "runtime/nccl/comm_handle.hpp"
#include "runtime/cuda/cuda_api.hpp"
#include "runtime/nccl/group.hpp"

namespace ferry::nccl {
namespace {

bool needsSend(const Op& o, int rank) {
  switch (o.kind) {
    case OpKind::kRecv: return false;
    case OpKind::kBroadcast: return rank == o.peer;
    default: return true;
  }
}

bool needsRecv(const Op& o, int rank) {
  switch (o.kind) {
    case OpKind::kSend: return false;
    case OpKind::kReduce: return rank == o.peer;
    default: return true;
  }
}

bool reduces(OpKind k) { return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter; }

}  // namespace

Status prepare(ncclComm_t comm, const RawArgs& raw, Op* op) {
  const char* fn = op->fn;
  if (comm == nullptr) return argError(fn, "comm is NULL");
  if (!isValidDataType(raw.type)) {
    return argError(fn, "datatype %d is not valid (expected 0..9: int8, uint8, int32, uint32, int64, uint64, "
                        "float16, float32, float64, bfloat16)", raw.type);
  }
  op->type = static_cast<DataType>(raw.type);
  if (reduces(op->kind)) {
    if (raw.redOp >= 0 && raw.redOp < ncclNumOps) {
      op->op = static_cast<RedOp>(raw.redOp);
    } else {
      op->preMul = comm->redOps.find(raw.redOp);
      if (!op->preMul) {
        return argError(fn, "op %d is neither a built-in reduction (0..4: sum, prod, max, min, avg) nor a live "
                            "PreMulSum reduction of this communicator", raw.redOp);
      }
      if (op->preMul->type != op->type) {
        return argError(fn, "PreMulSum op %d was created for %s but the call uses %s", raw.redOp,
                        dataTypeName(op->preMul->type), dataTypeName(op->type));
      }
      op->op = RedOp::kSum;
    }
  }
  const bool rooted = op->kind == OpKind::kBroadcast || op->kind == OpKind::kReduce;
  if ((rooted || op->pointToPoint()) && (op->peer < 0 || op->peer >= comm->size)) {
    return argError(fn, "%s %d is out of range (expected 0 <= %s < %d)", rooted ? "root" : "peer", op->peer,
                    rooted ? "root" : "peer", comm->size);
  }
  const size_t perRank = op->kind == OpKind::kAllGather || op->kind == OpKind::kReduceScatter
                             ? static_cast<size_t>(comm->size) : 1;
  if (op->count > std::numeric_limits<size_t>::max() / dataTypeSize(op->type) / perRank) {
    return argError(fn, "count %zu of %s%s overflows the address space", op->count, dataTypeName(op->type),
                    perRank > 1 ? " per rank" : "");
  }
  if (op->count > 0 && needsSend(*op, comm->rank) && op->send == nullptr) {
    return argError(fn, "send buffer is NULL with count %zu on rank %d", op->count, comm->rank);
  }
  if (op->count > 0 && needsRecv(*op, comm->rank) && op->recv == nullptr) {
    return argError(fn, "receive buffer is NULL with count %zu on rank %d", op->count, comm->rank);
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
  // Device buffers go to the stream-ordered overloads; host buffers keep the blocking host calls.
  op.device = cuda::pointerKind(op.send) == cuda::MemKind::kDevice ||
              cuda::pointerKind(op.recv) == cuda::MemKind::kDevice;
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
