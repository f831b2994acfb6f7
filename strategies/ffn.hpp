// FfnModel: the transformer-style model the model-parallel strategies split. An embedding Linear,
// `blocks` residual MLP blocks, a Linear head:
//
//   h = x·E + e
//   per block:  a = LayerNorm(h);  u = a·W1 + b1;  g = GELU(u);  h = h + g·W2 + b2     (W1: hidden × ffn)
//   y = h·H + c
//
// It is the MLP half of a transformer layer, the part Megatron splits: W1 by columns and W2 by rows,
// so GELU needs no communication and the block needs one sum of the partial outputs g·W2.
//
// A rank holds an FfnPart of the full model: tensor-parallel rank t of T keeps columns
// [t·ffn/T, (t+1)·ffn/T) of W1 and b1 and those rows of W2 (everything else whole), and a pipeline
// stage keeps blocks [firstBlock, endBlock) and the embedding and/or head. The full parameters are
// drawn from the seed in one fixed order and each part copies its slices, so every split starts
// from the same model. Each part's parameters and gradients are one flat buffer, like Mlp's.
//
// FfnPass holds the activations of one forward pass (one micro-batch, in a pipeline) and runs its
// backward; its two communication points per block (after the row-parallel Linear forward, after
// the column-parallel Linear backward) go through a TensorParallel context when one is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/comm.hpp"
#include "strategies/layers.hpp"
#include "strategies/trainer.hpp"

namespace ferry::train {

/// Sizes of the FFN model.
struct FfnShape {
  size_t in = 16;
  size_t hidden = 16;
  size_t ffn = 64;
  size_t out = 4;
  size_t blocks = 2;
};

/// The FFN model a configuration describes: its MLP sizes, ffn = config.ffn (4·hidden when 0).
FfnShape ffnShape(const TrainConfig& config);

/// The slice of the full model one rank holds.
struct FfnPart {
  int tpRank = 0;
  int tpSize = 1;
  size_t firstBlock = 0;
  size_t endBlock = SIZE_MAX;  ///< clipped to the block count
  bool embed = true;
  bool head = true;
};

/// One parameter tensor of a part: rows × cols here, the submatrix at (row0, col0) of the full
/// tensor stored at fullOffset with fullCols columns.
struct FfnSlot {
  std::string name;
  size_t offset = 0, rows = 0, cols = 0;
  size_t fullOffset = 0, fullCols = 0, row0 = 0, col0 = 0;
  bool replicated = true;  ///< every tensor-parallel rank holds all of it
};

/// The parameters of one part of the model.
class FfnModel {
 public:
  FfnModel(const FfnShape& shape, const FfnPart& part, uint64_t seed);
  FfnModel(const FfnModel&) = delete;
  FfnModel& operator=(const FfnModel&) = delete;

  const FfnShape& shape() const { return shape_; }
  const FfnPart& part() const { return part_; }
  const std::vector<FfnSlot>& slots() const { return slots_; }
  size_t paramCount() const { return params_.size(); }
  float* paramData() { return params_.data(); }
  float* gradData() { return grads_.data(); }
  /// Floats of the full (unsplit) model.
  size_t fullCount() const { return fullCount_; }
  /// This part's slices of a full parameter vector (such as the single-process result).
  std::vector<float> extract(const std::vector<float>& full) const;

 private:
  FfnShape shape_;
  FfnPart part_;
  std::vector<FfnSlot> slots_;
  std::vector<float> params_, grads_;
  size_t fullCount_ = 0;
};

/// Tensor (and sequence) parallel communication of an FfnPass: the group, the mode and the byte counts.
struct TensorParallel {
  Comm* comm = nullptr;
  /// Sequence parallel: activations outside the W1..W2 region are split by rows; an all-gather
  /// precedes W1 and a reduce-scatter follows W2 (forward; the reverse in backward).
  bool sequence = false;
  StepStats* stats = nullptr;  ///< bytes and time are added here
};

/// The activations of one forward pass through a part, and its backward.
class FfnPass {
 public:
  /// Gradients are written (not accumulated) into `grads`, laid out like model.paramData().
  FfnPass(FfnModel& model, float* grads);

  /// x: rows × in with the embedding, rows × hidden without. Returns the part's output.
  Result<Tensor> forward(const Tensor& x, const TensorParallel* tp = nullptr);
  /// dy: gradient of the output. Returns the input's gradient (empty for the embedding's input).
  Result<Tensor> backward(const Tensor& dy, const TensorParallel* tp = nullptr);
  /// Bytes of activations held for backward.
  size_t savedBytes() const;

 private:
  struct Block {
    LayerNorm norm;
    Linear fc1, fc2;
    Gelu act;
    Tensor b2, db2;
  };
  bool embedOn_ = false, headOn_ = false;
  Linear embed_, head_;
  std::vector<Block> blocks_;
};

/// One process trains the whole FFN model on the global batches: the reference. Returns the parameters.
std::vector<float> trainFfnSingle(const TrainConfig& config, std::vector<float>* losses = nullptr);

}  // namespace ferry::train
