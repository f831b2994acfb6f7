// A ferry-sim sweep: every size of one collective under each algorithm row and under the row the
// tuner's cost formulas choose, simulated on one topology.
#pragma once

#include <string>
#include <vector>

#include "collectives/table.hpp"
#include "tools/ferry_sim/recorder.hpp"
#include "tools/ferry_sim/topology.hpp"

namespace ferry::sim {

/// One simulated size.
struct SimPoint {
  size_t bytes = 0;  ///< ferry-perf's size: the vector, or every rank's blocks together
  size_t count = 0;  ///< the call's count (per rank for all-gather, reduce-scatter, all-to-all)
  double seconds = 0;
  double algBw = 0;   ///< GB/s
  double busBw = 0;   ///< GB/s
  int period = 0;     ///< simulated ranks (replay.hpp, "Symmetry")
  std::string row;    ///< the algorithm that ran (the tuner's choice varies by size)
  std::string error;  ///< non-empty: not simulated, and why
};

/// ferry-perf's bus bandwidth factor of a collective on n ranks (nccl-tests' convention).
double busFactor(CallKind kind, int n);
/// ferry-perf's collective names: "all_reduce", ...; kBarrier for an unknown name.
CallKind parseCollective(const std::string& name);
const char* collectiveName(CallKind kind);

/// The count ferry-perf passes for `bytes` of `kind` on n ranks (per-rank blocks rounded down to
/// 16 bytes).
size_t perfCount(CallKind kind, size_t bytes, size_t elementSize, int n);

/// Simulate a call of `bytes` under `row`: the time per call of `iters` calls in a row, each rank
/// starting the next when it finishes the last (ferry-perf's timed loop; rooted calls overlap
/// there, a root running ahead of the ranks still receiving).
SimPoint simulate(const Topology& topo, const coll::AlgorithmRow& row, CallKind kind, size_t bytes, DataType type,
                  int n, size_t maxOps, int iters = 1);

/// The rails the rails ring runs with for this call on `topo` (coll::railsFor; 1 where the hosts
/// are uneven or hold one rank): with one it is the ring over the same ranks, step for step.
int railsOf(const Topology& topo, CallKind kind, size_t count, DataType type, int n);

/// The row the tuner's cost formulas (collectives/cost_model.hpp) pick for the call among the rows
/// ferry-sim can record, priced with the topology's alpha and beta: null when none applies.
const coll::AlgorithmRow* modelChoice(const Topology& topo, CallKind kind, size_t count, DataType type, int n);

}  // namespace ferry::sim
