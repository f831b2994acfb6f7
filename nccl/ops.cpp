// Checking and running the C API's collective and point-to-point calls.
#include "nccl/ops.hpp"

#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"
#include "nccl/group.hpp"

namespace ferry::nccl {
namespace {

bool reduces(CallKind k) {
  return k == CallKind::kAllReduce || k == CallKind::kReduce || k == CallKind::kReduceScatter;
}

static_assert(ncclNumOps == static_cast<int>(RedOp::kAvg) + 1, "NCCL's built-in reductions are RedOp's first values");

// "0..4: sum, prod, max, min, avg": NCCL's built-in reductions, named from ferry's op table.
const char* builtInOps() {
  static const std::string list = [] {
    std::string s = "0.." + std::to_string(ncclNumOps - 1) + ":";
    for (int v = 0; v < ncclNumOps; ++v) s += std::string(v == 0 ? " " : ", ") + redOpName(static_cast<RedOp>(v));
    return s;
  }();
  return list.c_str();
}

const char* rootedName(Rooted r) { return r == Rooted::kGather ? "ncclGather" : "ncclScatter"; }

// ncclGather / ncclScatter's checks (Comm never sees these calls as one Call). On the root the
// whole buffer (count * nranks) is the gathered side; elsewhere only this rank's block is used.
Status checkRooted(ncclComm_t comm, const RawArgs& raw, Op* op) {
  const char* fn = rootedName(op->rooted);
  Call& call = op->call;
  if (!isValidDataType(raw.type)) {
    return argError(fn, "datatype %d on rank %d is not a data type (expected %s)", raw.type, comm->rank,
                    dataTypeList());
  }
  call.type = static_cast<DataType>(raw.type);
  if (call.root < 0 || call.root >= comm->size) {
    return argError(fn, "root %d on rank %d is out of range (expected 0 <= root < %d)", call.root, comm->rank,
                    comm->size);
  }
  if (call.count == 0) return Status::ok();
  if (call.count > std::numeric_limits<size_t>::max() / dataTypeSize(call.type) / static_cast<size_t>(comm->size)) {
    return argError(fn, "count %zu on rank %d is larger than the address space allows for %d ranks", call.count,
                    comm->rank, comm->size);
  }
  const bool root = comm->rank == call.root;
  const bool gather = op->rooted == Rooted::kGather;
  if (call.send == nullptr && (gather || root)) return argError(fn, "sendbuff is NULL on rank %d", comm->rank);
  if (call.recv == nullptr && (!gather || root)) return argError(fn, "recvbuff is NULL on rank %d", comm->rank);
  if (gpu::pointerKind(call.send) == gpu::MemKind::kDevice || gpu::pointerKind(call.recv) == gpu::MemKind::kDevice) {
    return usageError(fn, "device buffers are not supported by ferry's %s yet (rank %d; host buffers are)", fn,
                      comm->rank);
  }
  return Status::ok();
}

}  // namespace

Status prepare(ncclComm_t comm, const RawArgs& raw, Op* op) {
  Call& call = op->call;
  if (comm == nullptr) return argError(call.name(), "comm is NULL");
  if (op->rooted != Rooted::kNone) return checkRooted(comm, raw, op);
  // NCCL's built-in reductions are ferry's RedOp values below ncclNumOps; a value past them names a
  // PreMulSum reduction of this communicator, never one of ferry's own ops (bitwise) that share it.
  int builtIn = reduces(call.kind) ? raw.redOp : static_cast<int>(RedOp::kSum);
  if (reduces(call.kind) && (raw.redOp < 0 || raw.redOp >= ncclNumOps)) {
    if (raw.redOp >= ncclNumOps) op->preMul = comm->redOps.find(raw.redOp);
    if (!op->preMul) {
      return argError(call.name(),
                      "op %d is not a reduction on rank %d: neither a built-in one (%s) nor a live "
                      "PreMulSum reduction of this communicator",
                      raw.redOp, comm->rank, builtInOps());
    }
    builtIn = static_cast<int>(RedOp::kSum);
  }
  call.type = static_cast<DataType>(raw.type);
  call.op = static_cast<RedOp>(builtIn);
  // Device buffers go to the stream-ordered path; host buffers keep the blocking host calls.
  if (gpu::pointerKind(call.send) == gpu::MemKind::kDevice || gpu::pointerKind(call.recv) == gpu::MemKind::kDevice) {
    call.stream = op->stream;
  }
  if (!inGroup() && !op->preMul) return Status::ok();  // Comm::collective validates it
  CheckOptions options;
  options.peerMayBeSelf = true;  // a copy to this rank, which pairs inside a group (NCCL allows it)
  options.hostBuffers = !op->device();
  FERRY_TRY(checkCall(call, comm->rank, comm->size, options));
  if (op->preMul && op->preMul->type != call.type) {
    return argError(call.name(), "PreMulSum op %d was created for %s but the call uses %s", raw.redOp,
                    dataTypeName(op->preMul->type), dataTypeName(call.type));
  }
  return Status::ok();
}

Status runCollective(Comm& comm, const Op& o) {
  Call call = o.call;
  std::unique_ptr<char[]> scaled;
  if (o.preMul) {
    // Scale a copy: the caller's input must not change, and in place the input is the output.
    const size_t n = call.kind == CallKind::kReduceScatter ? call.count * static_cast<size_t>(comm.size()) : call.count;
    if (n > 0) {
      scaled.reset(new char[n * dataTypeSize(call.type)]);
      scaleInto(scaled.get(), call.send, n, *o.preMul);
      call.send = scaled.get();
    }
  }
  if (o.rooted != Rooted::kNone) return runRooted(comm, o);
  return o.pointToPoint() ? runPointToPoint(comm, {&o}) : comm.collective(call);
}

Status runRooted(Comm& comm, const Op& o) {
  const Call& c = o.call;
  if (c.count == 0) return Status::ok();
  const size_t block = c.count * dataTypeSize(c.type);
  const bool gather = o.rooted == Rooted::kGather;
  // The root's side: one block per rank, at offset rank * block of its whole buffer.
  char* whole = gather ? static_cast<char*>(c.recv) : static_cast<char*>(const_cast<void*>(c.send));
  std::vector<P2pOp> batch;
  if (comm.rank() == c.root) {
    for (int r = 0; r < comm.size(); ++r) {
      char* at = whole + static_cast<size_t>(r) * block;
      if (r == c.root) {
        // In place (the root's own block is already where it belongs): nothing to move.
        const void* mine = gather ? c.send : c.recv;
        if (mine != at) std::memmove(gather ? at : c.recv, gather ? c.send : at, block);
        continue;
      }
      batch.push_back(gather ? P2pOp::recv(at, c.count, c.type, r) : P2pOp::send(at, c.count, c.type, r));
    }
  } else {
    batch.push_back(gather ? P2pOp::send(c.send, c.count, c.type, c.root)
                           : P2pOp::recv(c.recv, c.count, c.type, c.root));
  }
  if (batch.empty()) return Status::ok();
  return comm.sendRecv(batch);
}

double predictSeconds(const Comm& comm, const Op& o) {
  const size_t bytes = o.call.count * dataTypeSize(o.call.type);
  // Gather and scatter move what an all-gather moves into (out of) one rank: priced as one.
  const CallKind kind = o.rooted != Rooted::kNone ? CallKind::kAllGather : o.call.kind;
  return comm.predictSeconds(kind, bytes);
}

Status runPointToPoint(Comm& comm, const std::vector<const Op*>& ops) {
  std::vector<P2pOp> batch;
  batch.reserve(ops.size());
  for (const Op* o : ops) {
    const Call& c = o->call;
    batch.push_back(c.kind == CallKind::kSend ? P2pOp::send(c.send, c.count, c.type, c.root)
                                              : P2pOp::recv(c.recv, c.count, c.type, c.root));
  }
  return comm.sendRecv(batch);
}

Status runOnStream(Comm& comm, const Op& o) {
  if (o.rooted != Rooted::kNone) return runRooted(comm, o);  // checkRooted kept device buffers out
  if (o.preMul) {
    return argError(o.call.name(),
                    "PreMulSum reductions (ncclRedOpCreatePreMulSum) are not supported on device buffers yet");
  }
  return comm.collective(o.call);
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
  return comm->call(op.call.name(), [&](Comm& c) { return op.device() ? runOnStream(c, op) : runCollective(c, op); });
}

}  // namespace ferry::nccl
