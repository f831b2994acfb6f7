// Element types as the benchmark sees them: names (nccl-tests' and ferry's), sizes, the range in
// which integer values stay exact, and conversions to and from the 16-bit float formats.
//
// The correctness check stores small integers in every type and expects exact results, so each
// type carries two limits: `exactLimit`, the largest integer N such that every integer in [0, N]
// is representable and sums up to N cannot overflow; and `maxPow2`, the largest exponent e such
// that 2^e is representable without overflow (products of ones and twos stay exact up to it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ferry/types.hpp"

namespace ferry::perf {

/// What the benchmark needs to know about one element type.
struct TypeInfo {
  DataType type;
  const char* ncclName;   ///< nccl-tests' name, printed in the table ("float", "half")
  const char* ferryName;  ///< ferry's name ("float32", "float16")
  size_t size;            ///< bytes per element
  bool isFloat;           ///< float16, bfloat16, float32, float64
  int64_t exactLimit;     ///< every integer in [0, exactLimit] is exact and overflow-free
  int maxPow2;            ///< 2^maxPow2 is representable without overflow
  int mantissaBits;       ///< floats: explicit mantissa bits (10 for half); 0 for integers
  int exponentBits;       ///< floats: exponent bits (5 for half); 0 for integers
};

/// Facts about `type` (any valid DataType).
const TypeInfo& typeInfo(DataType type);
/// Every type, in NCCL's order (the order -d all runs them).
std::span<const DataType> allTypes();
/// A -d value: nccl-tests' names (int8 ... half, float, double, bfloat16), ferry's names
/// (float16, float32, float64) and the usual short forms (fp16, fp32, fp64, bf16). Not "all".
std::optional<DataType> parseTypeName(std::string_view name);

/// IEEE binary16 from a float, rounding to nearest even (overflow gives infinity).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
/// bfloat16 from a float, rounding to nearest even.
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

/// The bits of `value` as an element of `type`, in the low bytes (same rounding as storeValue).
using EncodeFn = uint64_t (*)(double value);
/// The encoder of `type`, chosen once so that loops over millions of elements do not switch.
EncodeFn encoder(DataType type);

/// Store `value` as one element of `type` at `dst`: exact when the value is representable, else
/// rounded to nearest (floats) or wrapped (integers).
void storeValue(DataType type, void* dst, double value);
/// The element of `type` at `src` as a double (exact for every type but 64-bit integers past 2^53).
double loadValue(DataType type, const void* src);
/// Distance between two elements in units in the last place: 0 when the bits are equal, |a - b|
/// for integers, the number of representable values between them for floats.
uint64_t ulpDistance(DataType type, const void* a, const void* b);

}  // namespace ferry::perf
