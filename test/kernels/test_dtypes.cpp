// float8 and the device conversions: kernels/host/fp8.hpp and kernels/cuda/dtypes.cuh against the
// reference (test/kernels/reference.hpp) over every 8- and 16-bit pattern, the rounding midpoints
// between neighbours and a million random float32 patterns; then hand-worked float8 cases (ties,
// saturation, NaN, subnormals) through the host kernels of every instruction set.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/dtypes.cuh"
#include "kernels/host/fp8.hpp"
#include "kernels/host/half.hpp"
#include "kernels/host/reduce.hpp"
#include "test/kernels/reference.hpp"

namespace ferry::kernels::test {
namespace {

namespace dev = ferry::gpu;

/// Floats that probe narrowing: each value of the format, the midpoints to its neighbour and the
/// floats next to them, random patterns, and large values.
template <typename Decode>
std::vector<float> probeValues(uint32_t patterns, Decode decode) {
  std::vector<float> values;
  for (uint32_t h = 0; h + 1 < patterns; ++h) {
    const float v = decode(h), next = decode(h + 1);
    values.push_back(v);
    if (std::isfinite(v) && std::isfinite(next) && (h & (patterns / 2 - 1)) != patterns / 2 - 1) {
      const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
      values.push_back(mid);
      values.push_back(std::nextafter(mid, INFINITY));
      values.push_back(std::nextafter(mid, -INFINITY));
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 1 << 20; ++i) values.push_back(bitsFloat(static_cast<uint32_t>(rng())));
  for (float f : {448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65536.0f, 1e30f, INFINITY, NAN, 1e-45f, 1e-8f}) {
    values.push_back(f);
    values.push_back(-f);
  }
  return values;
}

TEST_CASE("float8 widening is exact on the host and the device path") {
  for (uint32_t b = 0; b < 256; ++b) {
    const auto v = static_cast<uint8_t>(b);
    INFO("pattern " << b);
    REQUIRE(floatBits(fp8e4m3ToFloat(v)) == floatBits(refDecode8(v, kE4m3)));
    REQUIRE(floatBits(fp8e5m2ToFloat(v)) == floatBits(refDecode8(v, kE5m2)));
    REQUIRE(floatBits(dev::fp8BitsToFloat<3>(v)) == floatBits(refDecode8(v, kE4m3)));
    REQUIRE(floatBits(dev::fp8BitsToFloat<2>(v)) == floatBits(refDecode8(v, kE5m2)));
  }
}

TEST_CASE("float8 narrowing rounds to nearest even and saturates, host and device path") {
  for (Fp8Format fmt : {kE4m3, kE5m2}) {
    for (float f : probeValues(256, [fmt](uint32_t h) { return refDecode8(static_cast<uint8_t>(h), fmt); })) {
      INFO("float bits " << floatBits(f) << (fmt.e4m3 ? " e4m3" : " e5m2"));
      const uint8_t want = refEncode8(f, fmt);
      REQUIRE((fmt.e4m3 ? floatToFp8e4m3(f) : floatToFp8e5m2(f)) == want);
      REQUIRE((fmt.e4m3 ? dev::floatToFp8Bits<3>(f) : dev::floatToFp8Bits<2>(f)) == want);
    }
  }
}

TEST_CASE("device float16 and bfloat16 conversions equal half.hpp on every pattern") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto v = static_cast<uint16_t>(h);
    INFO("pattern " << h);
    REQUIRE(floatBits(dev::halfBitsToFloat(v)) == floatBits(halfToFloat(v)));
    REQUIRE(floatBits(dev::bfloat16BitsToFloat(v)) == floatBits(bfloat16ToFloat(v)));
  }
  for (float f : probeValues(65536, [](uint32_t h) { return refDecode(static_cast<uint16_t>(h), kF16); })) {
    INFO("float bits " << floatBits(f));
    REQUIRE(dev::floatToHalfBits(f) == floatToHalf(f));
    REQUIRE(dev::floatToBfloat16Bits(f) == floatToBfloat16(f));
  }
}

TEST_CASE("float8 hand-worked conversions") {
  // e4m3: 1.0 = 0.0111.000; ties to even; saturation at 448 (0x7E), infinity included; NaN 0x7F.
  CHECK(floatToFp8e4m3(1.0f) == 0x38);
  CHECK(floatToFp8e4m3(1.0625f) == 0x38);  // halfway 1.0 / 1.125: even
  CHECK(floatToFp8e4m3(1.1875f) == 0x3A);  // halfway 1.125 / 1.25: even
  CHECK(floatToFp8e4m3(448.0f) == 0x7E);
  CHECK(floatToFp8e4m3(464.0f) == 0x7E);  // would round to 480 (the NaN code): saturates
  CHECK(floatToFp8e4m3(1e6f) == 0x7E);
  CHECK(floatToFp8e4m3(-INFINITY) == 0xFE);
  CHECK(floatToFp8e4m3(NAN) == 0x7F);
  CHECK(floatToFp8e4m3(-NAN) == 0xFF);
  CHECK(floatToFp8e4m3(0x1p-9f) == 0x01);   // smallest subnormal
  CHECK(floatToFp8e4m3(0x1p-10f) == 0x00);  // halfway 0 / 2^-9: even
  CHECK(floatToFp8e4m3(0x3p-10f) == 0x02);  // halfway 2^-9 / 2^-8: even
  CHECK(floatToFp8e4m3(0xFp-10f) == 0x08);  // halfway largest subnormal / 2^-6: even
  CHECK(fp8e4m3ToFloat(0x7E) == 448.0f);
  CHECK(fp8e4m3ToFloat(0x01) == 0x1p-9f);
  CHECK(std::isnan(fp8e4m3ToFloat(0x7F)));
  CHECK(floatBits(fp8e4m3ToFloat(0x80)) == 0x80000000u);
  // e5m2: 1.0 = 0.01111.00; saturation at 57344 (0x7B); 0x7C infinity; NaN quiet 0x7E.
  CHECK(floatToFp8e5m2(1.0f) == 0x3C);
  CHECK(floatToFp8e5m2(1.125f) == 0x3C);
  CHECK(floatToFp8e5m2(1.375f) == 0x3E);
  CHECK(floatToFp8e5m2(57344.0f) == 0x7B);
  CHECK(floatToFp8e5m2(61440.0f) == 0x7B);
  CHECK(floatToFp8e5m2(INFINITY) == 0x7B);
  CHECK(floatToFp8e5m2(-INFINITY) == 0xFB);
  CHECK(floatToFp8e5m2(NAN) == 0x7E);
  CHECK(floatToFp8e5m2(bitsFloat(0x7FE00000u)) == 0x7F);
  CHECK(floatToFp8e5m2(0x1p-16f) == 0x01);
  CHECK(floatToFp8e5m2(0x1p-17f) == 0x00);
  CHECK(floatToFp8e5m2(0x3p-17f) == 0x02);
  CHECK(std::isinf(fp8e5m2ToFloat(0x7C)));
  CHECK(std::isnan(fp8e5m2ToFloat(0x7D)));
}

/// (type, op, a, b, want) through every instruction set's kernels, out of place and in place.
void expectFp8(DataType type, RedOp op, std::vector<std::array<uint8_t, 3>> cases, uint32_t divisor = 0) {
  const Isa restore = activeIsa();
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    if (!setIsa(isa)) continue;
    // 37 copies: every case lands in full vectors and in the staged tail.
    std::vector<uint8_t> a, b, want;
    for (int r = 0; r < 37; ++r) {
      for (const auto& c : cases) {
        a.push_back(c[0]);
        b.push_back(c[1]);
        want.push_back(c[2]);
      }
    }
    std::vector<uint8_t> got(a.size());
    if (divisor != 0) sumDivide(type, got.data(), a.data(), b.data(), a.size(), divisor);
    else reduce(type, op, got.data(), a.data(), b.data(), a.size());
    INFO(isaName(isa) << " " << dataTypeName(type) << " " << redOpName(op));
    CHECK(got == want);
    if (divisor == 0) {
      reduce(type, op, a.data(), a.data(), b.data(), a.size());
      CHECK(a == want);
    }
  }
  setIsa(restore);
}

