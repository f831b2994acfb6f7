// Parameter server: the server's and the workers' halves of each synchronous step.
#include "strategies/param_server.hpp"

#include <chrono>
#include <limits>

#include "strategies/data.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kServer = 0;

// Runs a sendRecv batch, adding its time and bytes to `stats`.
Status exchange(Comm& comm, const std::vector<P2pOp>& ops, StepStats& stats) {
  auto t0 = Clock::now();
  Status s = comm.sendRecv(ops);
  stats.commSeconds += secondsSince(t0);
  for (const P2pOp& op : ops) {
    uint64_t bytes = op.count * sizeof(float);
    (op.kind == P2pOp::Kind::kSend ? stats.bytesSent : stats.bytesReceived) += bytes;
  }
  return s;
}

Status pull(Comm& comm, Mlp& model, StepStats& stats) {
  std::vector<P2pOp> ops;
  if (comm.rank() == kServer) {
    for (int w = 1; w < comm.size(); ++w)
      ops.push_back(P2pOp::send(model.paramData(), model.paramCount(), DataType::kFloat32, w));
  } else {
    ops.push_back(P2pOp::recv(model.paramData(), model.paramCount(), DataType::kFloat32, kServer));
  }
  return exchange(comm, ops, stats);
}

}  // namespace

Result<std::vector<StepStats>> trainParameterServer(Comm& comm, const TrainConfig& config, Mlp& model,
                                                    const StepCallback& onStep) {
  const int n = comm.size(), rank = comm.rank(), workers = n - 1;
  if (n < 2) return makeError(ErrorCode::kInvalidArgument, "parameter server needs at least 2 ranks, got %d", n);
  if (config.globalBatch % static_cast<size_t>(workers) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible by the %d workers",
                     config.globalBatch, workers);
  const size_t shard = config.globalBatch / static_cast<size_t>(workers);
  const size_t P = model.paramCount();
  SyntheticTask task(config.shape.in, config.shape.out, config.seed);
  auto opt = rank == kServer ? configOptimizer(config) : nullptr;
  // The server receives each worker's gradients into its own slot, then averages them in worker
  // order, so the sum does not depend on which worker finished first.
  std::vector<float> pushed(rank == kServer ? P * static_cast<size_t>(workers) : 0);

  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
    st.loss = std::numeric_limits<float>::quiet_NaN();
    auto t0 = Clock::now();
    FERRY_TRY(pull(comm, model, st));
    std::vector<P2pOp> push;
    if (rank == kServer) {
      for (int w = 1; w < n; ++w)
        push.push_back(P2pOp::recv(pushed.data() + P * static_cast<size_t>(w - 1), P, DataType::kFloat32, w));
      FERRY_TRY(exchange(comm, push, st));
      float* g = model.gradData();
      const float scale = 1.0f / static_cast<float>(workers);
      for (size_t i = 0; i < P; ++i) {
        float sum = 0;
        for (int w = 0; w < workers; ++w) sum += pushed[P * static_cast<size_t>(w) + i];
        g[i] = sum * scale;
      }
      opt->step(model.paramData(), model.gradData(), P);
    } else {
      Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
      Batch mine = global.slice(shard * static_cast<size_t>(rank - 1), shard);
      st.loss = localGradients(model, mine, config.loss);
      push.push_back(P2pOp::send(model.gradData(), P, DataType::kFloat32, kServer));
      FERRY_TRY(exchange(comm, push, st));
    }
    st.stepSeconds = secondsSince(t0);
    st.exposedSeconds = st.commSeconds;
    if (onStep) onStep(st);
    all.push_back(st);
  }
  StepStats last;
  FERRY_TRY(pull(comm, model, last));
  return all;
}

}  // namespace ferry::train
