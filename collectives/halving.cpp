// Recursive halving and doubling: Rabenseifner's all-reduce, reduce-scatter by recursive halving
// and all-gather by recursive doubling (algorithms.hpp has the contracts).
//
// Vocabulary: p is the largest power of two <= n and extra = n - p. Fold: each even rank below
// 2*extra hands its data to the odd rank above it and sits out; the p ranks left take virtual
// ranks 0..p-1 (odd folders r -> r/2, the rest r -> r - extra). The vector is cut into p segments
// at bounds(0) < ... < bounds(p); virtual rank v ends the halving owning segment v. For
// reduce-scatter and all-gather a segment is the blocks of the ranks v stands for: blocks 2v and
// 2v + 1 for a folder, block v + extra for the others, so segments follow the output's order.
//   halving  step d = p/2, p/4, ..., 1: v keeps the half of its range on its side of bit d, sends
//            the other half to v ^ d and combines the partner's copy of the kept half into its
//            own, the lower virtual rank's operand first. Bytes sent: (p-1)/p of the vector.
//   doubling step d = 1, 2, ..., p/2: v and v ^ d swap their ranges, so each range doubles.
// Unfold: each odd folder hands the result (or its partner's block) back to its even partner.
// log2(p) steps each instead of the ring's n - 1, with the ring's bytes (plus the fold's whole
// vector where n is not a power of two): for latency-bound and mid-sized calls between hosts.
#include <algorithm>
#include <cstring>
#include <functional>

