// The local step and the single-process reference training loop.
#include "strategies/trainer.hpp"

#include <cstdio>
#include <cstdlib>

namespace ferry::train {

LossResult batchLoss(const Tensor& y, Batch& batch, LossKind loss) {
  return loss == LossKind::kCrossEntropy ? softmaxCrossEntropy(y, batch.labels) : meanSquaredError(y, batch.targets);
}

float localGradients(Mlp& model, Batch& batch, LossKind loss, const Mlp::GradReady& ready) {
  Tensor y = model.forward(batch.x);
  LossResult r = batchLoss(y, batch, loss);
  model.backward(r.grad, ready);
  return r.loss;
}

std::unique_ptr<Optimizer> configOptimizer(const TrainConfig& config) {
  auto opt = makeOptimizer(config.optimizer, config.lr);
  if (!opt) {
    std::fprintf(stderr, "ferry::train: unknown optimizer '%s'\n", config.optimizer.c_str());
    std::abort();
  }
  return opt;
}

std::vector<float> trainSingle(const TrainConfig& config, std::vector<float>* losses) {
  Mlp model(config.shape, config.seed);
  SyntheticTask task(config.shape.in, config.shape.out, config.seed);
  auto opt = configOptimizer(config);
  for (int s = 0; s < config.steps; ++s) {
    Batch b = task.batch(static_cast<uint64_t>(s), config.globalBatch);
    float loss = localGradients(model, b, config.loss);
    if (losses) losses->push_back(loss);
    opt->step(model.paramData(), model.gradData(), model.paramCount());
  }
  return {model.paramData(), model.paramData() + model.paramCount()};
}

}  // namespace ferry::train
