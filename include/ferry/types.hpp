// Data types and reduction operations. The numeric values are NCCL's (ncclDataType_t, and ncclRedOp_t
// for sum..avg), so the NCCL-compatible C API passes them through unchanged.
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
  kFloat8e4m3 = 10,  ///< OCP FP8 E4M3 ("FN"): bias 7, no infinity, NaN = S.1111.111, largest finite 448
  kFloat8e5m2 = 11,  ///< OCP FP8 E5M2: bias 15, IEEE-like infinity and NaNs, largest finite 57344
};
/// Number of data types (one past the largest value).
inline constexpr int kNumDataTypes = 12;

// float8 conversion and arithmetic (kernels/host/fp8.hpp and kernels/cuda/dtypes.cuh implement it):
// - float8 -> float32 is exact. An e5m2 infinity widens to infinity; a NaN widens to a quiet float32
//   NaN with the sign kept (e4m3: 0x7FC00000 | sign; e5m2: its two mantissa bits on top of the
//   float32 mantissa, the quiet bit set, as float16 widens).
// - float32 -> float8 rounds to nearest, ties to even, and saturates: every finite value beyond the
//   largest finite (±448 for e4m3, ±57344 for e5m2) and every infinity becomes the largest finite of
//   its sign (CUDA's __NV_SATFINITE). NaN stays NaN: e4m3 gives S.1111.111; e5m2 gives a quiet NaN
//   S.11111.1x keeping the top float32 payload bit.
// - Reductions widen to float32, compute there and round back once per op; avg divides the float32
//   sum and rounds once (the float16/bfloat16 contract of kernels/host/reduce.hpp).

/// Reduction operations. Values 0..4 equal NCCL's ncclRedOp_t. The bitwise ops (5..7) are ferry's own
/// and are defined on the integer types only: NCCL has none, and its values from 5 up name PreMulSum
/// reductions, so the NCCL C API never passes them through (nccl/ops.cpp).
enum class RedOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,   ///< floats: a NaN wins (of two, the larger bits); max(-0, +0) = +0, in any order
  kMin = 3,   ///< floats: a NaN wins (of two, the larger bits); min(-0, +0) = -0, in any order
  kAvg = 4,   ///< sum divided by the number of ranks, computed once at the end
  kBand = 5,  ///< bitwise and (integers only)
  kBor = 6,   ///< bitwise or (integers only)
  kBxor = 7,  ///< bitwise exclusive or (integers only)
};
inline constexpr int kNumRedOps = 8;

/// Every call ferry runs: the collectives, the barrier and point-to-point. One enum for the C++
/// API, the host algorithms, the GPU kernels, the NCCL API and the benchmarks. The values are part
/// of the wire fingerprint (4 bits, collectives/op.hpp): keep them stable.
enum class CallKind : uint8_t {
  kAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kAllToAll = 4,
  kBroadcast = 5,
  kReduce = 6,
  kBarrier = 7,
  kSend = 8,
  kRecv = 9,
};
/// One past the largest CallKind value.
inline constexpr int kNumCallKinds = 10;

/// True for the values the enums above define (for validating casts from user integers).
bool isValidDataType(int value);
bool isValidRedOp(int value);

/// "0..11: int8, uint8, ..." and "0..7: sum, prod, ...": the valid values, from the name tables,
/// for error messages.
const char* dataTypeList();
const char* redOpList();
/// "int8, uint8, int32, uint32, int64, uint64": the types the integer-only ops accept, from the tables.
const char* integerTypeList();

/// Size in bytes of one element (0 for a value outside DataType). Inline: every call asks it.
constexpr size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}
/// Lower-case name ("float32", "bfloat16").
const char* dataTypeName(DataType type);
/// Lower-case name ("sum", "avg").
const char* redOpName(RedOp op);
/// The C++ API's name ("allReduce", "reduceScatter", "send").
const char* callKindName(CallKind kind);
/// True for float16, float32, float64, bfloat16 and both float8 types.
bool isFloatingPoint(DataType type);
/// True for the ops defined on integer types only (band, bor, bxor).
bool isIntegerOnly(RedOp op);
/// Whether `op` is defined on `type` (every op on integers; all but the integer-only ones on floats).
/// Both must be valid enum values.
bool redOpDefinedFor(RedOp op, DataType type);

}  // namespace ferry
