// Scalar reference for the host reduction kernels, written independently of kernels/host.
//
// Why a second implementation: the kernels are compared bit for bit against it on every instruction
// set. It deliberately shares no code with the kernels: float16/bfloat16 conversion here goes
// through frexp/ldexp/nearbyint in double precision instead of bit manipulation, integers are
// computed one element at a time with 64-bit division, and NaN handling is spelled out with isnan.
// Where the kernel contract leaves a choice to the hardware it records what x86 does (a float16 NaN
// widens to a quiet NaN; an arithmetic NaN result keeps the NaN operand's payload).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ferry/types.hpp"

namespace ferry::kernels::test {

/// Bit pattern of a float.
inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Layout of a 16-bit float: mantissa bits and exponent bias (float16: 10, 15; bfloat16: 7, 127).
struct HalfFormat {
  int mantBits;
  int bias;
  bool quietOnWiden;  ///< float16 NaNs are quietened when widened (F16C does this); bfloat16 keep bits
};
inline constexpr HalfFormat kF16{10, 15, true};
inline constexpr HalfFormat kBf16{7, 127, false};

/// 16-bit float -> float, exact.
inline float refDecode(uint16_t h, HalfFormat fmt) {
  const int expMax = (1 << (15 - fmt.mantBits)) - 1;
  const bool negative = (h & 0x8000) != 0;
  const int e = (h >> fmt.mantBits) & expMax;
  const int m = h & ((1 << fmt.mantBits) - 1);
  if (e == expMax) {
    if (m == 0) return negative ? -INFINITY : INFINITY;
    uint32_t bits = (negative ? 0x80000000u : 0u) | 0x7F800000u | (static_cast<uint32_t>(m) << (23 - fmt.mantBits));
    if (fmt.quietOnWiden) bits |= 0x00400000u;
    return bitsFloat(bits);
  }
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - fmt.bias - fmt.mantBits)
                    : std::ldexp(static_cast<double>(m + (1 << fmt.mantBits)), e - fmt.bias - fmt.mantBits);
  return static_cast<float>(negative ? -v : v);
}

/// float -> 16-bit float, round to nearest even (double-precision nearbyint in the default mode).
inline uint16_t refEncode(float f, HalfFormat fmt) {
  const uint32_t fb = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((fb >> 16) & 0x8000u);
  const int expMax = (1 << (15 - fmt.mantBits)) - 1;
  const uint16_t infBits = static_cast<uint16_t>(expMax << fmt.mantBits);
  if (std::isnan(f)) {
    const uint32_t payload = (fb & 0x7FFFFFu) >> (23 - fmt.mantBits);
    return static_cast<uint16_t>(sign | infBits | (1u << (fmt.mantBits - 1)) | payload);
  }
  if (std::isinf(f)) return sign | infBits;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);
  int e = e2 - 1;  // a in [2^e, 2^(e+1))
  const int minExp = 1 - fmt.bias;
  if (e < minExp) e = minExp;  // subnormal: fixed scale
  double m = std::nearbyint(std::ldexp(a, fmt.mantBits - e));
  if (m >= std::ldexp(1.0, fmt.mantBits + 1)) {  // rounding carried into the next binade
    m /= 2;
    ++e;
  }
  if (e > fmt.bias) return sign | infBits;
  const int im = static_cast<int>(m);
  if (im < (1 << fmt.mantBits)) return static_cast<uint16_t>(sign | im);  // subnormal (or zero)
  return static_cast<uint16_t>(sign | ((e + fmt.bias) << fmt.mantBits) | (im - (1 << fmt.mantBits)));
}

/// Layout of a float8: e4m3 (OCP "FN": no infinity, S.1111.111 is NaN) or e5m2 (IEEE-like).
struct Fp8Format {
  int mantBits;
  int bias;
  bool e4m3;
};
inline constexpr Fp8Format kE4m3{3, 7, true};
inline constexpr Fp8Format kE5m2{2, 15, false};

