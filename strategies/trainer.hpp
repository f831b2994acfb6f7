// What every strategy shares: the run's configuration, the per-step report, the local
// forward/loss/backward on one shard, and the single-process reference the tests compare against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strategies/data.hpp"
#include "strategies/loss.hpp"
#include "strategies/model.hpp"
#include "strategies/optimizer.hpp"

namespace ferry::train {

/// A training run, identical on every rank.
struct TrainConfig {
  MlpShape shape;
  LossKind loss = LossKind::kCrossEntropy;
  std::string optimizer = "adam";
  float lr = 1e-2f;
  size_t globalBatch = 24;  ///< rows per step over all data-parallel workers
  int steps = 5;
  uint64_t seed = 1;
  size_t bucketBytes = 1024;     ///< DDP: gradient bytes per all-reduce bucket
  size_t ffn = 0;                ///< FFN model (tp, sp, pp): inner width, 0 for 4 × hidden
  size_t microBatches = 4;       ///< pipeline: micro-batches per step (divides globalBatch)
  size_t experts = 4;            ///< MoE: experts (divisible by the ranks)
  size_t topK = 1;               ///< MoE: experts per token (1 or 2)
  float capacityFactor = 1.25f;  ///< MoE: expert capacity = ⌈factor · tokens · k / experts⌉ per group
  float auxWeight = 0.01f;       ///< MoE: weight of the load-balancing loss
  bool offload = false;          ///< FSDP: optimizer state in a separate host arena
  bool prefetch = true;          ///< FSDP: start the next layer's all-gather before computing this one
};

/// What one rank measured during one step.
struct StepStats {
  int step = 0;
  float loss = 0;              ///< this rank's shard loss (NaN on a rank that trains no shard)
  double stepSeconds = 0;      ///< wall time of the whole step
  double commSeconds = 0;      ///< time ferry spent on this step's transfers
  double exposedSeconds = 0;   ///< communication time the computation did not hide
  double overlapFraction = 0;  ///< share of commSeconds that ran while backward computed (DDP)
  uint64_t bytesSent = 0;      ///< payload bytes this rank sent
  uint64_t bytesReceived = 0;  ///< payload bytes this rank received
  int buckets = 0;             ///< all-reduce calls (DDP)
  int ranks = 0;               ///< ranks of the communicator the step ran on (elastic DDP: fewer after a shrink)
  /// Memory of the model state on this rank: parameters + gradients + optimizer state held for the
  /// whole step, plus the peak of the buffers held only during it (FSDP's gathered layers).
  uint64_t stateBytes = 0;           ///< persistent parameters + gradients (+ optimizer state unless offloaded)
  uint64_t peakStateBytes = 0;       ///< stateBytes + peak transient buffers
  uint64_t offloadBytes = 0;         ///< optimizer state kept in the offload arena (FSDP --offload)
  uint64_t peakActivationBytes = 0;  ///< peak saved activations (pipeline)
  double bubbleFraction = 0;         ///< pipeline: share of the step this stage was idle
  uint64_t droppedTokens = 0;        ///< MoE: tokens over an expert's capacity, over all ranks
};

/// Called after each step with that step's measurements.
using StepCallback = std::function<void(const StepStats&)>;

/// The configured loss of outputs `y` on `batch`'s rows (labels or targets).
LossResult batchLoss(const Tensor& y, Batch& batch, LossKind loss);

/// Forward, loss and backward of `model` on `batch`; gradients land in model.gradData(), and
/// `ready` hears of each parameter as its gradient becomes final. Returns the loss.
float localGradients(Mlp& model, Batch& batch, LossKind loss, const Mlp::GradReady& ready = nullptr);

/// Train in one process on the whole global batch: the reference result. Returns the parameters.
std::vector<float> trainSingle(const TrainConfig& config, std::vector<float>* losses = nullptr);

/// The optimizer the configuration names; aborts on an unknown name (configs are validated first).
std::unique_ptr<Optimizer> configOptimizer(const TrainConfig& config);

}  // namespace ferry::train
