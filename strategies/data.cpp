// SyntheticTask: a seeded teacher matrix and per-step batches.
#include "strategies/data.hpp"

#include <cmath>

#include "strategies/random.hpp"

namespace ferry::train {

Batch Batch::slice(size_t begin, size_t count) {
  Batch b;
  b.x = x.rowsView(begin, count);
  b.labels.assign(labels.begin() + static_cast<long>(begin), labels.begin() + static_cast<long>(begin + count));
  b.targets = targets.rowsView(begin, count);
  return b;
}

SyntheticTask::SyntheticTask(size_t in, size_t out, uint64_t seed)
    : in_(in), out_(out), seed_(seed), teacher_(in, out) {
  Rng rng(deriveSeed(seed, 0));
  for (size_t i = 0; i < teacher_.size(); ++i) teacher_.data()[i] = static_cast<float>(rng.normal());
}

Batch SyntheticTask::batch(uint64_t step, size_t rows) const {
  Batch b;
  b.x = Tensor(rows, in_);
  Rng rng(deriveSeed(seed_, step + 1));
  for (size_t i = 0; i < b.x.size(); ++i) b.x.data()[i] = static_cast<float>(rng.normal());
  Tensor scores(rows, out_);
  gemm(false, false, 1.0f, b.x, teacher_, 0.0f, scores);
  b.targets = Tensor(rows, out_);
  b.labels.assign(rows, 0);
  for (size_t r = 0; r < rows; ++r) {
    size_t best = 0;
    for (size_t c = 0; c < out_; ++c) {
      float s = scores.at(r, c);
      // Scale down so targets sit in tanh's responsive range.
      b.targets.at(r, c) = std::tanh(s / std::sqrt(static_cast<float>(in_)));
      if (s > scores.at(r, best)) best = c;
    }
    b.labels[r] = static_cast<int>(best);
  }
  return b;
}

}  // namespace ferry::train