/// float8 -> float, exact. NaNs widen quiet, keeping the sign (e4m3: the canonical quiet NaN;
/// e5m2: its mantissa bits on top of the float32 mantissa, as float16 does).
inline float refDecode8(uint8_t b, Fp8Format fmt) {
  const bool negative = (b & 0x80) != 0;
  const int expMax = (1 << (7 - fmt.mantBits)) - 1;
  const int e = (b >> fmt.mantBits) & expMax;
  const int m = b & ((1 << fmt.mantBits) - 1);
  const uint32_t signBit = negative ? 0x80000000u : 0u;
  if (fmt.e4m3 && (b & 0x7F) == 0x7F) return bitsFloat(signBit | 0x7FC00000u);
  if (!fmt.e4m3 && e == expMax) {
    if (m == 0) return negative ? -INFINITY : INFINITY;
    return bitsFloat(signBit | 0x7FC00000u | (static_cast<uint32_t>(m) << 21));
  }
  const double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - fmt.bias - fmt.mantBits)
                          : std::ldexp(static_cast<double>(m + (1 << fmt.mantBits)), e - fmt.bias - fmt.mantBits);
  return static_cast<float>(negative ? -v : v);
}

/// float -> float8: round to nearest even in double, then saturate to the largest finite code
/// (infinities too); NaN -> e4m3 S.1111.111, e5m2 quiet NaN keeping the top payload bit.
inline uint8_t refEncode8(float f, Fp8Format fmt) {
  const uint32_t fb = floatBits(f);
  const uint8_t sign = static_cast<uint8_t>((fb >> 24) & 0x80u);
  const uint8_t maxCode = fmt.e4m3 ? 0x7E : 0x7B;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | (fmt.e4m3 ? 0x7F : 0x7E | ((fb >> 21) & 1u)));
  if (std::isinf(f)) return sign | maxCode;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);
  int e = e2 - 1;
  if (e < 1 - fmt.bias) e = 1 - fmt.bias;
  double m = std::nearbyint(std::ldexp(a, fmt.mantBits - e));
  if (m >= std::ldexp(1.0, fmt.mantBits + 1)) {
    m /= 2;
    ++e;
  }
  const int im = static_cast<int>(m);
  if (im < (1 << fmt.mantBits)) return static_cast<uint8_t>(sign | im);
  const int code = ((e + fmt.bias) << fmt.mantBits) | (im - (1 << fmt.mantBits));
  return static_cast<uint8_t>(sign | (code > maxCode ? maxCode : code));
}

/// a op b for an integer type, wrapping.
template <typename T>
T refInt(RedOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case RedOp::kSum: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case RedOp::kProd: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    case RedOp::kMax: return a > b ? a : b;
    case RedOp::kMin: return a < b ? a : b;
    case RedOp::kBand: return static_cast<T>(static_cast<U>(a) & static_cast<U>(b));
    case RedOp::kBor: return static_cast<T>(static_cast<U>(a) | static_cast<U>(b));
    case RedOp::kBxor: return static_cast<T>(static_cast<U>(a) ^ static_cast<U>(b));
    default: return 0;
  }
}

/// max/min of float or double as the contract states it: a NaN wins (of two, the larger bits);
/// equal operands give max the AND of their bits, min the OR (+0 and -0: max +0, min -0).
template <typename F>
F refMinMax(bool isMax, F a, F b) {
  using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  U ua, ub;
  std::memcpy(&ua, &a, sizeof a);
  std::memcpy(&ub, &b, sizeof b);
  if (std::isnan(a) && std::isnan(b)) return ua > ub ? a : b;
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) {
    const U ur = isMax ? (ua & ub) : (ua | ub);
    F r;
    std::memcpy(&r, &ur, sizeof r);
    return r;
  }
  return isMax ? (a > b ? a : b) : (a < b ? a : b);
}

