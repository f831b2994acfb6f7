// One collective or point-to-point call of the C API, as data: what ncclAllReduce & co. check,
// what a group queues, and how it runs on a ferry::Comm.
#pragma once

#include <optional>
#include <vector>

#include "ferry/comm.hpp"
#include "nccl/entry.hpp"
#include "nccl/premul_sum.hpp"

namespace ferry::nccl {

/// Collectives of the C API that ferry's Call has no kind for: built from point-to-point transfers.
enum class Rooted { kNone, kGather, kScatter };

/// One call of the C API: the Call it becomes, and what only the C API has.
struct Op {
  /// call.caller names the entry point; call.stream is set by prepare() where a buffer is device
  /// memory (the call then goes to Comm's stream-ordered path), and left unset for host buffers,
  /// which run as blocking host calls whatever the stream.
  Call call;
  std::optional<PreMulSum> preMul;  ///< set for a PreMulSum reduction (call.op is then kSum)
  Stream stream = nullptr;          ///< the caller's stream
  /// ncclGather / ncclScatter: call.root is the root, call.count each rank's block, call.kind unused.
  Rooted rooted = Rooted::kNone;

  bool pointToPoint() const { return call.kind == CallKind::kSend || call.kind == CallKind::kRecv; }
  bool device() const { return call.stream.has_value(); }
};

/// The raw C arguments a call passes besides its buffers; `redOp` is -1 for calls without one.
struct RawArgs {
  int type = 0;
  int redOp = -1;
};

/// Resolve what only the C API has (a PreMulSum reduction handle, device or host buffers) into
/// op->call. Calls that run before Comm sees them (queued by a group, scaled for PreMulSum) are
/// validated here (base/call_check.hpp); the others by Comm::collective.
Status prepare(ncclComm_t comm, const RawArgs& raw, Op* op);

/// Run one collective (not point-to-point) on `comm`.
Status runCollective(Comm& comm, const Op& op);
/// Run ncclGather / ncclScatter as one Comm::sendRecv batch between the root and every rank.
Status runRooted(Comm& comm, const Op& op);
/// The tuner's predicted seconds of `op` on `comm` (ncclGroupSimulateEnd).
double predictSeconds(const Comm& comm, const Op& op);
/// Run point-to-point calls as one Comm::sendRecv batch: they complete whatever their order.
Status runPointToPoint(Comm& comm, const std::vector<const Op*>& ops);

/// Run `op` (device buffers) through Comm's stream-ordered overloads: issued on op.stream, or
/// recorded by this thread's open ferry::groupStart().
Status runOnStream(Comm& comm, const Op& op);

/// Issue a prepared `op` now, or queue it when this thread is inside a group.
Outcome submit(ncclComm_t comm, const RawArgs& raw, Op op);

}  // namespace ferry::nccl
