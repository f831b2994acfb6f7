// Element encodings for the GPU tests: small integers, exact in every tested type (float32, int32,
// bfloat16 up to 256, fp8 e4m3 up to 16), so expected values are exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "ferry/types.hpp"

namespace gputest {

/// A tested type: the ferry DataType, its size and its name.
struct TypeCase {
  ferry::DataType type;
  size_t size;
  const char* name;
};

/// NCCL's ncclFloat8e4m3 value; the test runs it only when ferry knows it (isValidDataType).
inline constexpr int kFloat8e4m3 = 10;

inline void encode(const TypeCase& t, double v, void* out) {
  switch (t.size) {
    case 4:
      if (t.type == ferry::DataType::kInt32) {
        int32_t i = static_cast<int32_t>(v);
        std::memcpy(out, &i, 4);
      } else {
        float f = static_cast<float>(v);
        std::memcpy(out, &f, 4);
      }
      return;
    case 2: {  // bfloat16: the top half of a float32 (exact for small integers)
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      uint16_t h = static_cast<uint16_t>(b >> 16);
      std::memcpy(out, &h, 2);
      return;
    }
    case 1: {  // fp8 e4m3 (bias 7, 3 mantissa bits), non-negative integers up to 16
      uint8_t bits = 0;
      if (v > 0) {
        int e = static_cast<int>(std::floor(std::log2(v)));
        int m = static_cast<int>(std::lround((v / std::ldexp(1.0, e) - 1.0) * 8.0));
        bits = static_cast<uint8_t>(((e + 7) << 3) | m);
      }
      std::memcpy(out, &bits, 1);
      return;
    }
  }
}

inline double decode(const TypeCase& t, const void* in) {
  switch (t.size) {
    case 4:
      if (t.type == ferry::DataType::kInt32) {
        int32_t i;
        std::memcpy(&i, in, 4);
        return i;
      } else {
        float f;
        std::memcpy(&f, in, 4);
        return f;
      }
    case 2: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      uint32_t b = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case 1: {
      uint8_t bits;
      std::memcpy(&bits, in, 1);
      int e = (bits >> 3) & 0xf, m = bits & 7;
      if (e == 0) return std::ldexp(m / 8.0, -6);
      if (e == 15 && m == 7) return NAN;
      return std::ldexp(1.0 + m / 8.0, e - 7);
    }
  }
  return NAN;
}

/// Rank r's input element i (0..4): sums over 4 ranks stay <= 16.
inline double value(int r, size_t i) { return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 5); }

}  // namespace gputest
