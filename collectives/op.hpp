// What one collective call is: its kind and arguments, as every rank should agree on them.
//
// The fingerprint packs the parts that must match across ranks into the 24 tag bits the collectives
// own on every message, so a peer running a different collective, type, op, count or root is
// detected on the first message it sends, at no extra cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/types.hpp"

namespace ferry::coll {

/// One call's arguments as the peers must agree on them.
struct OpDesc {
  CallKind kind = CallKind::kBarrier;  ///< point-to-point calls fingerprint as kSend on both sides
  size_t count = 0;  ///< elements as the API takes them (per rank for allGather/reduceScatter/allToAll)
  DataType type = DataType::kUint8;
  RedOp op = RedOp::kSum;  ///< for reductions only
  int root = -1;           ///< for rooted collectives only
};

/// The root field of the tuner's agreement call (an internal all-reduce of int64 with max that the
/// ranks run before a call whose measured trials are complete): no user call has it, so the call
/// checks tell it from a user's all-reduce of the same shape, and errors can name it.
constexpr int kTunerAgreementRoot = -2;
/// The root field of the reproducible mode's one-call all-reduce and reduce-scatter on one host
/// (arenaReproducible): a rank that runs the call in the other mode is named at once.
constexpr int kReproducibleRoot = -3;

/// 24 bits: kind (4) | type (4) | op (3) | 13-bit hash of count and root.
uint32_t fingerprint(const OpDesc& d);
/// "allReduce(count=1024, float32, sum)"; the tuner's agreement call says what it is.
std::string describe(const OpDesc& d);
/// Whether two ranks' calls agree: kind, count, type, root, and op where the call reduces.
bool sameCall(const OpDesc& a, const OpDesc& b);
/// Explain how a peer's fingerprint differs from ours: "runs broadcast", "uses float16", "uses a
/// different count or root"; with the communicator's `size`, "passes root=2 (the same count)"
/// where the fingerprint matches the same call with that root.
std::string explainMismatch(const OpDesc& mine, uint32_t theirs, int size = 0);

}  // namespace ferry::coll
