// PreMulSum reductions (ncclRedOpCreatePreMulSum): each rank's input is multiplied by a scalar,
// then summed. ferry's C++ API has no such reduction, so the C layer scales a temporary copy of the
// input and runs a sum on it; the result is the one NCCL defines (sum over ranks of scalar * x).
//
// A communicator's created reductions live in its RedOpTable; their ncclRedOp_t values start at
// ncclNumOps and are reused after ncclRedOpDestroy.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry::nccl {

/// One PreMulSum reduction: the data type it applies to and where its scalar is.
struct PreMulSum {
  DataType type = DataType::kFloat32;
  uint64_t bits = 0;             ///< the scalar's bytes, read at creation (ncclScalarHostImmediate)
  const void* scalar = nullptr;  ///< when set, read at each use instead (ncclScalarDevice)

  /// The scalar's bytes as they are now.
  uint64_t value() const;
};

/// The PreMulSum reductions of one communicator. Thread-safe.
class RedOpTable {
 public:
  /// Store `op`; returns its ncclRedOp_t value (>= ncclNumOps).
  int create(const PreMulSum& op);
  /// Forget `op`; false when it is not a live reduction of this table.
  bool destroy(int op);
  /// The reduction `op` stands for, if live.
  std::optional<PreMulSum> find(int op) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::optional<PreMulSum>> ops_;  // index = op - ncclNumOps
};

/// dst[i] = scalar * src[i] for `count` elements of op.type, in that type's arithmetic (integers
/// wrap, float16/bfloat16 multiply in float32 and round once, which is exact before rounding).
void scaleInto(void* dst, const void* src, size_t count, const PreMulSum& op);

}  // namespace ferry::nccl
