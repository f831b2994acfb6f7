// Hand-written cases with expected values worked out by hand, independent of any reference code:
// integer wrap-around, NaN and infinity in max/min, float16/bfloat16 rounding ties,
// sumDivide/divide on negative and wrapped integers and on every float type, and the bitwise ops
// over a rank-based fill with a closed-form result.
//
// Each case is a short list of (a, b, expected) triples. The list is repeated cyclically over 131
// elements so every triple lands both in full vectors and in the staged tail, for every
// instruction set the CPU supports.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/host/reduce.hpp"

namespace ferry::kernels::test {
namespace {

constexpr size_t kCaseLength = 131;
constexpr Isa kIsas[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};

template <typename T>
struct Triple {
  T a, b, want;
};

/// Expands the triples cyclically to kCaseLength elements.
template <typename T>
void expand(const std::vector<Triple<T>>& cases, std::vector<T>& a, std::vector<T>& b, std::vector<T>& want) {
  for (size_t i = 0; i < kCaseLength; ++i) {
    const Triple<T>& c = cases[i % cases.size()];
    a.push_back(c.a);
    b.push_back(c.b);
    want.push_back(c.want);
  }
}

/// Checks the kernel (reduce for op != kAvg, sumDivide for kAvg, divide for kAvg with unary set)
/// on every supported instruction set, out of place and in place.
template <typename T>
void expectKernel(DataType type, RedOp op, const std::vector<Triple<T>>& cases, uint32_t divisor = 1,
                  bool unary = false) {
  std::vector<T> a, b, want;
  expand(cases, a, b, want);
  const Isa restore = activeIsa();
  for (Isa isa : kIsas) {
    if (!setIsa(isa)) continue;
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      std::vector<T> x = a, y = b, out(kCaseLength, T{});
      T* dst = inPlace ? x.data() : out.data();
      if (op != RedOp::kAvg) reduce(type, op, dst, x.data(), y.data(), kCaseLength);
      else if (unary) divide(type, dst, x.data(), kCaseLength, divisor);
      else sumDivide(type, dst, x.data(), y.data(), kCaseLength, divisor);
      for (size_t i = 0; i < kCaseLength; ++i) {
        INFO(isaName(isa) << " " << dataTypeName(type) << " " << redOpName(op) << " element " << i
                          << (inPlace ? " in place" : ""));
        CHECK(std::memcmp(&dst[i], &want[i], sizeof(T)) == 0);
        if (std::memcmp(&dst[i], &want[i], sizeof(T)) != 0) {
          CHECK(+dst[i] == +want[i]);  // prints both values
          break;
        }
      }
    }
  }
  setIsa(restore);
}

uint32_t f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST_CASE("integer sum and prod wrap around") {
  constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
  constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  expectKernel<int32_t>(DataType::kInt32, RedOp::kSum, {{kI32Max, 1, kI32Min}, {kI32Min, -1, kI32Max}, {-5, 3, -2}});
  expectKernel<uint8_t>(DataType::kUint8, RedOp::kSum, {{255, 1, 0}, {200, 100, 44}, {1, 2, 3}});
  expectKernel<int8_t>(DataType::kInt8, RedOp::kSum, {{127, 1, -128}, {-128, -1, 127}, {-3, 1, -2}});
  expectKernel<int8_t>(DataType::kInt8, RedOp::kProd,
                       {{100, 3, 44}, {-128, -1, -128}, {16, 16, 0}, {-7, 9, -63}, {127, 127, 1}});
  expectKernel<uint8_t>(DataType::kUint8, RedOp::kProd, {{255, 255, 1}, {16, 17, 16}, {3, 5, 15}});
  expectKernel<int32_t>(DataType::kInt32, RedOp::kProd, {{65536, 65536, 0}, {kI32Min, -1, kI32Min}, {-3, 7, -21}});
  expectKernel<uint32_t>(DataType::kUint32, RedOp::kSum, {{0xFFFFFFFFu, 2, 1}, {7, 8, 15}});
  expectKernel<int64_t>(DataType::kInt64, RedOp::kSum, {{kI64Max, 1, kI64Min}, {-5, 2, -3}});
  expectKernel<int64_t>(DataType::kInt64, RedOp::kProd,
                        {{kI64Min, -1, kI64Min}, {int64_t{1} << 32, int64_t{1} << 32, 0}});
  expectKernel<uint64_t>(DataType::kUint64, RedOp::kProd,
                         {{uint64_t{1} << 63, 2, 0}, {~uint64_t{0}, ~uint64_t{0}, 1}, {3, 5, 15}});
}

TEST_CASE("integer max and min respect signedness") {
  expectKernel<int8_t>(DataType::kInt8, RedOp::kMax, {{-1, 1, 1}, {-128, 127, 127}, {-5, -6, -5}});
  expectKernel<uint8_t>(DataType::kUint8, RedOp::kMax, {{255, 1, 255}, {0, 128, 128}});
  expectKernel<int32_t>(DataType::kInt32, RedOp::kMin,
                        {{-1, 1, -1}, {std::numeric_limits<int32_t>::min(), 0, std::numeric_limits<int32_t>::min()}});
  expectKernel<uint32_t>(DataType::kUint32, RedOp::kMin, {{0x80000000u, 1, 1}, {0, 0xFFFFFFFFu, 0}});
  expectKernel<int64_t>(DataType::kInt64, RedOp::kMin, {{-1, std::numeric_limits<int64_t>::max(), -1}, {3, 2, 2}});
  expectKernel<uint64_t>(DataType::kUint64, RedOp::kMax, {{uint64_t{1} << 63, 1, uint64_t{1} << 63}, {2, 3, 3}});
}

TEST_CASE("max and min propagate NaN from either side and order infinities") {
  const uint32_t nanA = 0x7FC00001, nanB = 0xFFC00002, snan = 0x7F800001, inf = 0x7F800000, ninf = 0xFF800000;
  const uint32_t one = f32(1.0f), five = f32(5.0f);
  // A NaN wins over everything, of two NaNs the larger bits in either order; sNaN passes through
  // unchanged (no arithmetic).
  expectKernel<uint32_t>(DataType::kFloat32, RedOp::kMax,
                         {{nanA, one, nanA},
                          {one, nanB, nanB},
                          {nanA, nanB, nanB},
                          {nanB, nanA, nanB},
                          {inf, nanB, nanB},
                          {snan, one, snan},
                          {ninf, one, one},
                          {inf, five, inf},
                          {one, five, five}});
  expectKernel<uint32_t>(
      DataType::kFloat32, RedOp::kMin,
      {{nanA, one, nanA}, {one, nanB, nanB}, {ninf, nanA, nanA}, {ninf, five, ninf}, {inf, one, one}});
  const uint64_t dnan = 0x7FF8000000000003, dinf = 0x7FF0000000000000, done = 0x3FF0000000000000;
  expectKernel<uint64_t>(DataType::kFloat64, RedOp::kMax, {{dnan, done, dnan}, {done, dnan, dnan}, {dinf, done, dinf}});
  expectKernel<uint64_t>(DataType::kFloat64, RedOp::kMin,
                         {{done, dnan, dnan}, {dinf | (1ull << 63), done, dinf | (1ull << 63)}});
  // float16: 0x3C00 = 1, 0x7C00 = +inf; a signalling NaN comes back quiet with its payload.
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kMax,
                         {{0x7E01, 0x3C00, 0x7E01},
                          {0x3C00, 0xFE02, 0xFE02},
                          {0x7C01, 0x3C00, 0x7E01},
                          {0xFC00, 0x3C00, 0x3C00},
                          {0x7C00, 0x3C00, 0x7C00}});
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kMin, {{0x7C00, 0xFC00, 0xFC00}, {0x3C00, 0x7D00, 0x7F00}});
  // bfloat16: 0x3F80 = 1, 0x7F80 = +inf.
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kMax,
                         {{0x7F81, 0x3F80, 0x7FC1}, {0x3F80, 0xFFC2, 0xFFC2}, {0xFF80, 0x3F80, 0x3F80}});
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kMin, {{0x7F80, 0xFF80, 0xFF80}, {0x3F80, 0x7FC0, 0x7FC0}});
}

