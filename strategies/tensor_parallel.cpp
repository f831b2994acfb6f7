// Tensor and sequence parallel steps: the FfnPass does the per-block communication; here are the
// batch split, the loss scaling and the sequence-parallel sum of replicated gradients.
#include "strategies/tensor_parallel.hpp"

#include <chrono>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

size_t replicatedCount(const FfnModel& model) {
  size_t r = 0;
  for (const FfnSlot& s : model.slots())
    if (s.replicated) r += s.rows * s.cols;
  return r;
}

uint64_t tensorParallelBytesSent(const FfnModel& model, size_t globalBatch, bool sequence, int n, int rank) {
  const size_t blocks = model.part().endBlock - model.part().firstBlock;
  const size_t activation = globalBatch * model.shape().hidden;
  if (!sequence) return 2 * blocks * ringAllReduceBytesSent(activation, n, rank);
  return 4 * blocks * ringGatherBytesSent(activation / static_cast<size_t>(n), n) +
         ringAllReduceBytesSent(replicatedCount(model), n, rank);
}

Result<std::vector<StepStats>> trainTensorParallel(Comm& comm, const TrainConfig& config, bool sequence,
                                                   FfnModel& model, const StepCallback& onStep) {
  const int n = comm.size(), rank = comm.rank();
  const FfnShape& shape = model.shape();
  if (model.part().tpSize != n || model.part().tpRank != rank)
    return makeError(ErrorCode::kInvalidArgument, "the model holds tensor-parallel part %d of %d, not %d of %d",
                     model.part().tpRank, model.part().tpSize, rank, n);
  if (shape.ffn % static_cast<size_t>(n) != 0 || (sequence && config.globalBatch % static_cast<size_t>(n) != 0))
    return makeError(ErrorCode::kInvalidArgument, "ffn %zu%s is not divisible by the %d ranks", shape.ffn,
                     sequence ? " or the global batch" : "", n);
  const size_t rows = sequence ? config.globalBatch / static_cast<size_t>(n) : config.globalBatch;
  // The replicated gradients, packed for the sequence-parallel all-reduce.
  std::vector<const FfnSlot*> replicated;
  for (const FfnSlot& s : model.slots())
    if (s.replicated) replicated.push_back(&s);
  std::vector<float> pack(replicatedCount(model));

  SyntheticTask task(shape.in, shape.out, config.seed);
  auto opt = configOptimizer(config);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
    auto t0 = Clock::now();
    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    Batch mine = global.slice(sequence ? rows * static_cast<size_t>(rank) : 0, rows);
    TensorParallel tp{&comm, sequence, &st};
    FfnPass pass(model, model.gradData());
    auto y = pass.forward(mine.x, &tp);
    FERRY_TRY(y);
    LossResult loss = batchLoss(*y, mine, config.loss);
    st.loss = loss.loss;
    if (sequence) {
      const float scale = 1.0f / static_cast<float>(n);
      for (size_t i = 0; i < loss.grad.size(); ++i) loss.grad.data()[i] *= scale;
    }
    FERRY_TRY(pass.backward(loss.grad, &tp));
    if (sequence && n > 1) {
      size_t at = 0;
      for (const FfnSlot* s : replicated) {
        std::copy(model.gradData() + s->offset, model.gradData() + s->offset + s->rows * s->cols, pack.data() + at);
        at += s->rows * s->cols;
      }
      auto tc = Clock::now();
      FERRY_TRY(comm.allReduce(pack.data(), pack.data(), pack.size(), DataType::kFloat32, RedOp::kSum));
      st.commSeconds += secondsSince(tc);
      st.bytesSent += ringAllReduceBytesSent(pack.size(), n, rank);
      st.bytesReceived += ringAllReduceBytesReceived(pack.size(), n, rank);
      at = 0;
      for (const FfnSlot* s : replicated) {
        std::copy(pack.data() + at, pack.data() + at + s->rows * s->cols, model.gradData() + s->offset);
        at += s->rows * s->cols;
      }
    }
    opt->step(model.paramData(), model.gradData(), model.paramCount());
    st.exposedSeconds = st.commSeconds;  // every transfer here is blocking
    st.stateBytes = st.peakStateBytes =
        static_cast<uint64_t>(model.paramCount()) * (2 * sizeof(float) + opt->stateBytesPerParam());
    st.peakActivationBytes = pass.savedBytes();
    st.stepSeconds = secondsSince(t0);
    if (onStep) onStep(st);
    all.push_back(st);
  }
  return all;
}

}  // namespace ferry::train
