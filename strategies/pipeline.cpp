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

// What one step holds: its report, the passes still waiting for their backward, the tensors
// received, and the output not sent yet. Built in place: `tp` points at `st`.
struct PipelineStep {
  PipelineStep(int step, size_t micro, Comm* tensor)
      : tp{tensor, false, &st}, passes(micro), input(micro), outGrad(micro) {
    st.step = step;
  }
  PipelineStep(const PipelineStep&) = delete;
  PipelineStep& operator=(const PipelineStep&) = delete;

  StepStats st;
  const TensorParallel tp;
  const TensorParallel* tpp() const { return tp.comm ? &tp : nullptr; }
  const Clock::time_point t0 = Clock::now();
  Batch global;
  std::vector<std::unique_ptr<FfnPass>> passes;
  std::vector<Tensor> input, outGrad;
  Tensor pendingSend;  // the last action's output, sent with the next action's receive
  int pendingPeer = -1;
  uint64_t liveActivations = 0;
  double busy = 0, lossSum = 0;
};

// What every step of this stage reads: its place in the pipeline, its share of the batch, its
// schedule and the optimizer.
struct PipelineRun {
  PipelineRun(Comm& comm, const TrainConfig& config, PipelineSchedule schedule, FfnModel& model,
              std::vector<PipelineEvent>* timeline, const PipelineGrid& grid);
  Result<StepStats> step(const SyntheticTask& task, int step);

  Status runAction(PipelineStep& ps, const PipelineAction& a);
  Status exchange(PipelineStep& ps, std::vector<P2pOp> ops);
  Status sendAndReceive(PipelineStep& ps, const PipelineAction& a);
  Status forward(PipelineStep& ps, size_t i, Batch& micro);
  Status backward(PipelineStep& ps, size_t i);
  Status averageOverReplicas(PipelineStep& ps);
  void account(PipelineStep& ps) const;

  Comm& comm;
  const TrainConfig& config;
  FfnModel& model;
  std::vector<PipelineEvent>* timeline;
  const PipelineGrid& grid;
  const int p, s;
  const size_t m, replicas, replica, share, rows, hid;
  const bool first, last;
  const std::vector<PipelineAction> actions;
  std::vector<float> scratch;
  std::unique_ptr<Optimizer> opt;
};

PipelineRun::PipelineRun(Comm& c, const TrainConfig& cfg, PipelineSchedule schedule, FfnModel& f,
                         std::vector<PipelineEvent>* events, const PipelineGrid& g)
    : comm(c), config(cfg), model(f), timeline(events), grid(g), p(c.size()), s(c.rank()), m(cfg.microBatches),
      replicas(g.data ? static_cast<size_t>(g.data->size()) : 1),
      replica(g.data ? static_cast<size_t>(g.data->rank()) : 0), share(cfg.globalBatch / replicas), rows(share / m),
      hid(f.shape().hidden), first(s == 0), last(s == p - 1), actions(pipelineActions(schedule, s, p, m)),
      scratch(f.paramCount()), opt(configOptimizer(cfg)) {}

Result<StepStats> PipelineRun::step(const SyntheticTask& task, int step) {
  PipelineStep ps(step, m, grid.tensor);
  ps.global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
  std::fill(model.gradData(), model.gradData() + model.paramCount(), 0.0f);
  if (timeline) timeline->clear();
  for (const PipelineAction& a : actions) FERRY_TRY(runAction(ps, a));
  if (ps.pendingPeer >= 0) {
    FERRY_TRY(
        exchange(ps, {P2pOp::send(ps.pendingSend.data(), ps.pendingSend.size(), DataType::kFloat32, ps.pendingPeer)}));
  }
  FERRY_TRY(averageOverReplicas(ps));
  opt->step(model.paramData(), model.gradData(), model.paramCount());
  account(ps);
  return ps.st;
}

// One action of the schedule: its exchange with the neighbours, then its computation.
Status PipelineRun::runAction(PipelineStep& ps, const PipelineAction& a) {
  FERRY_TRY(sendAndReceive(ps, a));
  const auto tc = Clock::now();
  Batch micro = ps.global.slice(replica * share + a.micro * rows, rows);
  FERRY_TRY(a.forward ? forward(ps, a.micro, micro) : backward(ps, a.micro));
  const auto te = Clock::now();
  ps.busy += seconds(tc, te);
  if (timeline) timeline->push_back({a, seconds(ps.t0, tc), seconds(ps.t0, te)});
  return Status();
}

Status PipelineRun::exchange(PipelineStep& ps, std::vector<P2pOp> ops) {
  if (ops.empty()) return Status();
  for (const P2pOp& op : ops)
    (op.kind == P2pOp::Kind::kSend ? ps.st.bytesSent : ps.st.bytesReceived) += op.count * sizeof(float);
  const auto tc = Clock::now();
  Status status = comm.sendRecv(ops);
  ps.st.commSeconds += seconds(tc, Clock::now());
  return status;
}