TEST_CASE("max and min order -0 below +0 and treat two NaNs alike in either order") {
  const uint32_t pz = 0, nz = 0x80000000u, nanA = 0x7FC00001, nanB = 0x7FC00002, one = f32(1.0f);
  // max(-0, +0) = +0 and min(-0, +0) = -0 whichever operand comes first: an order-independent
  // reduction (docs/RELIABILITY.md, "Special values in min and max").
  expectKernel<uint32_t>(DataType::kFloat32, RedOp::kMax,
                         {{pz, nz, pz}, {nz, pz, pz}, {nz, nz, nz}, {nanA, nanB, nanB}, {nanB, nanA, nanB}});
  expectKernel<uint32_t>(DataType::kFloat32, RedOp::kMin,
                         {{pz, nz, nz}, {nz, pz, nz}, {pz, pz, pz}, {nanA, nanB, nanB}, {nanB, one, nanB}});
  const uint64_t dpz = 0, dnz = uint64_t{1} << 63;
  expectKernel<uint64_t>(DataType::kFloat64, RedOp::kMax, {{dpz, dnz, dpz}, {dnz, dpz, dpz}});
  expectKernel<uint64_t>(DataType::kFloat64, RedOp::kMin, {{dpz, dnz, dnz}, {dnz, dpz, dnz}});
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kMax, {{0x0000, 0x8000, 0x0000}, {0x8000, 0x0000, 0x0000}});
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kMin, {{0x0000, 0x8000, 0x8000}, {0x8000, 0x0000, 0x8000}});
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kMax, {{0x0000, 0x8000, 0x0000}, {0x8000, 0x0000, 0x0000}});
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kMin, {{0x0000, 0x8000, 0x8000}, {0x8000, 0x0000, 0x8000}});
}

