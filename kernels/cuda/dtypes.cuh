// Element types of the CUDA kernels: storage types, float32 accumulation, and the conversions of
// float16, bfloat16 and float8 with integer and float operations only.
//
// Why not CUDA's __half / __nv_bfloat16 / __nv_fp8 types: they are outside the SIMT subset
// (kernels/cuda/simt.hpp), so the emulated build could not run them, and their rounding corners
// are not the host kernels'. The functions below compute exactly the bits of kernels/host/half.hpp
// and kernels/host/fp8.hpp (round to nearest even; NaN kept and made quiet; float16 overflow to
// infinity; float8 saturating to the largest finite value; the contract is in ferry/types.hpp), so
// a reduction gives the same bits on the GPU, in the emulation and in the host kernels. The tests
// compare them over every 16-bit and 8-bit pattern and a sweep of float32 patterns.
//
// Requirements on the float arithmetic (both hold for nvcc without --use_fast_math and for the host
// compiler): float addition rounds to nearest even (the subnormal paths rely on it), and int ->
// float conversion of values below 2^24 is exact. Flush-to-zero does not change any result: the
// float32 subnormals involved are far below half of the smallest 16/8-bit subnormal.
#pragma once

#include <cstdint>
#include <cstring>

#include "ferry/types.hpp"
#include "kernels/cuda/simt.hpp"

#if defined(__CUDACC__)
#define FERRY_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FERRY_HOST_DEVICE inline
#endif

namespace ferry::gpu {

// ---- storage types --------------------------------------------------------------------------
// One distinct type per 16/8-bit float format, so that templates over the storage type tell
// float16 from bfloat16 (both uint16_t underneath). Trivially copyable, sizeof equal to the element.

/// IEEE binary16 bits.
struct Float16 {
  uint16_t bits;
};
/// bfloat16 bits (the top half of a float32).
struct Bfloat16 {
  uint16_t bits;
};
/// OCP float8 E4M3 bits.
struct Float8e4m3 {
  uint8_t bits;
};
/// OCP float8 E5M2 bits.
struct Float8e5m2 {
  uint8_t bits;
};

// ---- bit casts ------------------------------------------------------------------------------

/// The bits of a float (CUDA's intrinsic in device code, memcpy on the host).
FERRY_HOST_DEVICE uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

/// The float with bits u.
FERRY_HOST_DEVICE float bitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- float16 / bfloat16 ---------------------------------------------------------------------

/// float16 bits -> float (exact; a NaN becomes quiet with its payload moved up, as F16C does).
FERRY_HOST_DEVICE float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  uint32_t r;
  if (em >= 0x7C00u) {
    r = 0x7F800000u | ((em & 0x3FFu) << 13) | (em > 0x7C00u ? 0x00400000u : 0u);
  } else if (em < 0x0400u) {
    r = floatToBits(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);  // exact
  } else {
    r = (em << 13) + (112u << 23);
  }
  return bitsToFloat(r | sign);
}

/// float -> float16 bits: round to nearest even, overflow to infinity, NaN made quiet.
FERRY_HOST_DEVICE uint16_t floatToHalfBits(float f) {
  const uint32_t x = floatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  uint32_t r;
  if (ax > 0x7F800000u) {
    r = 0x7E00u | ((ax >> 13) & 0x03FFu);
  } else if (ax >= 0x477FF000u) {  // 65520 and up round to infinity
    r = 0x7C00u;
  } else if (ax < 0x38800000u) {  // below 2^-14: one addition rounds |x| * 2^24 to an integer
    r = floatToBits(bitsToFloat(ax) + 0.5f) - 0x3F000000u;
  } else {
    const uint32_t n = ax - (112u << 23);
    r = (n + 0x0FFFu + ((n >> 13) & 1u)) >> 13;
  }
  return static_cast<uint16_t>(r | sign);
}

/// bfloat16 bits -> float (exact, NaN bits kept).
FERRY_HOST_DEVICE float bfloat16BitsToFloat(uint16_t h) { return bitsToFloat(static_cast<uint32_t>(h) << 16); }

