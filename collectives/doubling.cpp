// Recursive doubling all-reduce (algorithms.hpp has the contract).
//
// Vocabulary: p is the largest power of two <= n and extra = n - p. Fold: each even rank below
// 2*extra sends its vector to the odd rank above it and sits out; the p ranks left take virtual
// ranks 0..p-1 (odd folders r -> r/2, the rest r -> r - extra). Step k (mask 2^k): virtual rank v
// exchanges its partial result with v ^ mask and combines the two, the lower virtual rank's
// operand first. Unfold: each odd folder sends the result back to its even partner.
//
// Every combination takes the same two operands in the same order on both partners, so all ranks
// end bit-identical. Each step moves the whole vector: for latency-bound calls (the tuner picks
// it by the measured alpha and beta of the network), not for bandwidth.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {
namespace {

// The transport rank of virtual rank v.
int physical(int v, int extra) { return v < extra ? 2 * v + 1 : v + extra; }

}  // namespace

Status doublingAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const int n = ex.size(), r = ex.rank();
  const size_t bytes = count * dataTypeSize(type);
  if (out != in && bytes > 0) std::memmove(out, in, bytes);
  if (n == 1 || count == 0) return Status::ok();
  const RedOp combine = op == RedOp::kAvg ? RedOp::kSum : op;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  int steps = 0;
  for (int m = 1; m < p; m <<= 1) ++steps;
  auto* acc = static_cast<uint8_t*>(out);
  auto* other = static_cast<uint8_t*>(ex.context().scratch->get(bytes));
  if (other == nullptr) return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", bytes);

  int v = -1;  // virtual rank, -1 while folded out
  if (r < 2 * extra) {
    ex.setPhase("recursive doubling: fold", 0, 1);
    if (r % 2 == 0) {
      auto s = ex.send(r + 1, acc, bytes);
      FERRY_TRY(s);
      FERRY_TRY(ex.wait(*s));
    } else {
      auto rv = ex.recv(r - 1, other, bytes);
      FERRY_TRY(rv);
      FERRY_TRY(ex.wait(*rv));
      kernels::reduce(type, combine, acc, other, acc, count);
      v = r / 2;
    }
  } else {
    v = r - extra;
  }
  if (v >= 0) {
    int k = 0;
    for (int mask = 1; mask < p; mask <<= 1, ++k) {
      ex.setPhase("recursive doubling", k, steps);
      const int pv = v ^ mask, peer = physical(pv, extra);
      auto rv = ex.recv(peer, other, bytes);
      FERRY_TRY(rv);
      auto s = ex.send(peer, acc, bytes);
      FERRY_TRY(s);
      FERRY_TRY(ex.wait(*rv));
      FERRY_TRY(ex.wait(*s));
      if (pv < v) {
        kernels::reduce(type, combine, acc, other, acc, count);
      } else {
        kernels::reduce(type, combine, acc, acc, other, count);
      }
    }
    if (op == RedOp::kAvg) kernels::divide(type, acc, acc, count, static_cast<uint32_t>(n));
  }
  if (r < 2 * extra) {
    ex.setPhase("recursive doubling: unfold", 0, 1);
    auto t = r % 2 == 1 ? ex.send(r - 1, acc, bytes) : ex.recv(r + 1, acc, bytes);
    FERRY_TRY(t);
    FERRY_TRY(ex.wait(*t));
  }
  return Status::ok();
}

// Row of the algorithm table (table.hpp): priced only over a measured network; on one host (and
// over an unmeasured network) it runs only where FERRY_ALGO asks for it.
extern const AlgorithmRow kDoublingAllReduce{CallKind::kAllReduce,
                                             Algorithm::kDoubling,
                                             Protocol::kMessages,
                                             [](const Pricing&) { return true; },
                                             [](const Pricing& p) {
                                               return !p.arena && p.modelled ? p.doubling(p.n, p.B) : kUnmodelled;
                                             },
                                             [](Exec& ex, const Plan&, const Call& c) {
                                               return doublingAllReduce(ex, c.send, c.recv, c.count, c.type, c.op);
                                             }};

}  // namespace ferry::coll
