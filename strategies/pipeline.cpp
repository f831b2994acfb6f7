// Pipeline schedules and the stage loop: receive, compute, send, with gradient accumulation over
// micro-batches, and the measurement of the bubble and of the activations held.
#include "strategies/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

std::vector<PipelineAction> pipelineActions(PipelineSchedule schedule, int stage, int stages, size_t micro) {
  std::vector<PipelineAction> a;
  if (schedule == PipelineSchedule::kGPipe) {
    for (size_t i = 0; i < micro; ++i) a.push_back({true, i});
    for (size_t i = 0; i < micro; ++i) a.push_back({false, i});
    return a;
  }
  const size_t warm = std::min(static_cast<size_t>(stages - 1 - stage), micro);
  for (size_t i = 0; i < warm; ++i) a.push_back({true, i});
  for (size_t i = 0; i + warm < micro; ++i) {
    a.push_back({true, warm + i});
    a.push_back({false, i});
  }
  for (size_t i = micro - warm; i < micro; ++i) a.push_back({false, i});
  return a;
}

FfnPart pipelinePart(const FfnShape& shape, int stage, int stages) {
  FfnPart part;
  const size_t s = static_cast<size_t>(stage), p = static_cast<size_t>(stages);
  part.firstBlock = s * shape.blocks / p;
  part.endBlock = (s + 1) * shape.blocks / p;
  part.embed = stage == 0;
  part.head = stage == stages - 1;
  return part;
}

uint64_t pipelineBytesSent(size_t globalBatch, size_t hidden, int stage, int stages) {
  const uint64_t perNeighbour = static_cast<uint64_t>(globalBatch) * hidden * sizeof(float);
  return perNeighbour * ((stage + 1 < stages ? 1 : 0) + (stage > 0 ? 1 : 0));
}