TEST_CASE("float8 host kernels: ties, saturation, NaN and subnormals on every isa") {
  // e4m3: 1 + 0.0625 is a tie (even: 1.0); 448 + 448 saturates; NaN wins max and sum; subnormals add.
  expectFp8(DataType::kFloat8e4m3, RedOp::kSum,
            {{0x38, 0x00, 0x38},
             {0x7E, 0x7E, 0x7E},
             {0xFE, 0xFE, 0xFE},
             {0x7F, 0x38, 0x7F},
             {0x01, 0x01, 0x02},
             {0x07, 0x01, 0x08},
             {0x39, 0x38, 0x40}});
  expectFp8(DataType::kFloat8e4m3, RedOp::kMax, {{0x7F, 0x38, 0x7F}, {0x38, 0xFF, 0xFF}, {0x38, 0xB8, 0x38}});
  expectFp8(DataType::kFloat8e4m3, RedOp::kProd, {{0x48, 0x48, 0x58}, {0x70, 0x70, 0x7E}, {0x01, 0x30, 0x00}});
  // avg of 1.0 and 1.125 over 2: 1.0625, a tie, to 1.0.
  expectFp8(DataType::kFloat8e4m3, RedOp::kAvg, {{0x38, 0x39, 0x38}, {0x3A, 0x39, 0x3A}}, 2);
  // e5m2: 57344 + 57344 saturates; infinity in means largest finite out (saturating conversion).
  expectFp8(DataType::kFloat8e5m2, RedOp::kSum,
            {{0x7B, 0x7B, 0x7B}, {0x7C, 0x3C, 0x7B}, {0x7E, 0x3C, 0x7E}, {0x01, 0x01, 0x02}, {0x3C, 0x3C, 0x40}});
  expectFp8(DataType::kFloat8e5m2, RedOp::kMin, {{0x7D, 0x3C, 0x7F}, {0xBC, 0x3C, 0xBC}});
  expectFp8(DataType::kFloat8e5m2, RedOp::kAvg, {{0x3C, 0x3D, 0x3C}, {0x3E, 0x3D, 0x3E}}, 2);
}

}  // namespace
}  // namespace ferry::kernels::test
