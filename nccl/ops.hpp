// One collective or point-to-point call of the C API, as data: what ncclAllReduce & co. check,
// what a group queues, and how it runs on a ferry::Comm.
#pragma once

#include <optional>
#include <vector>

#include "ferry/comm.hpp"
#include "nccl/entry.hpp"
#include "nccl/premul_sum.hpp"

namespace ferry::nccl {

enum class OpKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kSend, kRecv };

/// A call's arguments. `peer` is the root of broadcast and reduce and the peer of send and recv.
struct Op {
  OpKind kind = OpKind::kAllReduce;
  const char* fn = "";  ///< the entry point, for messages
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::kUint8;
  RedOp op = RedOp::kSum;
  std::optional<PreMulSum> preMul;  ///< set for a PreMulSum reduction (op is then kSum)
  int peer = 0;
  Stream stream = nullptr;  ///< the caller's stream
  bool device = false;      ///< a buffer is device memory: the call goes to Comm's stream-ordered overloads

  bool pointToPoint() const { return kind == OpKind::kSend || kind == OpKind::kRecv; }
};

/// The raw C arguments a call passes besides its buffers; `redOp` is -1 for calls without one.
struct RawArgs {
  int type = 0;
  int redOp = -1;
};

/// Check `op` against `comm` (type, reduction, root or peer, count overflow, null buffers) and
/// resolve a PreMulSum reduction. Errors are kInvalidArgument naming the argument and its range.
Status prepare(ncclComm_t comm, const RawArgs& raw, Op* op);

/// Run one collective (not point-to-point) on `comm`.
Status runCollective(Comm& comm, const Op& op);
/// Run point-to-point calls as one Comm::sendRecv batch: they complete whatever their order.
Status runPointToPoint(Comm& comm, const std::vector<const Op*>& ops);

/// Run `op` (device buffers) through Comm's stream-ordered overloads: issued on op.stream, or
/// recorded by this thread's open ferry::groupStart().
Status runOnStream(Comm& comm, const Op& op);

/// Issue a prepared `op` now, or queue it when this thread is inside a group.
Outcome submit(ncclComm_t comm, const RawArgs& raw, Op op);

}  // namespace ferry::nccl
