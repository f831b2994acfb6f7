// The reproducible mode: sums whose bits depend only on each element's values on the ranks.
//
// A sum or average of float16, float32, float64 or bfloat16 in all-reduce, reduce-scatter or reduce
// runs as three steps around two integer collectives (kernels/host/reproducible.hpp has the
// conversions and the vocabulary):
//   1. codes: every rank takes each element's exponent code; an all-reduce with max agrees on the
//      largest per element (max is exact, so order-independent);
//   2. lanes: every rank puts each element on its code's grid as an integer and the integers are
//      summed by the same collective over int32 or int64 (exact: two's complement sums do not
//      depend on order or grouping);
//   3. the ranks that receive a result round its integer sum once to the float type.
// The integer collectives run through whatever plan the tuner or FERRY_ALGO picks; every plan gives
// the same integers, so the same bits. docs/RELIABILITY.md ("Reproducible reductions") states the
// guarantee, the error bound and the cost.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ferry/call.hpp"
#include "ferry/status.hpp"

namespace ferry::coll {

/// Buffers of the mode's steps, kept between calls (a communicator owns one).
struct ReproScratch {
  std::vector<uint64_t> codes;
  std::vector<uint64_t> lanes;
  std::vector<uint64_t> values;  ///< every rank's values of this rank's block (the exchanged form)
};

/// Whether the mode changes how `call` runs: sum or avg of a float16, float32, float64 or bfloat16
/// all-reduce, reduce-scatter or reduce that moves data. Other calls (prod, min, max, the float8
/// and integer types) run as in the default mode.
bool reproducibleApplies(const Call& call);

/// Run `call` (validated; reproducibleApplies) on rank `rank` of `ranks`: the integer collectives
/// through `inner`, which runs a host call on the same communicator.
Status runReproducible(const Call& call, int rank, int ranks, ReproScratch& scratch,
                       const std::function<Status(const Call&)>& inner);

}  // namespace ferry::coll
