// 3D grid: the splits, the parts and the byte formula; training is the pipeline loop with its grid.
#include "strategies/grid3d.hpp"

#include "strategies/cost.hpp"

namespace ferry::train {

Result<GridComms> splitGrid(Comm& world, const Grid3d& grid) {
  if (grid.data < 1 || grid.tensor < 1 || grid.pipeline < 1 || grid.size() != world.size())
    return makeError(ErrorCode::kInvalidArgument, "grid %dx%dx%d does not cover the %d ranks", grid.data, grid.tensor,
                     grid.pipeline, world.size());
  GridComms c;
  const int w = world.rank(), P = grid.pipeline, T = grid.tensor;
  c.s = w % P;
  c.t = (w / P) % T;
  c.d = w / (P * T);
  auto pipeline = world.split(c.d * T + c.t, c.s);
  FERRY_TRY(pipeline);
  auto tensor = world.split(c.d * P + c.s, c.t);
  FERRY_TRY(tensor);
  auto data = world.split(c.t * P + c.s, c.d);
  FERRY_TRY(data);
  c.pipeline = std::move(*pipeline);
  c.tensor = std::move(*tensor);
  c.data = std::move(*data);
  return c;
}

FfnPart gridPart(const FfnShape& shape, const Grid3d& grid, int t, int s) {
  FfnPart part = pipelinePart(shape, s, grid.pipeline);
  part.tpRank = t;
  part.tpSize = grid.tensor;
  return part;
}

Result<std::vector<StepStats>> train3d(GridComms& comms, const TrainConfig& config, PipelineSchedule schedule,
                                       FfnModel& model, const StepCallback& onStep) {
  if (model.shape().ffn % static_cast<size_t>(comms.tensor->size()) != 0)
    return makeError(ErrorCode::kInvalidArgument, "ffn %zu is not divisible by the %d tensor-parallel ranks",
                     model.shape().ffn, comms.tensor->size());
  PipelineGrid grid{comms.tensor.get(), comms.data.get()};
  return trainPipeline(*comms.pipeline, config, schedule, model, onStep, nullptr, grid);
}

uint64_t grid3dBytes(const TrainConfig& config, const Grid3d& grid, const FfnModel& model, int d, int t, int s,
                     bool received) {
  const size_t share = config.globalBatch / static_cast<size_t>(grid.data);
  const size_t rows = share / config.microBatches, h = model.shape().hidden;
  const size_t blocks = model.part().endBlock - model.part().firstBlock;
  const int T = grid.tensor, D = grid.data;
  // A ring all-reduce receives what the ring predecessor sends.
  const int tr = received ? (t + T - 1) % T : t, dr = received ? (d + D - 1) % D : d;
  return pipelineBytesSent(share, h, s, grid.pipeline) +
         config.microBatches * blocks * 2 * ringAllReduceBytesSent(rows * h, T, tr) +
         ringAllReduceBytesSent(model.paramCount(), D, dr);
}

}  // namespace ferry::train
