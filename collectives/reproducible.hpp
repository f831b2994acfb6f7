// The reproducible mode: sums whose bits depend only on each element's values on the ranks.
//
// A sum or average of float16, float32, float64 or bfloat16 in all-reduce, reduce-scatter or reduce
// is defined by three steps (kernels/host/reproducible.hpp has the conversions and the vocabulary):
//   1. codes: each element's exponent code on every rank; the largest per element (max is exact);
//   2. lanes: every rank's value on that code's grid as an integer, the integers summed (exact:
//      two's complement sums do not depend on order or grouping);
//   3. the ranks that receive a result round its integer sum once to the float type.
// Three forms compute them, with the same bits:
// - integer form (reduce; all-reduces under 256 elements per rank; the exchanged form's count %
//   ranks tail): an all-reduce with max over the codes, then the call's own collective over int32
//   or int64 lanes;
// - pipelined form (reduce-scatter; all-reduces of 256 elements per rank or more; every rank on
//   one host): one call through the arena's mailbox pipeline (coll::arenaReproducible), each
//   rank reducing every chunk of its segment exactly from every rank's values as they arrive
//   (kernels::reproReduceRowList); an all-reduce's ranks then copy the rounded chunks, as the
//   default mode's two-shot all-reduce does. The values cross as they are;
// - exchanged form (the same calls across hosts; all-reduce in pieces of 1 MiB of every rank's
//   values): an all-to-all hands each rank every rank's values of its block, the rank runs all
//   three steps on them alone (kernels::reproReduceRows), and an all-reduce's ranks all-gather the
//   rounded blocks. The values cross as they are: what the default mode's reduce-scatter and
//   all-gather move, with no codes and no wider lanes.
// The integer and exchanged forms' collectives run through whatever plan the tuner or FERRY_ALGO
// picks; every plan moves or sums the same integers and values, so the results keep their bits.
// The pipelined form's plan is fixed. docs/RELIABILITY.md ("Reproducible reductions") states the
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
/// through `inner`, which runs a host call on the same communicator; the pipelined form through
/// `pipelined` (arenaReproducible on the same communicator), or, where that is empty (ranks on
/// several hosts), the exchanged form.
Status runReproducible(const Call& call, int rank, int ranks, ReproScratch& scratch,
                       const std::function<Status(const Call&)>& inner,
                       const std::function<Status(const Call&)>& pipelined);

}  // namespace ferry::coll