/// a op b for float or double.
template <typename F>
F refFloat(RedOp op, F a, F b) {
  switch (op) {
    case RedOp::kSum: return a + b;
    case RedOp::kProd: return a * b;
    case RedOp::kMax: return refMinMax(true, a, b);
    case RedOp::kMin: return refMinMax(false, a, b);
    default: return 0;
  }
}

/// Integer (a + b) / d (or a / d): wrap first, then truncate toward zero as the signed type.
template <typename T>
T refIntDivide(T a, T b, bool sum, uint32_t d) {
  using U = std::make_unsigned_t<T>;
  const T s = sum ? static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))) : a;
  if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(s) / static_cast<int64_t>(d));
  } else {
    return static_cast<T>(static_cast<uint64_t>(s) / d);
  }
}

/// One element of reduce / sumDivide / divide (op == kAvg means divide; `sum` adds b first).
template <typename T>
void refElement(DataType type, RedOp op, bool sum, uint32_t d, void* out, const void* pa, const void* pb) {
  T a, b, r;
  std::memcpy(&a, pa, sizeof(T));
  std::memcpy(&b, pb, sizeof(T));
  if (type == DataType::kFloat16 || type == DataType::kBfloat16) {
    const HalfFormat fmt = type == DataType::kFloat16 ? kF16 : kBf16;
    const float fa = refDecode(static_cast<uint16_t>(a), fmt);
    const float fb = refDecode(static_cast<uint16_t>(b), fmt);
    const float fr = op == RedOp::kAvg ? (sum ? fa + fb : fa) / static_cast<float>(d) : refFloat(op, fa, fb);
    r = static_cast<T>(refEncode(fr, fmt));
  } else if (type == DataType::kFloat8e4m3 || type == DataType::kFloat8e5m2) {
    const Fp8Format fmt = type == DataType::kFloat8e4m3 ? kE4m3 : kE5m2;
    const float fa = refDecode8(static_cast<uint8_t>(a), fmt);
    const float fb = refDecode8(static_cast<uint8_t>(b), fmt);
    const float fr = op == RedOp::kAvg ? (sum ? fa + fb : fa) / static_cast<float>(d) : refFloat(op, fa, fb);
    r = static_cast<T>(refEncode8(fr, fmt));
  } else if constexpr (std::is_floating_point_v<T>) {
    r = op == RedOp::kAvg ? (sum ? a + b : a) / static_cast<T>(d) : refFloat(op, a, b);
  } else {
    r = op == RedOp::kAvg ? refIntDivide(a, b, sum, d) : refInt(op, a, b);
  }
  std::memcpy(out, &r, sizeof(T));
}

/// Calls f.template operator()<T>() with T the storage type of `type` (uint16_t for the half types,
/// uint8_t for float8).
template <typename Fn>
void withStorageType(DataType type, Fn&& f) {
  switch (type) {
    case DataType::kInt8: f.template operator()<int8_t>(); break;
    case DataType::kUint8:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: f.template operator()<uint8_t>(); break;
    case DataType::kInt32: f.template operator()<int32_t>(); break;
    case DataType::kUint32: f.template operator()<uint32_t>(); break;
    case DataType::kInt64: f.template operator()<int64_t>(); break;
    case DataType::kUint64: f.template operator()<uint64_t>(); break;
    case DataType::kFloat16:
    case DataType::kBfloat16: f.template operator()<uint16_t>(); break;
    case DataType::kFloat32: f.template operator()<float>(); break;
    case DataType::kFloat64: f.template operator()<double>(); break;
  }
}

/// Reference over whole buffers. op == kAvg: sumDivide when b != nullptr, else divide.
inline void refRun(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t n, uint32_t d = 1) {
  withStorageType(type, [&]<typename T>() {
    const bool sum = b != nullptr;
    for (size_t i = 0; i < n; ++i) {
      const void* pb = sum ? static_cast<const T*>(b) + i : static_cast<const T*>(a) + i;
      refElement<T>(type, op, sum, d, static_cast<T*>(dst) + i, static_cast<const T*>(a) + i, pb);
    }
  });
}

}  // namespace ferry::kernels::test
