// Optimizers over a flat parameter array: plain/momentum SGD and Adam.
//
// They see parameters and gradients as one contiguous float array (the model's flat buffers), so
// the same object updates a whole model, a parameter server's copy, or one shard of it. State
// (momentum, Adam's moments) is allocated on the first step, sized to that array.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ferry::train {

/// Updates parameters in place from their gradients.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of `n` parameters from `grads`; the same `n` on every call.
  virtual void step(float* params, const float* grads, size_t n) = 0;
  /// Bytes of optimizer state per parameter (for memory reports).
  virtual size_t stateBytesPerParam() const = 0;
  /// A copy with its own state (a bound state array is shared, not copied): elastic DDP keeps
  /// one from before each step to roll back to.
  virtual std::unique_ptr<Optimizer> clone() const = 0;
  /// Keep the state in `state` (stateBytesPerParam() · n bytes, zero-filled, owned by the caller)
  /// instead of in the optimizer: FSDP's offload puts it in a separate host arena this way.
  /// Called before the first step.
  void bindState(float* state) { external_ = state; }

 protected:
  /// The state array of `floats` floats: the bound one, else `own` resized on first use.
  float* state(std::vector<float>& own, size_t floats) {
    if (external_) return external_;
    own.resize(floats, 0.0f);
    return own.data();
  }

 private:
  float* external_ = nullptr;
};

/// p -= lr · v, with v = momentum · v + g (v = g when momentum is 0).
class Sgd : public Optimizer {
 public:
  explicit Sgd(float lr, float momentum = 0.0f) : lr_(lr), momentum_(momentum) {}
  void step(float* params, const float* grads, size_t n) override;
  size_t stateBytesPerParam() const override { return momentum_ != 0.0f ? sizeof(float) : 0; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Sgd>(*this); }

 private:
  float lr_, momentum_;
  std::vector<float> own_;
};

/// Adam (Kingma & Ba) with bias correction: m, v moving averages of g and g².
class Adam : public Optimizer {
 public:
  explicit Adam(float lr, float beta1 = 0.9f, float beta2 = 0.999f, float epsilon = 1e-8f)
      : lr_(lr), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}
  void step(float* params, const float* grads, size_t n) override;
  size_t stateBytesPerParam() const override { return 2 * sizeof(float); }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adam>(*this); }

 private:
  float lr_, beta1_, beta2_, epsilon_;
  long steps_ = 0;
  std::vector<float> own_;  // m then v
};

/// "sgd", "momentum" (SGD, momentum 0.9) or "adam" with learning rate `lr`; null for another name.
std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, float lr);

}  // namespace ferry::train