TEST_CASE("float16 and bfloat16 round ties to even") {
  // float16: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 -> 1 (even); 1 + 3*2^-11 -> 1 + 2^-9.
  // 2^-25 lies halfway between 0 and the smallest subnormal -> 0; 1.5 * 2^-24 -> 2 * 2^-24.
  // 65504 + 16 = 65520 lies halfway between 65504 and 65536 (infinity) -> infinity.
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kSum,
                         {{0x3C00, 0x1000, 0x3C00},
                          {0x3C01, 0x1000, 0x3C02},
                          {0x3C00, 0x1001, 0x3C01},
                          {0x7BFF, 0x4C00, 0x7C00},
                          {0x7BFF, 0x4800, 0x7BFF},
                          {0xBC00, 0x9000, 0xBC00}});
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kProd,
                         {{0x0001, 0x3800, 0x0000}, {0x0003, 0x3800, 0x0002}, {0x8001, 0x3800, 0x8000}});
  // bfloat16: 1 + 2^-8 -> 1; 1 + 3*2^-8 -> 1 + 2^-6; the largest finite + half an ulp -> infinity.
  expectKernel<uint16_t>(
      DataType::kBfloat16, RedOp::kSum,
      {{0x3F80, 0x3B80, 0x3F80}, {0x3F81, 0x3B80, 0x3F82}, {0x7F7F, 0x7B00, 0x7F80}, {0xBF80, 0xBB80, 0xBF80}});
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kProd, {{0x0001, 0x3F00, 0x0000}, {0x0003, 0x3F00, 0x0002}});
}

