// Data types and reduction operations. The numeric values are NCCL's (ncclDataType_t, ncclRedOp_t),
// so the NCCL-compatible C API passes them through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

/// Element types. Values equal NCCL's ncclDataType_t.
enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};
/// Number of data types (one past the largest value).
inline constexpr int kNumDataTypes = 10;

/// Reduction operations. Values equal NCCL's ncclRedOp_t.
enum class RedOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,  ///< sum divided by the number of ranks, computed once at the end
};
inline constexpr int kNumRedOps = 5;

/// True for the values the enums above define (for validating casts from user integers).
bool isValidDataType(int value);
bool isValidRedOp(int value);

/// Size in bytes of one element.
size_t dataTypeSize(DataType type);
/// Lower-case name ("float32", "bfloat16").
const char* dataTypeName(DataType type);
/// Lower-case name ("sum", "avg").
const char* redOpName(RedOp op);
/// True for float16, float32, float64, bfloat16.
bool isFloatingPoint(DataType type);

}  // namespace ferry
