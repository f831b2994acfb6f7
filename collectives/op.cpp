#include "collectives/op.hpp"

#include <cstdio>

namespace ferry::coll {

namespace {
bool hasOp(CallKind k) { return k == CallKind::kAllReduce || k == CallKind::kReduceScatter || k == CallKind::kReduce; }
bool hasRoot(CallKind k) { return k == CallKind::kBroadcast || k == CallKind::kReduce; }

uint32_t hash13(uint64_t count, int root) {
  // root + 1 in 64 bits: a peer's call header may carry any root, INT_MAX included.
  uint64_t x = count * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(int64_t{root} + 1) * 0xC2B2AE3D27D4EB4Full);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x) & 0x1FFF;
}
}  // namespace

// The op field of the fingerprint is 3 bits wide.
static_assert(kNumRedOps <= 8, "RedOp values no longer fit the fingerprint's op bits");

uint32_t fingerprint(const OpDesc& d) {
  uint32_t kind = static_cast<uint32_t>(d.kind) & 0xF;
  uint32_t type = d.kind == CallKind::kBarrier ? 0 : static_cast<uint32_t>(d.type) & 0xF;
  uint32_t op = hasOp(d.kind) ? static_cast<uint32_t>(d.op) & 0x7 : 0;
  uint32_t h = d.kind == CallKind::kBarrier ? 0 : hash13(d.count, hasRoot(d.kind) ? d.root : -1);
  return (kind << 20) | (type << 16) | (op << 13) | h;
}

std::string describe(const OpDesc& d) {
  char buf[320];
  if (d.kind == CallKind::kBarrier) return "barrier()";
  if (d.kind == CallKind::kAllReduce && d.root == kTunerAgreementRoot) {
    std::snprintf(buf, sizeof(buf),
                  "the tuner's agreement on trial times (an internal allReduce(count=%zu, %s, %s) that every rank runs "
                  "before the call that ends a measured trial; the calls before it differed)",
                  d.count, dataTypeName(d.type), redOpName(d.op));
    return buf;
  }
  if (d.root == kReproducibleRoot) {
    std::snprintf(buf, sizeof(buf), "%s(count=%zu, %s, %s) in the reproducible mode", callKindName(d.kind), d.count,
                  dataTypeName(d.type), redOpName(d.op));
    return buf;
  }
  int n = std::snprintf(buf, sizeof(buf), "%s(count=%zu, %s", callKindName(d.kind), d.count, dataTypeName(d.type));
  if (hasOp(d.kind)) n += std::snprintf(buf + n, sizeof(buf) - n, ", %s", redOpName(d.op));
  if (hasRoot(d.kind)) n += std::snprintf(buf + n, sizeof(buf) - n, ", root=%d", d.root);
  std::snprintf(buf + n, sizeof(buf) - n, ")");
  return buf;
}

bool sameCall(const OpDesc& a, const OpDesc& b) {
  return a.kind == b.kind && a.count == b.count && a.type == b.type && a.root == b.root &&
         (a.op == b.op || !hasOp(a.kind));
}

std::string explainMismatch(const OpDesc& mine, uint32_t theirs, int size) {
  uint32_t ours = fingerprint(mine);
  uint32_t kind = theirs >> 20;
  if (kind != (ours >> 20)) {
    if (kind >= 1 && kind <= static_cast<uint32_t>(CallKind::kSend))
      return std::string("runs ") + callKindName(static_cast<CallKind>(kind));
    return "runs an unknown operation (kind " + std::to_string(kind) + ")";
  }
  uint32_t type = (theirs >> 16) & 0xF;
  if (type != ((ours >> 16) & 0xF)) {
    return std::string("uses data type ") +
           (isValidDataType(static_cast<int>(type)) ? dataTypeName(static_cast<DataType>(type)) : "?");
  }
  uint32_t op = (theirs >> 13) & 0x7;
  if (op != ((ours >> 13) & 0x7)) {
    return std::string("uses op ") + (isValidRedOp(static_cast<int>(op)) ? redOpName(static_cast<RedOp>(op)) : "?");
  }
  if (hasRoot(mine.kind)) {
    // The same count with another root of the communicator is the likely case: name it.
    for (int r = 0; r < size; ++r) {
      OpDesc d = mine;
      d.root = r;
      if (r != mine.root && fingerprint(d) == theirs) return "passes root=" + std::to_string(r) + " (the same count)";
    }
    return "uses a different count or root";
  }
  return "uses a different count";
}

}  // namespace ferry::coll