TEST_CASE("sumDivide and divide truncate integers toward zero after wrapping") {
  constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  expectKernel<int32_t>(DataType::kInt32, RedOp::kAvg, {{-7, 0, -3}, {-8, 1, -3}, {kI32Max, 1, -1073741824}, {7, 0, 3}},
                        2);
  expectKernel<int32_t>(DataType::kInt32, RedOp::kAvg, {{-8, 1, -2}, {-9, 0, -3}, {8, 0, 2}}, 3);
  expectKernel<int8_t>(DataType::kInt8, RedOp::kAvg, {{-128, 0, -42}, {127, 1, -42}, {-1, 0, 0}, {100, 0, 33}}, 3);
  expectKernel<int8_t>(DataType::kInt8, RedOp::kAvg, {{-128, 0, 0}, {127, 0, 0}}, 1000);
  expectKernel<uint8_t>(DataType::kUint8, RedOp::kAvg, {{255, 1, 0}, {250, 4, 84}, {255, 0, 85}}, 3);
  expectKernel<uint32_t>(DataType::kUint32, RedOp::kAvg, {{0xFFFFFFFFu, 0, 0x7FFFFFFFu}, {0xFFFFFFFFu, 1, 0}}, 2);
  expectKernel<int64_t>(DataType::kInt64, RedOp::kAvg, {{-9, 0, -2}, {kI64Max, 1, -(int64_t{1} << 61)}}, 4);
  expectKernel<uint64_t>(DataType::kUint64, RedOp::kAvg, {{~uint64_t{0}, 0, ~uint64_t{0} / 3}}, 3);
  // divide: unary; b is ignored.
  expectKernel<int32_t>(DataType::kInt32, RedOp::kAvg, {{-9, 0, -4}, {9, 0, 4}, {-1, 0, 0}}, 2, true);
  expectKernel<int8_t>(DataType::kInt8, RedOp::kAvg, {{-1, 0, 0}, {-128, 0, -64}, {-7, 0, -3}}, 2, true);
  expectKernel<int64_t>(DataType::kInt64, RedOp::kAvg,
                        {{-7, 0, -1}, {std::numeric_limits<int64_t>::min(), 0, -(int64_t{1} << 61)}}, 4, true);
}

TEST_CASE("sumDivide and divide on float types round once") {
  // float32 1/3 = 0x3EAAAAAB; float16 1/3 = 0x3555; bfloat16 1/3 = 0x3EAB.
  expectKernel<uint32_t>(
      DataType::kFloat32, RedOp::kAvg,
      {{f32(1.0f), f32(2.0f), f32(1.0f)}, {f32(1.0f), 0, 0x3EAAAAAB}, {f32(-1.0f), f32(-2.0f), f32(-1.0f)}}, 3);
  expectKernel<uint64_t>(DataType::kFloat64, RedOp::kAvg,
                         {{0xBFF0000000000000, 0, 0xBFD0000000000000},
                          {0x3FF0000000000000, 0x3FF0000000000000, 0x3FE0000000000000}},
                         4);
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kAvg,
                         {{0x3C00, 0x4000, 0x3C00}, {0x3C00, 0, 0x3555}, {0x8000, 0x8000, 0x8000}}, 3);
  expectKernel<uint16_t>(DataType::kBfloat16, RedOp::kAvg, {{0x3F80, 0x4000, 0x3F80}, {0x3F80, 0, 0x3EAB}}, 3);
  // Rounded once: 65504 + 65504 overflows float16 but not the float32 accumulator; / 2 is 65504.
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kAvg, {{0x7BFF, 0x7BFF, 0x7BFF}}, 2);
  expectKernel<uint16_t>(DataType::kFloat16, RedOp::kAvg, {{0x8000, 0, 0x8000}, {0xBC00, 0, 0xB400}}, 4, true);
  expectKernel<uint32_t>(DataType::kFloat32, RedOp::kAvg, {{f32(-0.0f), 0, f32(-0.0f)}, {f32(6.0f), 0, f32(1.5f)}}, 4,
                         true);
}

