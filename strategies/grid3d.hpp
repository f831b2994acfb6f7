// 3D parallelism: data × tensor × pipeline parallel on one process grid, built with Comm::split.
//
// World rank w sits at grid coordinates (d, t, s) with w = (d·T + t)·P + s: the P stages of one
// pipeline are consecutive ranks, the T tensor-parallel ranks of a stage are P apart, and the D
// data-parallel replicas T·P apart. Three split communicators give each rank its groups:
//   pipeline  the P ranks (d, t, ·): stage-to-stage activations and gradients (send/recv batches)
//   tensor    the T ranks (d, ·, s): the per-block all-reduces of Megatron's split
//   data      the D ranks (·, t, s): the gradient average of identical model slices
// Rank (d, t, s) holds tensor slice t of the blocks of stage s (FfnPart) and trains replica d's
// share of every global batch through the pipeline schedule (pipeline.hpp with a PipelineGrid).
//
// Cost per step and rank: the pipeline's (G/D)·h·4 bytes to each stage neighbour; per micro-batch
// and block of the stage, two ring all-reduces of (G/(D·m))·h floats over T ranks; one ring
// all-reduce of the rank's parameter slice over D ranks.
#pragma once

#include <memory>
#include <vector>

#include "ferry/comm.hpp"
#include "strategies/ffn.hpp"
#include "strategies/pipeline.hpp"

namespace ferry::train {

/// Grid sizes: data-parallel replicas × tensor-parallel ranks × pipeline stages.
struct Grid3d {
  int data = 1, tensor = 1, pipeline = 1;
  int size() const { return data * tensor * pipeline; }
};

/// One rank's place in the grid and its three communicators.
struct GridComms {
  int d = 0, t = 0, s = 0;
  std::unique_ptr<Comm> data, tensor, pipeline;
};

/// Split `world` (grid.size() ranks) into this rank's groups. A collective over `world`.
Result<GridComms> splitGrid(Comm& world, const Grid3d& grid);

/// The part of the FFN model grid position (t, s) holds.
FfnPart gridPart(const FfnShape& shape, const Grid3d& grid, int t, int s);

/// Train `model` (built with gridPart for this rank) on the grid with `schedule`.
Result<std::vector<StepStats>> train3d(GridComms& comms, const TrainConfig& config, PipelineSchedule schedule,
                                       FfnModel& model, const StepCallback& onStep = nullptr);

/// Bytes grid position (d, t, s) sends (or, with `received`, receives) per step; `model` is its part.
uint64_t grid3dBytes(const TrainConfig& config, const Grid3d& grid, const FfnModel& model, int d, int t, int s,
                     bool received);

}  // namespace ferry::train
