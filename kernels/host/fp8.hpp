// float8 (OCP E4M3 and E5M2) <-> float32 conversion with integer operations.
//
// Why this file exists: no x86 instruction set converts float8, so every instruction set runs this
// one piece of lane code (scalar or GCC vector, as in half.hpp) and therefore gets identical bits.
// The semantics are written down in include/ferry/types.hpp: widening exact, narrowing round to
// nearest even with saturation to the largest finite value (infinities included), NaN kept.
// kernels/cuda/dtypes.cuh implements the same functions for device code; the unit tests compare
// both against an independent reference over every pattern.
//
// Narrowing in three ranges of |x|:
// - at least the smallest normal float8: rebias the exponent and round the float32 mantissa to the
//   float8 width with the "add half an ulp minus one plus the lsb" trick; a carry bumps the exponent,
//   and anything above the largest finite code is clamped to it (saturation, also for infinity);
// - below it: one float32 addition of a constant whose ulp is the float8 subnormal step puts
//   round(|x| / step) in the low mantissa bits (relies on round-to-nearest, as half.hpp does);
// - NaN: a fixed NaN code (e4m3) or a quiet NaN with the top payload bit (e5m2).
//
// Linkage: anonymous namespace, for the reason half.hpp gives (per-instruction-set compilation).
#pragma once

#include <cstdint>

#include "kernels/host/half.hpp"

namespace ferry::kernels {
namespace {

/// The constants of a float8 format, as a type (a template argument of the conversions).
template <unsigned kMant, unsigned kRebias, uint32_t kMinNormal, uint32_t kSubnormalAdd, uint32_t kMaxFinite, bool kInf>
struct Fp8Format {
  static constexpr unsigned mantBits = kMant;              ///< 3 or 2
  static constexpr unsigned rebias = kRebias;              ///< 127 - bias
  static constexpr uint32_t minNormal = kMinNormal;        ///< float32 bits of the smallest normal float8
  static constexpr uint32_t subnormalAdd = kSubnormalAdd;  ///< float32 bits of 2^(23 + log2 subnormal step)
  static constexpr uint32_t subnormalStep = (kRebias + 1 - kMant) << 23;  ///< float32 bits of 2^(1-bias-mant)
  static constexpr uint32_t maxFinite = kMaxFinite;                       ///< largest finite magnitude code
  static constexpr bool hasInfinity = kInf;                               ///< e5m2: S.11111.00 is infinity
};
using E4m3 = Fp8Format<3, 120, 0x3C800000u, 0x46800000u, 0x7Eu, false>;  // min normal 2^-6, add 2^14
using E5m2 = Fp8Format<2, 112, 0x38800000u, 0x43000000u, 0x7Bu, true>;   // min normal 2^-14, add 2^7

/// float8 bits (low 8 bits of each lane, high bits zero) -> float32 bits.
template <typename F, typename U>
inline U fp8ToF32Bits(U b) {
  using namespace half_detail;
  const U sign = (b & 0x80u) << 24;
  const U em = b & 0x7Fu;
  const U normal = (em << (23 - F::mantBits)) + (F::rebias << 23);
  // Subnormals (and zero): mantissa * 2^(1 - bias - mantBits), exact from the integer.
  const U subnormal = bitCast<U>(intToFloat(em) * bitCast<float>(F::subnormalStep));
  U r = em < (1u << F::mantBits) ? subnormal : normal;
  if constexpr (F::hasInfinity) {
    // Exponent all ones: infinity (mantissa 0) or NaN, made quiet with the payload moved up.
    const U quiet = em > 0x7Cu ? splat<U>(0x00400000u) : U{};
    const U special = 0x7F800000u | ((em & 0x3u) << 21) | quiet;
    r = em >= 0x7Cu ? special : r;
  } else {
    r = em == 0x7Fu ? splat<U>(0x7FC00000u) : r;
  }
  return r | sign;
}

/// float32 bits -> float8 bits (low 8 bits of each lane): round to nearest even, saturating.
template <typename F, typename U>
inline U f32ToFp8Bits(U x) {
  using namespace half_detail;
  const U sign = (x >> 24) & 0x80u;
  const U ax = x & 0x7FFFFFFFu;
  const unsigned shift = 23 - F::mantBits;
  U normal = ax - (F::rebias << 23);
  normal = (normal + ((1u << (shift - 1)) - 1u) + ((normal >> shift) & 1u)) >> shift;
  normal = normal > F::maxFinite ? splat<U>(F::maxFinite) : normal;  // saturation (and infinity)
  const U subnormal = bitCast<U>(bitCast<FloatLanes<U>>(ax) + bitCast<float>(F::subnormalAdd)) - F::subnormalAdd;
  U nan;
  if constexpr (F::hasInfinity) {
    nan = 0x7Eu | ((ax >> 21) & 1u);
  } else {
    nan = splat<U>(0x7Fu);
  }
  U r = ax < F::minNormal ? subnormal : normal;
  r = ax > 0x7F800000u ? nan : r;
  return r | sign;
}

/// float8 value -> float (exact).
inline float fp8e4m3ToFloat(uint8_t b) { return half_detail::bitCast<float>(fp8ToF32Bits<E4m3, uint32_t>(b)); }
inline float fp8e5m2ToFloat(uint8_t b) { return half_detail::bitCast<float>(fp8ToF32Bits<E5m2, uint32_t>(b)); }

/// float -> float8 value, round to nearest even, saturating to the largest finite value.
inline uint8_t floatToFp8e4m3(float f) {
  return static_cast<uint8_t>(f32ToFp8Bits<E4m3, uint32_t>(half_detail::bitCast<uint32_t>(f)));
}
inline uint8_t floatToFp8e5m2(float f) {
  return static_cast<uint8_t>(f32ToFp8Bits<E5m2, uint32_t>(half_detail::bitCast<uint32_t>(f)));
}

}  // namespace
}  // namespace ferry::kernels
