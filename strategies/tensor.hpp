// Tensor: a row-major float32 matrix on the host, and the BLAS product the layers are built from.
//
// A tensor is a pointer, a shape and a shared owner. Copies alias the same storage (like a
// framework's tensor handle); view() wraps memory owned elsewhere, which is how a model's
// parameters and gradients live inside one flat buffer that a strategy sends in one message.
// Everything is two-dimensional: a batch of vectors is rows × features, a bias is 1 × features.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace ferry::train {

/// A row-major float32 matrix, owning its storage or viewing someone else's.
class Tensor {
 public:
  Tensor() = default;
  /// Fresh zero-filled storage of rows × cols.
  Tensor(size_t rows, size_t cols);
  /// Wrap `data` (rows × cols floats) owned by the caller, who keeps it alive.
  static Tensor view(float* data, size_t rows, size_t cols);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t size() const { return rows_ * cols_; }
  float* data() { return data_; }
  const float* data() const { return data_; }
  float& at(size_t r, size_t c) { return data_[r * cols_ + c]; }
  float at(size_t r, size_t c) const { return data_[r * cols_ + c]; }
  float* row(size_t r) { return data_ + r * cols_; }
  const float* row(size_t r) const { return data_ + r * cols_; }

  /// Set every element to `v`.
  void fill(float v);
  /// A deep copy with storage of its own.
  Tensor clone() const;
  /// Rows [begin, begin + count) as a view sharing this tensor's storage.
  Tensor rowsView(size_t begin, size_t count);

 private:
  std::shared_ptr<std::vector<float>> storage_;
  float* data_ = nullptr;
  size_t rows_ = 0;
  size_t cols_ = 0;
};

/// C = alpha · op(A) · op(B) + beta · C, op(X) being X or its transpose (cblas_sgemm, row-major).
/// Shapes are checked and a mismatch aborts: it is a bug in the calling layer, not user input.
void gemm(bool transA, bool transB, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c);

/// ||a - b|| / ||b|| over equally sized float arrays (0 when both are zero).
double relativeDifference(const float* a, const float* b, size_t n);

}  // namespace ferry::train