Result<std::vector<StepStats>> trainPipeline(Comm& comm, const TrainConfig& config, PipelineSchedule schedule,
                                             FfnModel& model, const StepCallback& onStep,
                                             std::vector<PipelineEvent>* timeline, const PipelineGrid& grid) {
  const int p = comm.size(), s = comm.rank();
  const size_t m = config.microBatches;
  const size_t replicas = grid.data ? static_cast<size_t>(grid.data->size()) : 1;
  const size_t replica = grid.data ? static_cast<size_t>(grid.data->rank()) : 0;
  if (m == 0 || config.globalBatch % (m * replicas) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible into %zu x %zu micro-batches",
                     config.globalBatch, replicas, m);
  const size_t share = config.globalBatch / replicas, rows = share / m, hid = model.shape().hidden;
  const bool first = s == 0, last = s == p - 1;
  const std::vector<PipelineAction> actions = pipelineActions(schedule, s, p, m);
  std::vector<float> scratch(model.paramCount());

  SyntheticTask task(model.shape().in, model.shape().out, config.seed);
  auto opt = configOptimizer(config);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
    const TensorParallel tp{grid.tensor, false, &st};
    const TensorParallel* tpp = grid.tensor ? &tp : nullptr;
    const auto t0 = Clock::now();
    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    std::fill(model.gradData(), model.gradData() + model.paramCount(), 0.0f);
    std::vector<std::unique_ptr<FfnPass>> passes(m);
    std::vector<Tensor> input(m), outGrad(m);
    Tensor pendingSend;  // the last action's output, sent with the next action's receive
    int pendingPeer = -1;
    uint64_t liveActivations = 0;
    double busy = 0, lossSum = 0;
    if (timeline) timeline->clear();

    auto exchange = [&](std::vector<P2pOp> ops) -> Status {
      if (ops.empty()) return Status();
      for (const P2pOp& op : ops)
        (op.kind == P2pOp::Kind::kSend ? st.bytesSent : st.bytesReceived) += op.count * sizeof(float);
      const auto tc = Clock::now();
      Status status = comm.sendRecv(ops);
      st.commSeconds += seconds(tc, Clock::now());
      return status;
    };
    for (const PipelineAction& a : actions) {
      const size_t i = a.micro;
      std::vector<P2pOp> ops;
      if (pendingPeer >= 0) ops.push_back(P2pOp::send(pendingSend.data(), pendingSend.size(), DataType::kFloat32, pendingPeer));
      if (a.forward && !first) {
        input[i] = Tensor(rows, hid);
        ops.push_back(P2pOp::recv(input[i].data(), input[i].size(), DataType::kFloat32, s - 1));
      } else if (!a.forward && !last) {
        outGrad[i] = Tensor(rows, hid);
        ops.push_back(P2pOp::recv(outGrad[i].data(), outGrad[i].size(), DataType::kFloat32, s + 1));
      }
      FERRY_TRY(exchange(std::move(ops)));
      pendingPeer = -1;
      pendingSend = Tensor();

      const auto tc = Clock::now();
      Batch micro = global.slice(replica * share + i * rows, rows);
      if (a.forward) {
        passes[i] = std::make_unique<FfnPass>(model, scratch.data());
        auto y = passes[i]->forward(first ? micro.x : input[i], tpp);
        FERRY_TRY(y);
        input[i] = Tensor();
        if (last) {
          LossResult loss = batchLoss(*y, micro, config.loss);
          lossSum += loss.loss;
          const float scale = 1.0f / static_cast<float>(m);  // the mean over micro-batches
          for (size_t k = 0; k < loss.grad.size(); ++k) loss.grad.data()[k] *= scale;
          outGrad[i] = loss.grad;
        } else {
          pendingSend = *y;
          pendingPeer = s + 1;
        }
        liveActivations += passes[i]->savedBytes();
        st.peakActivationBytes = std::max(st.peakActivationBytes, liveActivations);
      } else {
        auto dx = passes[i]->backward(outGrad[i], tpp);
        FERRY_TRY(dx);
        for (size_t k = 0; k < scratch.size(); ++k) model.gradData()[k] += scratch[k];
        liveActivations -= passes[i]->savedBytes();
        passes[i].reset();
        outGrad[i] = Tensor();
        if (!first) {
          pendingSend = *dx;
          pendingPeer = s - 1;
        }
      }
      const auto te = Clock::now();
      busy += seconds(tc, te);
      if (timeline) timeline->push_back({a, seconds(t0, tc), seconds(t0, te)});
    }
    if (pendingPeer >= 0)
      FERRY_TRY(exchange({P2pOp::send(pendingSend.data(), pendingSend.size(), DataType::kFloat32, pendingPeer)}));
    if (grid.data && replicas > 1) {  // average this stage's gradients over the data-parallel replicas
      const auto tc = Clock::now();
      FERRY_TRY(grid.data->allReduce(model.gradData(), model.gradData(), model.paramCount(), DataType::kFloat32,
                                     RedOp::kAvg));
      st.commSeconds += seconds(tc, Clock::now());
      st.bytesSent += ringAllReduceBytesSent(model.paramCount(), grid.data->size(), grid.data->rank());
      st.bytesReceived += ringAllReduceBytesReceived(model.paramCount(), grid.data->size(), grid.data->rank());
    }
    opt->step(model.paramData(), model.gradData(), model.paramCount());

    st.loss = last ? static_cast<float>(lossSum / static_cast<double>(m)) : std::numeric_limits<float>::quiet_NaN();
    st.exposedSeconds = st.commSeconds;
    st.stateBytes = st.peakStateBytes =
        static_cast<uint64_t>(model.paramCount()) * (2 * sizeof(float) + opt->stateBytesPerParam());
    st.stepSeconds = seconds(t0, Clock::now());
    st.bubbleFraction = st.stepSeconds > 0 ? 1.0 - busy / st.stepSeconds : 0;
    if (onStep) onStep(st);
    all.push_back(st);
  }
  return all;
}

}  // namespace ferry::train
