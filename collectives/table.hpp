// The algorithm table: one row per (collective, algorithm, protocol), each with when it applies,
// what it costs and how it runs, defined side by side in the algorithm's own file. The tuner
// (runtime/tuner.hpp) prices every row of a call's kind and keeps the cheapest; the communicator
// runs the call through the chosen row; FERRY_ALGO's values and the TUNE log's names come from
// the rows. Adding an algorithm is a new file with its row and one line in table.cpp
// (docs/ARCHITECTURE.md, "Adding an algorithm").
#pragma once

#include <span>

#include "collectives/algorithms.hpp"
#include "collectives/cost_model.hpp"
#include "ferry/call.hpp"

namespace ferry::coll {

/// One way to run one collective.
struct AlgorithmRow {
  CallKind kind;
  Algorithm algorithm;
  Protocol protocol;
  /// Whether the row can run a call of `p.B` bytes on this communicator.
  bool (*applicable)(const Pricing& p);
  /// Predicted seconds of the call, or kUnmodelled.
  double (*cost)(const Pricing& p);
  /// Run `call` (already validated) with the plan's chunk and stores.
  Status (*run)(Exec& ex, const Plan& plan, const Call& call);
};

/// Every row, in the order the tuner weighs them: of two rows predicted alike, the earlier wins.
std::span<const AlgorithmRow* const> algorithmTable();
/// The row of (kind, algorithm, protocol), or null where the table has none.
const AlgorithmRow* findRow(CallKind kind, Algorithm algorithm, Protocol protocol);
/// The row that runs a call moving no data (count 0): the barrier through the arena where there is
/// one, else one empty message around the ring, so that a peer that called with another count or
/// collective learns of it at once instead of at its deadline.
const AlgorithmRow& emptyCallRow(bool arena);

/// Which order an algorithm combines the ranks' values in, for the reductions whose bits depend on
/// it (floating-point sum, prod and avg): algorithms of one class give identical bits for the same
/// call on the same communicator, whatever their protocol, chunk size or kind of store. The arena's
/// one-shot, two-shot and direct rows share a class (each element: rank 0, then 1, ..., n-1, left
/// to right); every other algorithm is a class of its own. The tuner measures only within the
/// class a deterministic rule picked (runtime/tuner.hpp, docs/RELIABILITY.md).
int reductionOrder(Algorithm a);
/// Whether a call's result bits depend on the order its values are combined in: a reduction
/// (all-reduce, reduce-scatter, reduce) of a floating-point type with sum, prod or avg. Min, max
/// and integer types give the same bits in any order.
bool orderSensitive(CallKind kind, DataType type, RedOp op);

/// A communicator's two levels (runtime/hierarchy.hpp): the hierarchical rows run calls on them.
class TwoLevels {
 public:
  virtual ~TwoLevels() = default;
  /// Run `call` within each host, then across hosts, as the collective requires.
  virtual Status run(const Call& call) = 0;
};

/// "ring", "oneshot", ...; nullptr for an unknown value.
const char* algorithmName(Algorithm a);
/// "messages", "mailbox", "cma"; nullptr for an unknown value.
const char* protocolName(Protocol p);
/// The algorithms the table has, and for each the collectives it runs: "ring (allReduce,
/// reduceScatter, allGather), chain (broadcast, reduce), ...", for FERRY_ALGO's help and errors.
std::string algorithmList();

}  // namespace ferry::coll
