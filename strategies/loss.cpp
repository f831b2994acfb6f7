// Softmax cross-entropy (computed from the row maximum, so exp never overflows) and MSE.
#include "strategies/loss.hpp"

#include <algorithm>
#include <cmath>

namespace ferry::train {

LossResult softmaxCrossEntropy(const Tensor& logits, const std::vector<int>& labels) {
  const size_t rows = logits.rows(), cols = logits.cols();
  LossResult out{0.0f, Tensor(rows, cols)};
  if (rows == 0) return out;
  const double scale = 1.0 / static_cast<double>(rows);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits.row(r);
    float zmax = *std::max_element(z, z + cols);
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    const size_t y = static_cast<size_t>(labels[r]);
    total += std::log(sum) - static_cast<double>(z[y] - zmax);
    float* g = out.grad.row(r);
    for (size_t c = 0; c < cols; ++c) {
      double p = std::exp(static_cast<double>(z[c] - zmax)) / sum;
      g[c] = static_cast<float>((p - (c == y ? 1.0 : 0.0)) * scale);
    }
  }
  out.loss = static_cast<float>(total * scale);
  return out;
}

LossResult meanSquaredError(const Tensor& y, const Tensor& target) {
  const size_t rows = y.rows(), cols = y.cols();
  LossResult out{0.0f, Tensor(rows, cols)};
  if (rows == 0) return out;
  const double scale = 1.0 / static_cast<double>(rows);
  double total = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    double d = static_cast<double>(y.data()[i]) - target.data()[i];
    total += d * d;
    out.grad.data()[i] = static_cast<float>(2.0 * d * scale);
  }
  out.loss = static_cast<float>(total * scale);
  return out;
}

}  // namespace ferry::train