/// float -> bfloat16 bits: round to nearest even, NaN made quiet.
FERRY_HOST_DEVICE uint16_t floatToBfloat16Bits(float f) {
  const uint32_t x = floatToBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// ---- float8 ---------------------------------------------------------------------------------
// kMant: mantissa bits (3: e4m3, 2: e5m2). The constants are those of kernels/host/fp8.hpp.

namespace fp8_detail {
template <int kMant>
struct Format;
template <>
struct Format<3> {
  static constexpr uint32_t kRebias = 120;             // 127 - 7
  static constexpr uint32_t kMinNormal = 0x3C800000u;  // 2^-6
  static constexpr float kSubnormalStep = 0x1p-9f;
  static constexpr float kSubnormalAdd = 0x1p14f;  // its ulp is 2^-9
  static constexpr uint32_t kMaxFinite = 0x7Eu;    // 448
};
template <>
struct Format<2> {
  static constexpr uint32_t kRebias = 112;             // 127 - 15
  static constexpr uint32_t kMinNormal = 0x38800000u;  // 2^-14
  static constexpr float kSubnormalStep = 0x1p-16f;
  static constexpr float kSubnormalAdd = 0x1p7f;  // its ulp is 2^-16
  static constexpr uint32_t kMaxFinite = 0x7Bu;   // 57344
};
}  // namespace fp8_detail

/// float8 bits -> float (exact). e4m3 NaN -> quiet NaN; e5m2 infinity -> infinity, NaN -> quiet
/// NaN with the payload moved up.
template <int kMant>
FERRY_HOST_DEVICE float fp8BitsToFloat(uint8_t b) {
  using F = fp8_detail::Format<kMant>;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t em = b & 0x7Fu;
  uint32_t r;
  if (kMant == 3 && em == 0x7Fu) {
    r = 0x7FC00000u;
  } else if (kMant == 2 && em >= 0x7Cu) {
    r = 0x7F800000u | ((em & 0x3u) << 21) | (em > 0x7Cu ? 0x00400000u : 0u);
  } else if (em < (1u << kMant)) {
    r = floatToBits(static_cast<float>(static_cast<int32_t>(em)) * F::kSubnormalStep);  // exact
  } else {
    r = (em << (23 - kMant)) + (F::kRebias << 23);
  }
  return bitsToFloat(r | sign);
}

/// float -> float8 bits: round to nearest even, saturate to the largest finite value (infinity
/// too), NaN -> e4m3 S.1111.111 / e5m2 quiet NaN with the top payload bit.
template <int kMant>
FERRY_HOST_DEVICE uint8_t floatToFp8Bits(float f) {
  using F = fp8_detail::Format<kMant>;
  const uint32_t x = floatToBits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  uint32_t r;
  if (ax > 0x7F800000u) {
    r = kMant == 3 ? 0x7Fu : 0x7Eu | ((ax >> 21) & 1u);
  } else if (ax < F::kMinNormal) {
    r = floatToBits(bitsToFloat(ax) + F::kSubnormalAdd) - floatToBits(F::kSubnormalAdd);
  } else {
    constexpr uint32_t kShift = 23 - kMant;
    const uint32_t n = ax - (F::kRebias << 23);
    r = (n + ((1u << (kShift - 1)) - 1u) + ((n >> kShift) & 1u)) >> kShift;
    r = r > F::kMaxFinite ? F::kMaxFinite : r;
  }
  return static_cast<uint8_t>(r | sign);
}

// ---- type traits and dispatch ---------------------------------------------------------------

/// Storage type of a DataType: TypeOf<DataType::kBfloat16>::type is Bfloat16.
template <DataType D>
struct TypeOf;
template <>
struct TypeOf<DataType::kInt8> {
  using type = int8_t;
};
template <>
struct TypeOf<DataType::kUint8> {
  using type = uint8_t;
};
template <>
struct TypeOf<DataType::kInt32> {
  using type = int32_t;
};
template <>
struct TypeOf<DataType::kUint32> {
  using type = uint32_t;
};
template <>
struct TypeOf<DataType::kInt64> {
  using type = int64_t;
};
template <>
struct TypeOf<DataType::kUint64> {
  using type = uint64_t;
};
template <>
struct TypeOf<DataType::kFloat16> {
  using type = Float16;
};
template <>
struct TypeOf<DataType::kFloat32> {
  using type = float;
};
template <>
struct TypeOf<DataType::kFloat64> {
  using type = double;
};
template <>
struct TypeOf<DataType::kBfloat16> {
  using type = Bfloat16;
};
template <>
struct TypeOf<DataType::kFloat8e4m3> {
  using type = Float8e4m3;
};
template <>
struct TypeOf<DataType::kFloat8e5m2> {
  using type = Float8e5m2;
};

/// How a storage type T is computed: Acc is the accumulation type (float for the 16- and 8-bit
/// floats, T itself otherwise); toAcc widens exactly, fromAcc rounds once.
template <typename T>
struct Arith {
  using Acc = T;
  static FERRY_HOST_DEVICE Acc toAcc(T v) { return v; }
  static FERRY_HOST_DEVICE T fromAcc(Acc v) { return v; }
};
template <>
struct Arith<Float16> {
  using Acc = float;
  static FERRY_HOST_DEVICE float toAcc(Float16 v) { return halfBitsToFloat(v.bits); }
  static FERRY_HOST_DEVICE Float16 fromAcc(float v) { return Float16{floatToHalfBits(v)}; }
};
template <>
struct Arith<Bfloat16> {
  using Acc = float;
  static FERRY_HOST_DEVICE float toAcc(Bfloat16 v) { return bfloat16BitsToFloat(v.bits); }
  static FERRY_HOST_DEVICE Bfloat16 fromAcc(float v) { return Bfloat16{floatToBfloat16Bits(v)}; }
};
template <>
struct Arith<Float8e4m3> {
  using Acc = float;
  static FERRY_HOST_DEVICE float toAcc(Float8e4m3 v) { return fp8BitsToFloat<3>(v.bits); }
  static FERRY_HOST_DEVICE Float8e4m3 fromAcc(float v) { return Float8e4m3{floatToFp8Bits<3>(v)}; }
};
template <>
struct Arith<Float8e5m2> {
  using Acc = float;
  static FERRY_HOST_DEVICE float toAcc(Float8e5m2 v) { return fp8BitsToFloat<2>(v.bits); }
  static FERRY_HOST_DEVICE Float8e5m2 fromAcc(float v) { return Float8e5m2{floatToFp8Bits<2>(v)}; }
};

/// The accumulation type of storage type T.
template <typename T>
using Acc = typename Arith<T>::Acc;

/// Calls f.template operator()<T>() with T = TypeOf<type>::type. Nothing for an invalid type.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename F>
FERRY_HOST_DEVICE void dispatchType(DataType type, F&& f) {
  switch (type) {
    case DataType::kInt8: f.template operator()<int8_t>(); break;
    case DataType::kUint8: f.template operator()<uint8_t>(); break;
    case DataType::kInt32: f.template operator()<int32_t>(); break;
    case DataType::kUint32: f.template operator()<uint32_t>(); break;
    case DataType::kInt64: f.template operator()<int64_t>(); break;
    case DataType::kUint64: f.template operator()<uint64_t>(); break;
    case DataType::kFloat16: f.template operator()<Float16>(); break;
    case DataType::kFloat32: f.template operator()<float>(); break;
    case DataType::kFloat64: f.template operator()<double>(); break;
    case DataType::kBfloat16: f.template operator()<Bfloat16>(); break;
    case DataType::kFloat8e4m3: f.template operator()<Float8e4m3>(); break;
    case DataType::kFloat8e5m2: f.template operator()<Float8e5m2>(); break;
  }
}

}  // namespace ferry::gpu
