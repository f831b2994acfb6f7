// float16 / bfloat16 conversion: half.hpp's scalar functions and the kernels of every instruction
// set, over every 16-bit pattern, against the reference's frexp/ldexp conversion.
//
// The sweep in test_reduce.cpp draws random values; here every pattern (zeros, subnormals, the
// largest finites, infinities, signalling and quiet NaNs) goes through each kernel once, so a
// conversion that differs in a single corner between F16C, AVX-512 and the integer code shows up.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "kernels/host/half.hpp"
#include "kernels/host/reduce.hpp"
#include "test/kernels/reference.hpp"

namespace ferry::kernels::test {
namespace {

constexpr Isa kIsas[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};

bool isHalfNan(uint16_t h, HalfFormat fmt) {
  const int expMax = (1 << (15 - fmt.mantBits)) - 1;
  return ((h >> fmt.mantBits) & expMax) == expMax && (h & ((1 << fmt.mantBits) - 1)) != 0;
}

TEST_CASE("half.hpp widens every 16-bit pattern exactly") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto v = static_cast<uint16_t>(h);
    INFO("pattern " << h);
    REQUIRE(floatBits(halfToFloat(v)) == floatBits(refDecode(v, kF16)));
    REQUIRE(floatBits(bfloat16ToFloat(v)) == floatBits(refDecode(v, kBf16)));
  }
}

TEST_CASE("half.hpp narrows with round to nearest even") {
  std::vector<float> values;
  // Every 16-bit value, the midpoints to its neighbours and the floats just around them.
  for (uint32_t h = 0; h < 65536; ++h) {
    for (HalfFormat fmt : {kF16, kBf16}) {
      const float v = refDecode(static_cast<uint16_t>(h), fmt);
      const float next = refDecode(static_cast<uint16_t>(h + 1), fmt);
      values.push_back(v);
      if (std::isfinite(v) && std::isfinite(next) && (h & 0x7FFF) != 0x7FFF) {
        const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
        values.push_back(mid);
        values.push_back(std::nextafter(mid, INFINITY));
        values.push_back(std::nextafter(mid, -INFINITY));
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1 << 20; ++i) values.push_back(bitsFloat(static_cast<uint32_t>(rng())));
  for (float f : {65519.99f, 65520.0f, 65536.0f, 1e-8f, 3e38f, 3.4028235e38f, 1e-45f}) {
    values.push_back(f);
    values.push_back(-f);
  }
  for (float f : values) {
    INFO("float bits " << floatBits(f));
    REQUIRE(floatToHalf(f) == refEncode(f, kF16));
    REQUIRE(floatToBfloat16(f) == refEncode(f, kBf16));
  }
}

TEST_CASE("kernels handle every float16 and bfloat16 pattern on every isa") {
  std::mt19937_64 rng(99);
  const Isa restore = activeIsa();
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    const HalfFormat fmt = type == DataType::kFloat16 ? kF16 : kBf16;
    std::vector<uint16_t> a(65536), b(65536), got(65536), want(65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      a[h] = static_cast<uint16_t>(h);
      b[h] = static_cast<uint16_t>(rng());
      // Two NaNs in one sum lane leave the payload to the operand order (see test_reduce.cpp).
      if (isHalfNan(a[h], fmt) && isHalfNan(b[h], fmt)) b[h] = 0;
    }
    for (Isa isa : kIsas) {
      if (!setIsa(isa)) continue;
      for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
        INFO(isaName(isa) << " " << dataTypeName(type) << " " << redOpName(op));
        reduce(type, op, got.data(), a.data(), b.data(), a.size());
        refRun(type, op, want.data(), a.data(), b.data(), a.size());
        CHECK(got == want);
        // max(x, x) is x itself, made quiet if it is a NaN: a full widen/narrow round trip.
        reduce(type, op, got.data(), a.data(), a.data(), a.size());
        refRun(type, op, want.data(), a.data(), a.data(), a.size());
        if (op != RedOp::kSum && op != RedOp::kProd) CHECK(got == want);
      }
      for (uint32_t d : {1u, 3u, 1000u}) {
        INFO(isaName(isa) << " " << dataTypeName(type) << " divisor " << d);
        sumDivide(type, got.data(), a.data(), b.data(), a.size(), d);
        refRun(type, RedOp::kAvg, want.data(), a.data(), b.data(), a.size(), d);
        CHECK(got == want);
        divide(type, got.data(), a.data(), a.size(), d);
        refRun(type, RedOp::kAvg, want.data(), a.data(), nullptr, a.size(), d);
        CHECK(got == want);
      }
    }
  }
  setIsa(restore);
}

}  // namespace
}  // namespace ferry::kernels::test