#include "collectives/algorithms.hpp"
#include "collectives/ring_math.hpp"
#include "collectives/table.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {
namespace {

struct Fold {
  int n, p, extra;
  explicit Fold(int size) : n(size), p(1), extra(0) {
    while (p * 2 <= n) p *= 2;
    extra = n - p;
  }
  /// Virtual rank of rank r, -1 for a rank that folds out.
  int virtualOf(int r) const {
    if (r < 2 * extra) return r % 2 == 1 ? r / 2 : -1;
    return r - extra;
  }
  int physical(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  /// First rank block of virtual rank v's segment (v = p: n).
  size_t firstBlock(int v) const { return static_cast<size_t>(v < extra ? 2 * v : v + extra); }
  int steps() const {
    int s = 0;
    for (int d = 1; d < p; d <<= 1) ++s;
    return s;
  }
};

using Bounds = std::function<size_t(int)>;  // element offset of segment i, i = 0..p

Status exchange(Exec& ex, int peer, const uint8_t* sendBuf, size_t sendBytes, uint8_t* recvBuf, size_t recvBytes) {
  auto rv = ex.recv(peer, recvBuf, recvBytes);
  FERRY_TRY(rv);
  auto sd = ex.send(peer, sendBuf, sendBytes);
  FERRY_TRY(sd);
  FERRY_TRY(ex.wait(*rv));
  return ex.wait(*sd);
}

// Recursive halving over acc (segments at `bounds`, in elements); tmp holds the partner's half.
Status halve(Exec& ex, const Fold& f, int v, const Bounds& bounds, uint8_t* acc, uint8_t* tmp, DataType type,
             RedOp op) {
  const size_t es = dataTypeSize(type);
  const RedOp combine = op == RedOp::kAvg ? RedOp::kSum : op;
  int lo = 0, hi = f.p, k = 0;
  for (int d = f.p / 2; d >= 1; d /= 2, ++k) {
    ex.setPhase("recursive halving", k, f.steps());
    const int mid = lo + d, pv = v ^ d;
    const bool upper = (v & d) != 0;
    const int keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
    const int sendLo = upper ? lo : mid, sendHi = upper ? mid : hi;
    const size_t keepBegin = bounds(keepLo), keepElems = bounds(keepHi) - keepBegin;
    const size_t sendBegin = bounds(sendLo), sendElems = bounds(sendHi) - sendBegin;
    FERRY_TRY(exchange(ex, f.physical(pv), acc + sendBegin * es, sendElems * es, tmp, keepElems * es));
    uint8_t* kept = acc + keepBegin * es;
    if (pv < v) {
      kernels::reduce(type, combine, kept, tmp, kept, keepElems);
    } else {
      kernels::reduce(type, combine, kept, kept, tmp, keepElems);
    }
    lo = keepLo;
    hi = keepHi;
  }
  return Status::ok();
}

// Recursive doubling of the ranges in buf: v starts with segment v and ends with all of them.
Status doubleUp(Exec& ex, const Fold& f, int v, const Bounds& bounds, uint8_t* buf, DataType type) {
  const size_t es = dataTypeSize(type);
  int k = 0;
  for (int d = 1; d < f.p; d <<= 1, ++k) {
    ex.setPhase("recursive doubling", k, f.steps());
    const int base = v & ~(d - 1), pbase = base ^ d;
    const size_t mine = bounds(base), mineEnd = bounds(base + d);
    const size_t theirs = bounds(pbase), theirsEnd = bounds(pbase + d);
    FERRY_TRY(exchange(ex, f.physical(v ^ d), buf + mine * es, (mineEnd - mine) * es, buf + theirs * es,
                       (theirsEnd - theirs) * es));
  }
  return Status::ok();
}

uint8_t* scratchOf(Exec& ex, size_t bytes) { return static_cast<uint8_t*>(ex.context().scratch->get(bytes)); }

Status noScratch(size_t bytes) {
  return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", bytes);
}

}  // namespace

Status rabenseifnerAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), bytes = count * es;
  if (out != in && bytes > 0) std::memmove(out, in, bytes);
  if (n == 1 || count == 0) return Status::ok();
  const Fold f(n);
  auto* acc = static_cast<uint8_t*>(out);
  uint8_t* tmp = scratchOf(ex, bytes);
  if (tmp == nullptr) return noScratch(bytes);
  const int v = f.virtualOf(r);
  if (r < 2 * f.extra) {
    ex.setPhase("rabenseifner: fold", 0, 1);
    if (v < 0) {
      FERRY_TRY(sendTo(ex, acc, bytes, r + 1));
    } else {
      FERRY_TRY(recvFrom(ex, tmp, bytes, r - 1));
      kernels::reduce(type, op == RedOp::kAvg ? RedOp::kSum : op, acc, tmp, acc, count);
    }
  }
  if (v >= 0) {
    const Bounds bounds = [&](int i) { return segmentBegin(count, f.p, i); };
    FERRY_TRY(halve(ex, f, v, bounds, acc, tmp, type, op));
    if (op == RedOp::kAvg) {
      kernels::divide(type, acc + bounds(v) * es, acc + bounds(v) * es, bounds(v + 1) - bounds(v),
                      static_cast<uint32_t>(n));
    }
    FERRY_TRY(doubleUp(ex, f, v, bounds, acc, type));
  }
  if (r < 2 * f.extra) {
    ex.setPhase("rabenseifner: unfold", 0, 1);
    FERRY_TRY(v < 0 ? recvFrom(ex, acc, bytes, r + 1) : sendTo(ex, acc, bytes, r - 1));
  }
  return Status::ok();
}

Status halvingReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), block = recvCount * es, total = block * static_cast<size_t>(n);
  if (n == 1 || recvCount == 0) {
    if (out != in && block > 0) std::memmove(out, in, block);
    return Status::ok();
  }
  const Fold f(n);
  const int v = f.virtualOf(r);
  if (v < 0) {  // folds out: hands its whole input over, gets its block back
    ex.setPhase("recursive halving: fold", 0, 1);
    FERRY_TRY(sendTo(ex, in, total, r + 1));  // before the receive: in place, out lies in `in`
    ex.setPhase("recursive halving: unfold", 0, 1);
    return recvFrom(ex, out, block, r + 1);
  }
  uint8_t* acc = scratchOf(ex, 2 * total);
  if (acc == nullptr) return noScratch(2 * total);
  uint8_t* tmp = acc + total;
  std::memcpy(acc, in, total);
  if (r < 2 * f.extra) {
    ex.setPhase("recursive halving: fold", 0, 1);
    FERRY_TRY(recvFrom(ex, tmp, total, r - 1));
    kernels::reduce(type, op == RedOp::kAvg ? RedOp::kSum : op, acc, tmp, acc, recvCount * static_cast<size_t>(n));
  }
  const Bounds bounds = [&](int i) { return f.firstBlock(i) * recvCount; };
  FERRY_TRY(halve(ex, f, v, bounds, acc, tmp, type, op));
  if (op == RedOp::kAvg) {
    kernels::divide(type, acc + bounds(v) * es, acc + bounds(v) * es, bounds(v + 1) - bounds(v),
                    static_cast<uint32_t>(n));
  }
  std::memcpy(out, acc + static_cast<size_t>(r) * block, block);
  if (r < 2 * f.extra) {
    ex.setPhase("recursive halving: unfold", 0, 1);
    FERRY_TRY(sendTo(ex, acc + static_cast<size_t>(r - 1) * block, block, r - 1));
  }
  return Status::ok();
}

