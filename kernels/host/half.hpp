// float16 and bfloat16 <-> float32 conversion with integer operations.
//
// Why this file exists: the reduction kernels compute float16/bfloat16 in float32 and round back
// once, and the baseline x86-64 kernels (no F16C) need a software conversion that gives exactly the
// bits the F16C instructions give, so that every instruction set produces identical results.
//
// Every function is a template over the "lane" type U: either uint32_t (one value) or a GCC vector
// of uint32_t (several values, one per 32-bit lane). The same code therefore serves scalar callers,
// the baseline kernels' float16 conversion and every instruction set's bfloat16 rounding; only
// comparisons, selects and shifts are used, which have the same meaning for scalars and vectors.
//
// Semantics (those of F16C's vcvtph2ps / vcvtps2ph with round-to-nearest-even):
// - widening is exact; a float16 NaN becomes a quiet float32 NaN with the payload shifted up;
//   a bfloat16 NaN keeps its bits (bfloat16 is the top half of a float32).
// - narrowing rounds to nearest, ties to even; overflow gives infinity; NaN stays NaN, made quiet,
//   keeping the sign and the top payload bits.
// - narrowing to float16 results below 2^-14 uses one float32 addition: it relies on the default
//   MXCSR rounding mode (round to nearest), as every float kernel does. DAZ/FTZ do not change it.
//
// Linkage: everything sits in an anonymous namespace. The header is compiled into translation units
// built with different -m flags (SSE2, AVX2, AVX-512); inline functions with external linkage could
// be merged by the linker into one AVX-512 copy and then run on a CPU without AVX-512.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ferry::kernels {
namespace {

/// GCC vector of `Bytes` bytes holding elements of type T (Bytes a multiple of sizeof(T)).
template <typename T, unsigned Bytes>
struct VecOf {
  typedef T type __attribute__((vector_size(Bytes)));
};

namespace half_detail {

/// float for a scalar lane type, a float vector of the same width for a vector lane type.
template <typename U>
using FloatLanes = std::conditional_t<std::is_integral_v<U>, float, typename VecOf<float, sizeof(U)>::type>;

/// Signed integer lanes matching U (what int -> float conversion reads).
template <typename U>
using IntLanes = std::conditional_t<std::is_integral_v<U>, int32_t, typename VecOf<int32_t, sizeof(U)>::type>;

template <typename To, typename From>
inline To bitCast(From v) {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, v);
}

/// Value conversion int32 -> float for a scalar or lane by lane.
template <typename U>
inline FloatLanes<U> intToFloat(U v) {
  if constexpr (std::is_integral_v<U>) {
    return static_cast<float>(static_cast<int32_t>(v));
  } else {
    return __builtin_convertvector(bitCast<IntLanes<U>>(v), FloatLanes<U>);
  }
}

/// U filled with `value` in every lane.
template <typename U>
inline U splat(uint32_t value) {
  return U{} + value;
}

}  // namespace half_detail

/// float16 bits (low 16 bits of each lane, high bits zero) -> float32 bits.
template <typename U>
inline U f16ToF32Bits(U h) {
  using namespace half_detail;
  const U sign = (h & 0x8000u) << 16;
  const U em = h & 0x7FFFu;  // exponent and mantissa
  // Normal numbers: move the fields into place and rebias the exponent from 15 to 127.
  const U normal = (em << 13) + (112u << 23);
  // Subnormals (and zero) are mantissa * 2^-24; converting the integer is exact and DAZ-proof.
  const U subnormal = bitCast<U>(intToFloat(em) * 0x1p-24f);
  // Infinity and NaN: all-ones exponent; a NaN gets the quiet bit, as vcvtph2ps does.
  const U quiet = em > 0x7C00u ? splat<U>(0x00400000u) : U{};
  const U special = 0x7F800000u | ((em & 0x3FFu) << 13) | quiet;
  U r = em < 0x0400u ? subnormal : normal;
  r = em >= 0x7C00u ? special : r;
  return r | sign;
}

/// float32 bits -> float16 bits (in the low 16 bits of each lane), round to nearest even.
template <typename U>
inline U f32ToF16Bits(U x) {
  using namespace half_detail;
  const U sign = (x >> 16) & 0x8000u;
  const U ax = x & 0x7FFFFFFFu;
  // Normal results: rebias, then add half an ulp minus one plus the lsb (ties go to even); a carry
  // out of the mantissa correctly bumps the exponent.
  U normal = ax - (112u << 23);
  normal = (normal + 0x0FFFu + ((normal >> 13) & 1u)) >> 13;
  // Results below 2^-14: adding 0.5 puts round(|x| * 2^24) in the low mantissa bits of the sum.
  const U subnormal = bitCast<U>(bitCast<FloatLanes<U>>(ax) + 0.5f) - 0x3F000000u;
  const U nan = 0x7E00u | ((ax >> 13) & 0x03FFu);
  U r = ax < 0x38800000u ? subnormal : normal;    // 2^-14, the smallest normal float16
  r = ax >= 0x477FF000u ? splat<U>(0x7C00u) : r;  // 65520 and up round to infinity
  r = ax > 0x7F800000u ? nan : r;
  return r | sign;
}

/// bfloat16 bits (low 16 bits of each lane) -> float32 bits: bfloat16 is float32's top half.
template <typename U>
inline U bf16ToF32Bits(U h) {
  return h << 16;
}

/// float32 bits -> bfloat16 bits (low 16 bits of each lane), round to nearest even, NaN made quiet.
template <typename U>
inline U f32ToBf16Bits(U x) {
  const U rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const U nan = (x >> 16) | 0x0040u;
  return (x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded;
}

/// float16 value -> float (exact).
inline float halfToFloat(uint16_t h) { return half_detail::bitCast<float>(f16ToF32Bits<uint32_t>(h)); }

/// float -> float16 value, round to nearest even.
inline uint16_t floatToHalf(float f) {
  return static_cast<uint16_t>(f32ToF16Bits<uint32_t>(half_detail::bitCast<uint32_t>(f)));
}

/// bfloat16 value -> float (exact).
inline float bfloat16ToFloat(uint16_t h) { return half_detail::bitCast<float>(bf16ToF32Bits<uint32_t>(h)); }

/// float -> bfloat16 value, round to nearest even.
inline uint16_t floatToBfloat16(float f) {
  return static_cast<uint16_t>(f32ToBf16Bits<uint32_t>(half_detail::bitCast<uint32_t>(f)));
}

}  // namespace
}  // namespace ferry::kernels