// Sends the previous action's output and receives what action `a` needs, in one exchange.
Status PipelineRun::sendAndReceive(PipelineStep& ps, const PipelineAction& a) {
  const size_t i = a.micro;
  std::vector<P2pOp> ops;
  if (ps.pendingPeer >= 0)
    ops.push_back(P2pOp::send(ps.pendingSend.data(), ps.pendingSend.size(), DataType::kFloat32, ps.pendingPeer));
  if (a.forward && !first) {
    ps.input[i] = Tensor(rows, hid);
    ops.push_back(P2pOp::recv(ps.input[i].data(), ps.input[i].size(), DataType::kFloat32, s - 1));
  } else if (!a.forward && !last) {
    ps.outGrad[i] = Tensor(rows, hid);
    ops.push_back(P2pOp::recv(ps.outGrad[i].data(), ps.outGrad[i].size(), DataType::kFloat32, s + 1));
  }
  FERRY_TRY(exchange(ps, std::move(ops)));
  ps.pendingPeer = -1;
  ps.pendingSend = Tensor();
  return Status();
}

// Micro-batch i forward; the last stage turns its output into the loss's gradient.
Status PipelineRun::forward(PipelineStep& ps, size_t i, Batch& micro) {
  ps.passes[i] = std::make_unique<FfnPass>(model, scratch.data());
  auto y = ps.passes[i]->forward(first ? micro.x : ps.input[i], ps.tpp());
  FERRY_TRY(y);
  ps.input[i] = Tensor();
  if (last) {
    LossResult loss = batchLoss(*y, micro, config.loss);
    ps.lossSum += loss.loss;
    const float scale = 1.0f / static_cast<float>(m);  // the mean over micro-batches
    for (size_t k = 0; k < loss.grad.size(); ++k) loss.grad.data()[k] *= scale;
    ps.outGrad[i] = loss.grad;
  } else {
    ps.pendingSend = *y;
    ps.pendingPeer = s + 1;
  }
  ps.liveActivations += ps.passes[i]->savedBytes();
  ps.st.peakActivationBytes = std::max(ps.st.peakActivationBytes, ps.liveActivations);
  return Status();
}

// Micro-batch i backward, accumulating its gradients.
Status PipelineRun::backward(PipelineStep& ps, size_t i) {
  auto dx = ps.passes[i]->backward(ps.outGrad[i], ps.tpp());
  FERRY_TRY(dx);
  for (size_t k = 0; k < scratch.size(); ++k) model.gradData()[k] += scratch[k];
  ps.liveActivations -= ps.passes[i]->savedBytes();
  ps.passes[i].reset();
  ps.outGrad[i] = Tensor();
  if (!first) {
    ps.pendingSend = *dx;
    ps.pendingPeer = s - 1;
  }
  return Status();
}

// Averages this stage's gradients over the data-parallel replicas.
Status PipelineRun::averageOverReplicas(PipelineStep& ps) {
  if (!grid.data || replicas <= 1) return Status();
  const auto tc = Clock::now();
  FERRY_TRY(
      grid.data->allReduce(model.gradData(), model.gradData(), model.paramCount(), DataType::kFloat32, RedOp::kAvg));
  ps.st.commSeconds += seconds(tc, Clock::now());
  ps.st.bytesSent += ringAllReduceBytesSent(model.paramCount(), grid.data->size(), grid.data->rank());
  ps.st.bytesReceived += ringAllReduceBytesReceived(model.paramCount(), grid.data->size(), grid.data->rank());
  return Status();
}

void PipelineRun::account(PipelineStep& ps) const {
  StepStats& st = ps.st;
  st.loss = last ? static_cast<float>(ps.lossSum / static_cast<double>(m)) : std::numeric_limits<float>::quiet_NaN();
  st.exposedSeconds = st.commSeconds;
  st.stateBytes = st.peakStateBytes =
      static_cast<uint64_t>(model.paramCount()) * (2 * sizeof(float) + opt->stateBytesPerParam());
  st.stepSeconds = seconds(ps.t0, Clock::now());
  st.bubbleFraction = st.stepSeconds > 0 ? 1.0 - ps.busy / st.stepSeconds : 0;
}

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
  const size_t m = config.microBatches;
  const size_t replicas = grid.data ? static_cast<size_t>(grid.data->size()) : 1;
  if (m == 0 || config.globalBatch % (m * replicas) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible into %zu x %zu micro-batches",
                     config.globalBatch, replicas, m);
  PipelineRun run(comm, config, schedule, model, timeline, grid);
  SyntheticTask task(model.shape().in, model.shape().out, config.seed);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    auto st = run.step(task, step);
    FERRY_TRY(st);
    if (onStep) onStep(*st);
    all.push_back(*st);
  }
  return all;
}

}  // namespace ferry::train
