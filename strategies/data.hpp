// Synthetic data drawn from a seed: the same global batch on every rank, for any world size.
//
// Inputs are standard normal; a fixed random "teacher" matrix T (also from the seed) makes the task
// learnable: the class label is argmax(x·T), the regression target tanh(x·T). Batch `step` depends
// only on the seed and the step number, so a strategy's ranks each take their rows of the global
// batch and a single process can train on all of it: the test that compares them relies on this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strategies/tensor.hpp"

namespace ferry::train {

/// One batch: inputs with both a class label and a regression target per row.
struct Batch {
  Tensor x;                 ///< rows × in
  std::vector<int> labels;  ///< rows
  Tensor targets;           ///< rows × out

  size_t rows() const { return x.rows(); }
  /// Rows [begin, begin + count), sharing storage with this batch.
  Batch slice(size_t begin, size_t count);
};

/// The synthetic task: a teacher matrix and a per-step batch generator.
class SyntheticTask {
 public:
  SyntheticTask(size_t in, size_t out, uint64_t seed);

  /// The global batch of `rows` rows for training step `step`.
  Batch batch(uint64_t step, size_t rows) const;

 private:
  size_t in_, out_;
  uint64_t seed_;
  Tensor teacher_;  // in × out
};

}  // namespace ferry::train
