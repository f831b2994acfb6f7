// Losses: softmax cross-entropy for classification and mean squared error for regression.
//
// Both are means over the rows of the batch they are given, and return the gradient with respect
// to the model's output already divided by `normalizer` rows. A strategy that splits a global batch
// of G rows into equal shards averages the shards' gradients, which equals the gradient of the
// mean over all G rows: that is what makes data-parallel training match one process.
#pragma once

#include <vector>

#include "strategies/tensor.hpp"

namespace ferry::train {

/// Which loss the model is trained with.
enum class LossKind { kCrossEntropy, kMeanSquaredError };

/// A loss value and its gradient with respect to the model output.
struct LossResult {
  float loss = 0;  ///< mean over the rows
  Tensor grad;     ///< d(loss)/d(output), same shape as the output
};

/// Softmax over each row of `logits`, then -log p[label] averaged over the rows.
LossResult softmaxCrossEntropy(const Tensor& logits, const std::vector<int>& labels);

/// Σ_columns (y - target)² averaged over the rows.
LossResult meanSquaredError(const Tensor& y, const Tensor& target);

}  // namespace ferry::train
