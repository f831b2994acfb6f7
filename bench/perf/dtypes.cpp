// Element type facts and conversions. See dtypes.hpp.
#include "bench/perf/dtypes.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace ferry::perf {
namespace {

constexpr int64_t k2e53 = int64_t{1} << 53;

// In DataType's numeric order, so that typeInfo() indexes directly.
constexpr TypeInfo kTypes[kNumDataTypes] = {
    {DataType::kInt8, "int8", "int8", 1, false, 127, 6, 0, 0},
    {DataType::kUint8, "uint8", "uint8", 1, false, 255, 7, 0, 0},
    {DataType::kInt32, "int32", "int32", 4, false, (int64_t{1} << 31) - 1, 30, 0, 0},
    {DataType::kUint32, "uint32", "uint32", 4, false, (int64_t{1} << 32) - 1, 31, 0, 0},
    // 64-bit integers: expected values are computed in double, so stay below 2^53.
    {DataType::kInt64, "int64", "int64", 8, false, k2e53, 62, 0, 0},
    {DataType::kUint64, "uint64", "uint64", 8, false, k2e53, 63, 0, 0},
    {DataType::kFloat16, "half", "float16", 2, true, 2048, 15, 10, 5},
    {DataType::kFloat32, "float", "float32", 4, true, int64_t{1} << 24, 127, 23, 8},
    {DataType::kFloat64, "double", "float64", 8, true, k2e53, 1023, 52, 11},
    {DataType::kBfloat16, "bfloat16", "bfloat16", 2, true, 256, 127, 7, 8},
    // float8: 4 (3) significand bits make integers exact up to 16 (8); conversions saturate.
    {DataType::kFloat8e4m3, "f8e4m3", "float8e4m3", 1, true, 16, 8, 3, 4},
    {DataType::kFloat8e5m2, "f8e5m2", "float8e5m2", 1, true, 8, 15, 2, 5},
};

constexpr DataType kAllTypes[kNumDataTypes] = {
    DataType::kInt8,    DataType::kUint8,    DataType::kInt32,      DataType::kUint32,
    DataType::kInt64,   DataType::kUint64,   DataType::kFloat16,    DataType::kFloat32,
    DataType::kFloat64, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2,
};

// Integers: round to nearest, then wrap into the type's width.
template <typename T>
uint64_t encodeInteger(double value) {
  T v;
  if constexpr (std::is_unsigned_v<T>) {
    v = static_cast<T>(value <= 0 ? 0 : static_cast<uint64_t>(std::nearbyint(value)));
  } else {
    v = static_cast<T>(static_cast<int64_t>(std::nearbyint(value)));
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

uint64_t encodeHalf(double value) { return floatToHalf(static_cast<float>(value)); }
uint64_t encodeBfloat16(double value) { return floatToBfloat16(static_cast<float>(value)); }
// float8 (OCP E4M3 / E5M2), written out from the format: round to nearest even, saturate at the
// largest finite value (infinity too), NaN to the canonical NaN. E4M3 has no infinity and spends
// S.1111.111 on NaN, so its largest finite value is 1.75 * 2^8 = 448.
template <int kMant, int kExp>
uint64_t encodeFloat8(double value) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr bool kE4m3 = kExp == 4;
  constexpr uint32_t kMaxCode = kE4m3 ? 0x7e : 0x7b;
  const uint32_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | (kE4m3 ? 0x7f : 0x7e);
  const double a = std::fabs(value);
  if (a == 0) return sign;
  if (std::isinf(a)) return sign | kMaxCode;
  int e = std::ilogb(a);
  if (e < 1 - kBias) e = 1 - kBias;  // subnormal range: fixed scale
  double m = std::nearbyint(std::ldexp(a, kMant - e));
  if (m >= (1 << (kMant + 1))) {
    m /= 2;
    ++e;
  }
  const uint32_t im = static_cast<uint32_t>(m);
  uint32_t code = im < (1u << kMant) ? im : (static_cast<uint32_t>(e + kBias) << kMant) | (im - (1u << kMant));
  if (e + kBias > (1 << kExp) - 1 || code > kMaxCode) code = kMaxCode;
  return sign | code;
}

template <int kMant, int kExp>
double decodeFloat8(uint8_t bits) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const uint32_t magnitude = bits & 0x7f;
  const int e = static_cast<int>(magnitude >> kMant);
  const int m = static_cast<int>(magnitude & ((1u << kMant) - 1));
  double v;
  if (kExp == 4 && magnitude == 0x7f) {
    v = std::nan("");
  } else if (kExp == 5 && e == 31) {
    v = m == 0 ? INFINITY : std::nan("");
  } else {
    v = e == 0 ? std::ldexp(m, 1 - kBias - kMant) : std::ldexp(m + (1 << kMant), e - kBias - kMant);
  }
  return (bits & 0x80) ? -v : v;
}

uint64_t encodeFloat(double value) { return std::bit_cast<uint32_t>(static_cast<float>(value)); }
uint64_t encodeDouble(double value) { return std::bit_cast<uint64_t>(value); }

// Floats ordered as integers: the sign-magnitude bit pattern mapped onto a number line, so that
// adjacent representable values differ by one.
int64_t orderedFloat(uint64_t bits, int width) {
  const uint64_t sign = uint64_t{1} << (width - 1);
  const int64_t magnitude = static_cast<int64_t>(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

}  // namespace

const TypeInfo& typeInfo(DataType type) { return kTypes[static_cast<int>(type)]; }

std::span<const DataType> allTypes() { return kAllTypes; }

std::optional<DataType> parseTypeName(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (name == t.ncclName || name == t.ferryName) return t.type;
  }
  struct Alias {
    const char* name;
    DataType type;
  };
  static constexpr Alias kAliases[] = {
      {"fp16", DataType::kFloat16},       {"fp32", DataType::kFloat32},       {"fp64", DataType::kFloat64},
      {"bf16", DataType::kBfloat16},      {"char", DataType::kInt8},          {"int", DataType::kInt32},
      {"fp8e4m3", DataType::kFloat8e4m3}, {"fp8e5m2", DataType::kFloat8e5m2},
  };
  for (const Alias& a : kAliases) {
    if (name == a.name) return a.type;
  }
  return std::nullopt;
}

uint16_t floatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t exponent = (bits >> 23) & 0xff;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent == 0xff) {  // infinity stays infinity; NaN stays a (quiet) NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >> 13) : 0));
  }
  const int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {  // a half subnormal (or zero): the value in units of 2^-24
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const int shift = 14 - e;
    uint32_t h = mantissa >> shift;
    const uint32_t rest = mantissa & ((uint32_t{1} << shift) - 1);
    const uint32_t halfway = uint32_t{1} << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t floatToBfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

EncodeFn encoder(DataType type) {
  switch (type) {
    case DataType::kInt8: return &encodeInteger<int8_t>;
    case DataType::kUint8: return &encodeInteger<uint8_t>;
    case DataType::kInt32: return &encodeInteger<int32_t>;
    case DataType::kUint32: return &encodeInteger<uint32_t>;
    case DataType::kInt64: return &encodeInteger<int64_t>;
    case DataType::kUint64: return &encodeInteger<uint64_t>;
    case DataType::kFloat16: return &encodeHalf;
    case DataType::kFloat32: return &encodeFloat;
    case DataType::kFloat64: return &encodeDouble;
    case DataType::kBfloat16: return &encodeBfloat16;
    case DataType::kFloat8e4m3: return &encodeFloat8<3, 4>;
    case DataType::kFloat8e5m2: return &encodeFloat8<2, 5>;
  }
  return &encodeDouble;
}

void storeValue(DataType type, void* dst, double value) {
  const uint64_t bits = encoder(type)(value);
  std::memcpy(dst, &bits, typeInfo(type).size);  // little-endian: the low bytes are the element
}

double loadValue(DataType type, const void* src) {
  uint64_t bits = 0;
  std::memcpy(&bits, src, typeInfo(type).size);
  switch (type) {
    case DataType::kInt8: return static_cast<int8_t>(bits);
    case DataType::kUint8: return static_cast<uint8_t>(bits);
    case DataType::kInt32: return static_cast<int32_t>(bits);
    case DataType::kUint32: return static_cast<uint32_t>(bits);
    case DataType::kInt64: return static_cast<double>(static_cast<int64_t>(bits));
    case DataType::kUint64: return static_cast<double>(bits);
    case DataType::kFloat16: return halfToFloat(static_cast<uint16_t>(bits));
    case DataType::kFloat32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DataType::kFloat64: return std::bit_cast<double>(bits);
    case DataType::kBfloat16: return bfloat16ToFloat(static_cast<uint16_t>(bits));
    case DataType::kFloat8e4m3: return decodeFloat8<3, 4>(static_cast<uint8_t>(bits));
    case DataType::kFloat8e5m2: return decodeFloat8<2, 5>(static_cast<uint8_t>(bits));
  }
  return 0;
}

uint64_t ulpDistance(DataType type, const void* a, const void* b) {
  const TypeInfo& t = typeInfo(type);
  uint64_t x = 0, y = 0;
  std::memcpy(&x, a, t.size);
  std::memcpy(&y, b, t.size);
  if (x == y) return 0;
  if (!t.isFloat) {
    const double dx = loadValue(type, a), dy = loadValue(type, b);
    return static_cast<uint64_t>(dx > dy ? dx - dy : dy - dx);
  }
  const int width = static_cast<int>(t.size * 8);
  const int64_t ox = orderedFloat(x, width), oy = orderedFloat(y, width);
  return ox > oy ? static_cast<uint64_t>(ox - oy) : static_cast<uint64_t>(oy - ox);
}

}  // namespace ferry::perf