/// Rank r's element i for the bitwise closed forms: a pattern of i shared by every rank in the bits
/// above the low four (the sign bit included), and bit r, which only rank r sets.
template <typename T>
T bitwiseFill(int r, size_t i) {
  using U = std::make_unsigned_t<T>;
  const U shared = static_cast<U>(static_cast<U>((i + 1) * 0x9E3779B97F4A7C15ull) & static_cast<U>(~U{0xF}));
  return static_cast<T>(static_cast<U>(shared | static_cast<U>(1u << r)));
}

/// Folds n ranks' fills left to right with reduce(op), in place and out of place, on every
/// instruction set, and compares with the closed form: shared bits s, own bits m = 2^n - 1:
/// band = s (each own bit is missing from n - 1 ranks), bor = s | m, bxor = (n odd ? s : 0) | m.
template <typename T>
void expectBitwise(DataType type) {
  using U = std::make_unsigned_t<T>;
  const Isa restore = activeIsa();
  for (Isa isa : kIsas) {
    if (!setIsa(isa)) continue;
    for (int n = 2; n <= 4; ++n) {
      const U own = static_cast<U>((1u << n) - 1);
      for (RedOp op : {RedOp::kBand, RedOp::kBor, RedOp::kBxor}) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          std::vector<T> acc(kCaseLength), next(kCaseLength), out(kCaseLength);
          for (size_t i = 0; i < kCaseLength; ++i) acc[i] = bitwiseFill<T>(0, i);
          for (int r = 1; r < n; ++r) {
            for (size_t i = 0; i < kCaseLength; ++i) next[i] = bitwiseFill<T>(r, i);
            T* dst = inPlace ? acc.data() : out.data();
            reduce(type, op, dst, acc.data(), next.data(), kCaseLength);
            if (!inPlace) acc = out;
          }
          size_t wrong = 0;
          for (size_t i = 0; i < kCaseLength; ++i) {
            const U shared = static_cast<U>(static_cast<U>(bitwiseFill<T>(0, i)) & static_cast<U>(~own));
            const U want = op == RedOp::kBand  ? shared
                           : op == RedOp::kBor ? static_cast<U>(shared | own)
                                               : static_cast<U>((n % 2 == 1 ? shared : U{0}) | own);
            wrong += static_cast<U>(acc[i]) != want ? 1 : 0;
          }
          INFO(isaName(isa) << " " << dataTypeName(type) << " " << redOpName(op) << " over " << n << " ranks"
                            << (inPlace ? " in place" : ""));
          CHECK(wrong == 0);
        }
      }
    }
  }
  setIsa(restore);
}

TEST_CASE("band, bor and bxor over 2-4 ranks match the closed form for every integer type") {
  expectBitwise<int8_t>(DataType::kInt8);
  expectBitwise<uint8_t>(DataType::kUint8);
  expectBitwise<int32_t>(DataType::kInt32);
  expectBitwise<uint32_t>(DataType::kUint32);
  expectBitwise<int64_t>(DataType::kInt64);
  expectBitwise<uint64_t>(DataType::kUint64);
}

TEST_CASE("the bitwise ops have no kernel for floating-point types") {
  // Callers refuse these pairs (checkCall); the dispatcher does nothing rather than reinterpret bits.
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    if (!isFloatingPoint(type)) continue;
    for (RedOp op : {RedOp::kBand, RedOp::kBor, RedOp::kBxor}) {
      uint64_t a[4] = {~0ull, ~0ull, ~0ull, ~0ull}, b[4] = {1, 2, 3, 4}, dst[4] = {7, 7, 7, 7};
      reduce(type, op, dst, a, b, 32 / dataTypeSize(type));
      INFO(dataTypeName(type) << " " << redOpName(op));
      CHECK((dst[0] == 7 && dst[1] == 7 && dst[2] == 7 && dst[3] == 7));
    }
  }
}

}  // namespace
}  // namespace ferry::kernels::test
