// Mlp: the model every strategy trains: `blocks` × (Linear → GELU → LayerNorm), then a Linear head.
// One block is the two-layer perceptron the tests use; more blocks give backward enough layers
// for DDP's buckets to overlap it.
//
// All parameters live in one flat float buffer and all gradients in another of the same layout,
// and each layer views its slice. The layout follows the order in which backward() finishes the
// gradients (the last layer's first), so the gradients that become ready together are adjacent:
// a DDP bucket is a contiguous range, and a parameter server moves the whole model in one message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "strategies/layers.hpp"
#include "strategies/tensor.hpp"

namespace ferry::train {

/// Sizes of the MLP.
struct MlpShape {
  size_t in = 16;
  size_t hidden = 32;
  size_t out = 4;
  size_t blocks = 1;  ///< hidden blocks before the head (at least 1)
};

/// One parameter tensor's place in the flat buffers.
struct ParamSlot {
  std::string name;
  size_t offset = 0;  ///< in floats
  size_t count = 0;
};

/// Multi-layer perceptron with a GELU and a LayerNorm after each hidden Linear.
class Mlp {
 public:
  /// Called by backward() with the index of each parameter (into params()) whose gradient is final.
  using GradReady = std::function<void(size_t param)>;

  /// Parameters drawn from `seed`: weights N(0, 1/fan_in), biases 0, γ = 1, β = 0. blocks 0 counts as 1.
  Mlp(const MlpShape& shape, uint64_t seed);
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const MlpShape& shape() const { return shape_; }
  /// The parameter tensors in flat-buffer order (which is gradient-ready order).
  const std::vector<ParamSlot>& params() const { return slots_; }
  /// Number of floats in the flat parameter (and gradient) buffer.
  size_t paramCount() const { return params_.size(); }
  float* paramData() { return params_.data(); }
  const float* paramData() const { return params_.data(); }
  float* gradData() { return grads_.data(); }
  const float* gradData() const { return grads_.data(); }

  /// x: batch × in -> batch × out (logits or regression outputs).
  Tensor forward(const Tensor& x);
  /// From d(loss)/d(output), write every parameter gradient, calling `ready` as each one is final.
  void backward(const Tensor& dOut, const GradReady& ready = nullptr);

 private:
  // Appends a parameter of rows × cols to the layout; returns its index.
  size_t addSlot(const std::string& name, size_t rows, size_t cols);
  Tensor view(std::vector<float>& buf, size_t index) const;

  struct Block {
    Linear fc;
    Gelu act;
    LayerNorm norm;
    size_t firstParam = 0;  // γ, β, weight, bias: four consecutive slots
  };

  MlpShape shape_;
  std::vector<ParamSlot> slots_;
  std::vector<std::pair<size_t, size_t>> dims_;  // rows × cols of each slot
  std::vector<float> params_, grads_;
  std::vector<Block> blocks_;
  Linear head_;
};

}  // namespace ferry::train
