// Tensor storage and the one BLAS call (sgemm) every layer's forward and backward pass uses.
#include "strategies/tensor.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ferry::train {

Tensor::Tensor(size_t rows, size_t cols)
    : storage_(std::make_shared<std::vector<float>>(rows * cols, 0.0f)), rows_(rows), cols_(cols) {
  data_ = storage_->data();
}

Tensor Tensor::view(float* data, size_t rows, size_t cols) {
  Tensor t;
  t.data_ = data;
  t.rows_ = rows;
  t.cols_ = cols;
  return t;
}

void Tensor::fill(float v) { std::fill(data_, data_ + size(), v); }

Tensor Tensor::clone() const {
  Tensor t(rows_, cols_);
  std::copy(data_, data_ + size(), t.data_);
  return t;
}

Tensor Tensor::rowsView(size_t begin, size_t count) {
  Tensor t = *this;
  t.data_ = data_ + begin * cols_;
  t.rows_ = count;
  return t;
}

void gemm(bool transA, bool transB, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c) {
  const size_t m = transA ? a.cols() : a.rows();
  const size_t k = transA ? a.rows() : a.cols();
  const size_t kb = transB ? b.cols() : b.rows();
  const size_t n = transB ? b.rows() : b.cols();
  if (k != kb || c.rows() != m || c.cols() != n) {
    std::fprintf(stderr, "ferry::train::gemm: shapes (%zux%zu)%s · (%zux%zu)%s -> (%zux%zu) do not agree\n", a.rows(),
                 a.cols(), transA ? "ᵀ" : "", b.rows(), b.cols(), transB ? "ᵀ" : "", c.rows(), c.cols());
    std::abort();
  }
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a.data(),
              static_cast<int>(a.cols()), b.data(), static_cast<int>(b.cols()), beta, c.data(),
              static_cast<int>(c.cols()));
}

double relativeDifference(const float* a, const float* b, size_t n) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  if (ref == 0) return diff == 0 ? 0 : std::sqrt(diff);
  return std::sqrt(diff / ref);
}

}  // namespace ferry::train
