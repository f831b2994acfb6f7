// Pipeline parallel training of the FFN model: the blocks are cut into p consecutive stages, one
// per rank (the embedding on the first, the head and the loss on the last). The global batch is cut
// into m micro-batches; a stage receives a micro-batch's activations from the previous stage, runs
// its blocks and sends the result on; backward passes the activation gradients back the same way.
// Each stage accumulates its parameter gradients over the micro-batches (the loss gradient of each
// is scaled by 1/m, so the sum is the gradient of the whole batch) and steps its optimizer once.
//
// Schedules (per stage, a list of actions F i = forward of micro-batch i, B i = backward):
//   GPipe  F0 F1 … F(m-1), then B0 … B(m-1). Every stage holds all m micro-batches' activations.
//   1F1B   stage s runs w = min(p-1-s, m) warm-up forwards, then alternates one forward and one
//          backward, then drains the remaining backwards (flushed: all micro-batches of a step
//          finish before the optimizer step). At most w+1 micro-batches' activations are alive.
// Both leave stages idle while the pipeline fills and drains: the bubble, (p-1)/(m+p-1) of the
// step for equal stage times. 1F1B does not shrink the bubble, it bounds the activation memory.
//
// Transfers: the output of one action is sent in the same sendRecv batch that receives the input
// of this stage's next action (Megatron's send_forward_recv_backward and friends), so no order of
// the neighbours' blocking calls deadlocks.
//
// Cost per step: every stage boundary carries each micro-batch's activations forward and their
// gradients back, G·h floats each way: stage s sends G·h·4 bytes per neighbour, 2(p-1)·G·h·4 in all.
#pragma once

#include <vector>

#include "ferry/comm.hpp"
#include "strategies/ffn.hpp"

namespace ferry::train {

/// The other two dimensions of a 3D grid (grid3d.hpp) a pipeline stage may sit in.
struct PipelineGrid {
  /// This stage's tensor-parallel group: the model holds this rank's column/row slices and every
  /// block all-reduces over it (tensor_parallel.hpp). Null: no tensor parallelism.
  Comm* tensor = nullptr;
  /// The same stage of the other data-parallel pipelines: each trains on its share of the global
  /// batch, and the stage's gradients are averaged over them before the optimizer step. Null: one pipeline.
  Comm* data = nullptr;
};

/// Pipeline schedules.
enum class PipelineSchedule { kGPipe, kOneFOneB };

/// One action of a schedule: forward or backward of micro-batch `micro`.
struct PipelineAction {
  bool forward = true;
  size_t micro = 0;
};

/// The actions of `stage` of `stages` for `micro` micro-batches.
std::vector<PipelineAction> pipelineActions(PipelineSchedule schedule, int stage, int stages, size_t micro);

/// The part of the FFN model stage `stage` of `stages` holds: blocks split as evenly as possible.
FfnPart pipelinePart(const FfnShape& shape, int stage, int stages);

/// When one action ran on this stage, in seconds from the start of the step (for timelines).
struct PipelineEvent {
  PipelineAction action;
  double start = 0, end = 0;
};

/// Train `model` (built with pipelinePart(shape, rank, n)) on `comm`, one stage per rank.
/// `timeline`, when given, receives the events of the last step.
/// With `grid`, the pipeline is one of several data-parallel replicas and its stages are tensor parallel.
Result<std::vector<StepStats>> trainPipeline(Comm& comm, const TrainConfig& config, PipelineSchedule schedule,
                                             FfnModel& model, const StepCallback& onStep = nullptr,
                                             std::vector<PipelineEvent>* timeline = nullptr,
                                             const PipelineGrid& grid = {});

/// Bytes stage `stage` of `stages` sends per step: G·h·4 to each neighbour.
uint64_t pipelineBytesSent(size_t globalBatch, size_t hidden, int stage, int stages);

}  // namespace ferry::train
