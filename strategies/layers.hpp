// The layers of the training substrate, each with a hand-written backward pass.
//
// A layer does not own its parameters: it is given views into the model's flat parameter and
// gradient buffers, so a strategy can move all of them (or a contiguous bucket of them) with one
// call. forward() keeps what backward() needs (the input, or normalized values); backward() takes
// the gradient of the loss with respect to the output, *writes* (not accumulates) the parameter
// gradients and returns the gradient with respect to the input.
#pragma once

#include <vector>

#include "strategies/tensor.hpp"

namespace ferry::train {

/// Column sums of `m` into the 1 × cols tensor `out`, accumulated in double (a bias gradient).
void columnSums(const Tensor& m, Tensor& out);

/// y = x · W + b, with W of shape in × out and b of shape 1 × out. An empty b (and db) means no
/// bias: a row-parallel Linear adds its bias only after its partial outputs were summed.
class Linear {
 public:
  Linear() = default;
  /// Views of the weight, bias and their gradients.
  Linear(Tensor w, Tensor b, Tensor dw, Tensor db) : w_(w), b_(b), dw_(dw), db_(db) {}

  /// Point the layer at other parameter and gradient storage, keeping the saved input: FSDP
  /// gathers a layer's parameters again before backward, into a fresh buffer.
  void rebind(Tensor w, Tensor b, Tensor dw, Tensor db) {
    w_ = w;
    b_ = b;
    dw_ = dw;
    db_ = db;
  }
  /// Bytes of the activation saved for backward (the input).
  size_t savedBytes() const { return x_.size() * sizeof(float); }
  /// Drop the saved input (after backward).
  void release() { x_ = Tensor(); }

  /// x: batch × in -> batch × out.
  Tensor forward(const Tensor& x);
  /// dy: batch × out. Writes dW = xᵀ·dy and db = Σ_rows dy; returns dx = dy · Wᵀ, or an empty
  /// tensor when `inputGrad` is false (the input is data, not an activation).
  Tensor backward(const Tensor& dy, bool inputGrad = true);

 private:
  Tensor w_, b_, dw_, db_;
  Tensor x_;
};

/// GELU, tanh approximation: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))). No parameters.
class Gelu {
 public:
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  size_t savedBytes() const { return x_.size() * sizeof(float); }
  void release() { x_ = Tensor(); }

 private:
  Tensor x_;
};

/// Normalizes each row to zero mean and unit variance, then scales by γ and shifts by β (1 × features).
class LayerNorm {
 public:
  /// Added to the variance before the square root.
  static constexpr float kEpsilon = 1e-5f;

  LayerNorm() = default;
  /// Views of γ, β and their gradients.
  LayerNorm(Tensor gamma, Tensor beta, Tensor dgamma, Tensor dbeta)
      : gamma_(gamma), beta_(beta), dgamma_(dgamma), dbeta_(dbeta) {}

  /// As Linear::rebind: new parameter and gradient storage, same saved values.
  void rebind(Tensor gamma, Tensor beta, Tensor dgamma, Tensor dbeta) {
    gamma_ = gamma;
    beta_ = beta;
    dgamma_ = dgamma;
    dbeta_ = dbeta;
  }
  size_t savedBytes() const { return (xhat_.size() + invStd_.size()) * sizeof(float); }
  void release() {
    xhat_ = Tensor();
    invStd_.clear();
  }

  Tensor forward(const Tensor& x);
  /// Writes dγ = Σ_rows dy·x̂ and dβ = Σ_rows dy; returns
  /// dx = (dx̂ - mean(dx̂) - x̂ · mean(dx̂·x̂)) / σ with dx̂ = dy·γ, per row.
  Tensor backward(const Tensor& dy);

 private:
  Tensor gamma_, beta_, dgamma_, dbeta_;
  Tensor xhat_;                // normalized input, batch × features
  std::vector<float> invStd_;  // 1/σ per row
};

}  // namespace ferry::train
