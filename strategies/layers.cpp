// Forward and backward passes of Linear, GELU and LayerNorm. Reductions over the batch (bias and
// LayerNorm gradients) and over features (LayerNorm statistics) accumulate in double, so their
// rounding does not depend much on how a batch was split between ranks.
#include "strategies/layers.hpp"

#include <cmath>
#include <vector>

namespace ferry::train {

void columnSums(const Tensor& m, Tensor& out) {
  std::vector<double> acc(m.cols(), 0.0);
  for (size_t r = 0; r < m.rows(); ++r) {
    const float* row = m.row(r);
    for (size_t c = 0; c < m.cols(); ++c) acc[c] += row[c];
  }
  for (size_t c = 0; c < m.cols(); ++c) out.data()[c] = static_cast<float>(acc[c]);
}

namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
constexpr float kGeluCubic = 0.044715f;

}  // namespace

Tensor Linear::forward(const Tensor& x) {
  x_ = x;
  Tensor y(x.rows(), w_.cols());
  if (b_.size() != 0) {
    for (size_t r = 0; r < y.rows(); ++r) {
      float* row = y.row(r);
      for (size_t c = 0; c < y.cols(); ++c) row[c] = b_.data()[c];
    }
  }
  gemm(false, false, 1.0f, x, w_, 1.0f, y);
  return y;
}

Tensor Linear::backward(const Tensor& dy, bool inputGrad) {
  gemm(true, false, 1.0f, x_, dy, 0.0f, dw_);
  if (db_.size() != 0) columnSums(dy, db_);
  if (!inputGrad) return Tensor();
  Tensor dx(dy.rows(), w_.rows());
  gemm(false, true, 1.0f, dy, w_, 0.0f, dx);
  return dx;
}

Tensor Gelu::forward(const Tensor& x) {
  x_ = x;
  Tensor y(x.rows(), x.cols());
  for (size_t i = 0; i < x.size(); ++i) {
    float v = x.data()[i];
    float t = std::tanh(kGeluScale * (v + kGeluCubic * v * v * v));
    y.data()[i] = 0.5f * v * (1.0f + t);
  }
  return y;
}

Tensor Gelu::backward(const Tensor& dy) {
  Tensor dx(dy.rows(), dy.cols());
  for (size_t i = 0; i < dy.size(); ++i) {
    float v = x_.data()[i];
    float t = std::tanh(kGeluScale * (v + kGeluCubic * v * v * v));
    float dudx = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dudx;
    dx.data()[i] = dy.data()[i] * grad;
  }
  return dx;
}

Tensor LayerNorm::forward(const Tensor& x) {
  const size_t rows = x.rows(), cols = x.cols();
  xhat_ = Tensor(rows, cols);
  invStd_.assign(rows, 0.0f);
  Tensor y(rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x.row(r);
    double mean = 0, var = 0;
    for (size_t c = 0; c < cols; ++c) mean += in[c];
    mean /= static_cast<double>(cols);
    for (size_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(cols);
    float inv = static_cast<float>(1.0 / std::sqrt(var + kEpsilon));
    invStd_[r] = inv;
    for (size_t c = 0; c < cols; ++c) {
      float h = static_cast<float>(in[c] - mean) * inv;
      xhat_.at(r, c) = h;
      y.at(r, c) = gamma_.data()[c] * h + beta_.data()[c];
    }
  }
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy) {
  const size_t rows = dy.rows(), cols = dy.cols();
  std::vector<double> dgamma(cols, 0.0), dbeta(cols, 0.0);
  Tensor dx(rows, cols);
  std::vector<float> dxhat(cols);
  for (size_t r = 0; r < rows; ++r) {
    const float* g = dy.row(r);
    const float* h = xhat_.row(r);
    double meanD = 0, meanDH = 0;
    for (size_t c = 0; c < cols; ++c) {
      dgamma[c] += static_cast<double>(g[c]) * h[c];
      dbeta[c] += g[c];
      dxhat[c] = g[c] * gamma_.data()[c];
      meanD += dxhat[c];
      meanDH += static_cast<double>(dxhat[c]) * h[c];
    }
    meanD /= static_cast<double>(cols);
    meanDH /= static_cast<double>(cols);
    float* out = dx.row(r);
    for (size_t c = 0; c < cols; ++c) out[c] = static_cast<float>((dxhat[c] - meanD - h[c] * meanDH) * invStd_[r]);
  }
  for (size_t c = 0; c < cols; ++c) {
    dgamma_.data()[c] = static_cast<float>(dgamma[c]);
    dbeta_.data()[c] = static_cast<float>(dbeta[c]);
  }
  return dx;
}

}  // namespace ferry::train