Status doublingAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), block = sendCount * es, total = block * static_cast<size_t>(n);
  auto* o = static_cast<uint8_t*>(out);
  if (block == 0) return Status::ok();
  if (o + static_cast<size_t>(r) * block != in) std::memmove(o + static_cast<size_t>(r) * block, in, block);
  if (n == 1) return Status::ok();
  const Fold f(n);
  const int v = f.virtualOf(r);
  if (v < 0) {  // folds out: hands its block over, gets every block back
    ex.setPhase("recursive doubling: fold", 0, 1);
    FERRY_TRY(sendTo(ex, o + static_cast<size_t>(r) * block, block, r + 1));
    ex.setPhase("recursive doubling: unfold", 0, 1);
    return recvFrom(ex, o, total, r + 1);
  }
  if (r < 2 * f.extra) {
    ex.setPhase("recursive doubling: fold", 0, 1);
    FERRY_TRY(recvFrom(ex, o + static_cast<size_t>(r - 1) * block, block, r - 1));
  }
  FERRY_TRY(doubleUp(
      ex, f, v, [&](int i) { return f.firstBlock(i) * sendCount; }, o, type));
  if (r < 2 * f.extra) {
    ex.setPhase("recursive doubling: unfold", 0, 1);
    FERRY_TRY(sendTo(ex, o, total, r - 1));
  }
  return Status::ok();
}

// Rows of the algorithm table (table.hpp): priced over a measured network only (one host has the
// arena's rows; cost_model.hpp has the formulas).
namespace {
double rabenseifnerCost(const Pricing& p) { return !p.arena && p.modelled ? p.rabenseifner(p.n, p.B) : kUnmodelled; }
// Reduce-scatter and all-gather: B is one rank's block.
double halvingCost(const Pricing& p) { return !p.arena && p.modelled ? p.halvingBlocks(p.n, p.B, true) : kUnmodelled; }
double doublingGatherCost(const Pricing& p) {
  return !p.arena && p.modelled ? p.halvingBlocks(p.n, p.B, false) : kUnmodelled;
}
}  // namespace

extern const AlgorithmRow kRabenseifnerAllReduce{CallKind::kAllReduce,
                                                 Algorithm::kRabenseifner,
                                                 Protocol::kMessages,
                                                 [](const Pricing&) { return true; },
                                                 rabenseifnerCost,
                                                 [](Exec& ex, const Plan&, const Call& c) {
                                                   return rabenseifnerAllReduce(ex, c.send, c.recv, c.count, c.type,
                                                                                c.op);
                                                 }};

extern const AlgorithmRow kHalvingReduceScatter{CallKind::kReduceScatter,
                                                Algorithm::kHalving,
                                                Protocol::kMessages,
                                                [](const Pricing&) { return true; },
                                                halvingCost,
                                                [](Exec& ex, const Plan&, const Call& c) {
                                                  return halvingReduceScatter(ex, c.send, c.recv, c.count, c.type,
                                                                              c.op);
                                                }};

extern const AlgorithmRow kDoublingAllGather{CallKind::kAllGather,
                                             Algorithm::kDoubling,
                                             Protocol::kMessages,
                                             [](const Pricing&) { return true; },
                                             doublingGatherCost,
                                             [](Exec& ex, const Plan&, const Call& c) {
                                               return doublingAllGather(ex, c.send, c.recv, c.count, c.type);
                                             }};

}  // namespace ferry::coll
