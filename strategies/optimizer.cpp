// SGD and Adam updates.
#include "strategies/optimizer.hpp"

#include <cmath>

namespace ferry::train {

void Sgd::step(float* params, const float* grads, size_t n) {
  if (momentum_ == 0.0f) {
    for (size_t i = 0; i < n; ++i) params[i] -= lr_ * grads[i];
    return;
  }
  float* velocity = state(own_, n);
  for (size_t i = 0; i < n; ++i) {
    velocity[i] = momentum_ * velocity[i] + grads[i];
    params[i] -= lr_ * velocity[i];
  }
}

void Adam::step(float* params, const float* grads, size_t n) {
  float* m = state(own_, 2 * n);
  float* v = m + n;
  ++steps_;
  const double c1 = 1.0 - std::pow(static_cast<double>(beta1_), static_cast<double>(steps_));
  const double c2 = 1.0 - std::pow(static_cast<double>(beta2_), static_cast<double>(steps_));
  const float stepSize = static_cast<float>(lr_ / c1);
  const float rootC2 = static_cast<float>(std::sqrt(c2));
  for (size_t i = 0; i < n; ++i) {
    m[i] = beta1_ * m[i] + (1.0f - beta1_) * grads[i];
    v[i] = beta2_ * v[i] + (1.0f - beta2_) * grads[i] * grads[i];
    params[i] -= stepSize * m[i] / (std::sqrt(v[i]) / rootC2 + epsilon_);
  }
}

std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, float lr) {
  if (name == "sgd") return std::make_unique<Sgd>(lr);
  if (name == "momentum") return std::make_unique<Sgd>(lr, 0.9f);
  if (name == "adam") return std::make_unique<Adam>(lr);
  return nullptr;
}

}  // namespace ferry::train
