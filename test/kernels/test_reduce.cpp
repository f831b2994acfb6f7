// Sweep of the host reduction kernels against the scalar reference, bit for bit.
//
// For every instruction set this CPU supports, every data type and op, and lengths chosen around
// every vector width (0..3, 2^k - 1, 2^k, 2^k + 1, and a few large odd sizes), each kernel runs in
// four layouts: separate buffers, buffers misaligned by one/two/three elements, dst == a, dst == b.
// Inputs are random bit patterns mixed with small exact values and specials (zeros, infinities,
// NaNs, subnormals, integer extremes), so overflow, wrap-around and NaN propagation all occur. A
// guard region after dst must stay untouched (the vector tails must not write past count).
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/host/reduce.hpp"
#include "test/kernels/reference.hpp"

namespace ferry::kernels::test {
namespace {

constexpr size_t kLengths[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1000, 1023, 4099};
constexpr uint32_t kDivisors[] = {1, 2, 3, 7, 128, 255, 256, 1000, 65537, 0xFFFFFFFFu};
constexpr Isa kIsas[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};
constexpr unsigned char kGuard = 0xA5;

/// The instruction set the dispatcher picks by itself, restored after each sweep.
Isa widestSupported() {
  return isaSupported(Isa::kAvx512) ? Isa::kAvx512 : isaSupported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kBaseline;
}

/// A 64-byte aligned byte buffer.
struct alignas(64) Line {
  unsigned char bytes[64];
};
class Buffer {
 public:
  explicit Buffer(size_t bytes) : lines_((bytes + 63) / 64 + 1) {}
  unsigned char* data() { return lines_.data()->bytes; }

 private:
  std::vector<Line> lines_;
};

bool isNan(DataType type, const unsigned char* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, dataTypeSize(type));
  switch (type) {
    case DataType::kFloat16: return (bits & 0x7FFF) > 0x7C00;
    case DataType::kBfloat16: return (bits & 0x7FFF) > 0x7F80;
    case DataType::kFloat8e4m3: return (bits & 0x7F) == 0x7F;
    case DataType::kFloat8e5m2: return (bits & 0x7F) > 0x7C;
    case DataType::kFloat32: return (bits & 0x7FFFFFFF) > 0x7F800000;
    case DataType::kFloat64: return (bits & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000;
    default: return false;
  }
}

/// One random element of `type` into p.
void randomElement(DataType type, std::mt19937_64& rng, unsigned char* p) {
  const uint64_t r = rng();
  const unsigned pick = static_cast<unsigned>(r % 16);
  const int small = static_cast<int>((r >> 8) % 201) - 100;  // exact in every type
  const size_t es = dataTypeSize(type);
  uint64_t bits = rng();
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      const HalfFormat fmt = type == DataType::kFloat16 ? kF16 : kBf16;
      static const uint16_t kSpecialF16[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7D01, 0x0001, 0x83FF, 0x7BFF};
      static const uint16_t kSpecialBf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0001, 0x807F, 0x7F7F};
      if (pick < 6) bits = refEncode(static_cast<float>(small) / 4.0f, fmt);
      if (pick == 6) bits = (type == DataType::kFloat16 ? kSpecialF16 : kSpecialBf16)[(r >> 20) % 9];
      break;
    }
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: {
      // Random bytes cover every pattern often; add small exact values (sums that tie and saturate).
      const Fp8Format fmt = type == DataType::kFloat8e4m3 ? kE4m3 : kE5m2;
      if (pick < 6) bits = refEncode8(static_cast<float>(small % 33) / 4.0f, fmt);
      break;
    }
    case DataType::kFloat32: {
      static const uint32_t kSpecial[] = {0x0,        0x80000000, 0x7F800000, 0xFF800000,
                                          0x7FC00000, 0x7F800001, 0x1,        0x7F7FFFFF};
      if (pick < 8) bits = floatBits(static_cast<float>(small) / 8.0f);
      if (pick == 8) bits = kSpecial[(r >> 20) % 8];
      break;
    }
    case DataType::kFloat64: {
      static const uint64_t kSpecial[] = {
          0x0, 1ull << 63,        0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001,
          0x1, 0x7FEFFFFFFFFFFFFF};
      const double v = static_cast<double>(small) / 8.0;
      if (pick < 8) std::memcpy(&bits, &v, 8);
      if (pick == 8) bits = kSpecial[(r >> 20) % 8];
      break;
    }
    default: {
      // Integers: mostly random bits, then small values and the extremes of the type.
      const uint64_t top = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
      const uint64_t kSpecial[] = {0, 1, top, top >> 1, (top >> 1) + 1};
      if (pick < 4) bits = static_cast<uint64_t>(static_cast<int64_t>(small));
      if (pick == 4) bits = kSpecial[(r >> 20) % 5];
      break;
    }
  }
  std::memcpy(p, &bits, es);
}

/// First mismatching element of got vs want as a message; empty when equal.
std::string firstMismatch(DataType type, const unsigned char* got, const unsigned char* want, const unsigned char* a,
                          const unsigned char* b, size_t n) {
  const size_t es = dataTypeSize(type);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(got + i * es, want + i * es, es) != 0) {
      uint64_t g = 0, w = 0, x = 0, y = 0;
      std::memcpy(&g, got + i * es, es);
      std::memcpy(&w, want + i * es, es);
      std::memcpy(&x, a + i * es, es);
      if (b != nullptr) std::memcpy(&y, b + i * es, es);
      char line[160];
      std::snprintf(line, sizeof line, "element %zu: a=%#llx b=%#llx got %#llx want %#llx", i,
                    static_cast<unsigned long long>(x), static_cast<unsigned long long>(y),
                    static_cast<unsigned long long>(g), static_cast<unsigned long long>(w));
      return line;
    }
  }
  return {};
}

/// Runs one kernel call in four layouts and checks each against `want`. op == kAvg: sumDivide
/// (or divide when unary).
void checkLayouts(DataType type, RedOp op, bool unary, uint32_t d, size_t n, const unsigned char* a,
                  const unsigned char* b, const unsigned char* want) {
  const size_t es = dataTypeSize(type);
  const size_t bytes = n * es;
  auto call = [&](unsigned char* dst, const unsigned char* x, const unsigned char* y) {
    if (op != RedOp::kAvg) reduce(type, op, dst, x, y, n);
    else if (unary) divide(type, dst, x, n, d);
    else sumDivide(type, dst, x, y, n, d);
  };
  const size_t layouts = unary ? 3 : 4;
  for (size_t layout = 0; layout < layouts; ++layout) {
    Buffer ba(bytes + 8 * es), bb(bytes + 8 * es), bd(bytes + 8 * es);
    // Layout 1 misaligns every buffer differently; 2 and 3 alias dst with a or b.
    unsigned char* pa = ba.data() + (layout == 1 ? 1 * es : 0);
    unsigned char* pb = bb.data() + (layout == 1 ? 2 * es : 0);
    unsigned char* pd = bd.data() + (layout == 1 ? 3 * es : 0);
    std::memset(bd.data(), kGuard, bytes + 8 * es);
    if (bytes != 0) {
      std::memcpy(pa, a, bytes);
      std::memcpy(pb, b, bytes);
    }
    if (layout == 2) pd = pa;
    if (layout == 3) pd = pb;
    call(pd, pa, pb);
    INFO("layout " << layout << " (0 separate, 1 misaligned, 2 dst==a, 3 dst==b), n=" << n << ", divisor " << d);
    CHECK(firstMismatch(type, pd, want, a, unary ? nullptr : b, n) == "");
    if (layout < 2) {
      bool guardOk = true;
      for (size_t i = 0; i < 4 * es; ++i) guardOk = guardOk && pd[bytes + i] == kGuard;
      CHECK(guardOk);
    }
  }
}

/// Random inputs a, b of n elements. Unless NaNs are the point (max/min), no lane has two NaNs:
/// which payload x86 keeps then depends on operand order, which the contract leaves open.
void makeInputs(DataType type, bool bothNanAllowed, size_t n, std::mt19937_64& rng, std::vector<unsigned char>& a,
                std::vector<unsigned char>& b) {
  const size_t es = dataTypeSize(type);
  a.assign(n * es, 0);
  b.assign(n * es, 0);
  for (size_t i = 0; i < n; ++i) {
    randomElement(type, rng, &a[i * es]);
    randomElement(type, rng, &b[i * es]);
    if (!bothNanAllowed && isNan(type, &a[i * es]) && isNan(type, &b[i * es])) std::memset(&b[i * es], 0, es);
  }
}

TEST_CASE("isa names and selection") {
  CHECK(std::string(isaName(Isa::kBaseline)) == "x86-64");
  CHECK(std::string(isaName(Isa::kAvx2)) == "avx2");
  CHECK(std::string(isaName(Isa::kAvx512)) == "avx512");
  CHECK(isaSupported(Isa::kBaseline));
  const Isa initial = activeIsa();
  CHECK(isaSupported(initial));
  CHECK(initial == widestSupported());
  for (Isa isa : kIsas) {
    const Isa before = activeIsa();
    CHECK(setIsa(isa) == isaSupported(isa));
    CHECK(activeIsa() == (isaSupported(isa) ? isa : before));
  }
  std::printf("host kernels: detected %s; supported:", isaName(initial));
  for (Isa isa : kIsas) std::printf(" %s=%s", isaName(isa), isaSupported(isa) ? "yes" : "no");
  std::printf("\n");
  REQUIRE(setIsa(initial));
}

TEST_CASE("reduce matches the reference for every isa, type, op and length") {
  std::mt19937_64 rng(12345);
  std::vector<unsigned char> a, b, want;
  for (Isa isa : kIsas) {
    if (!setIsa(isa)) continue;
    for (int t = 0; t < kNumDataTypes; ++t) {
      const DataType type = static_cast<DataType>(t);
      for (int o = 0; o < kNumRedOps; ++o) {
        const RedOp op = static_cast<RedOp>(o);
        if (op == RedOp::kAvg || !redOpDefinedFor(op, type)) continue;  // avg: the sumDivide sweep below
        for (size_t n : kLengths) {
          INFO(isaName(isa) << " " << dataTypeName(type) << " " << redOpName(op));
          makeInputs(type, op == RedOp::kMax || op == RedOp::kMin, n, rng, a, b);
          want.assign(n * dataTypeSize(type), 0);
          refRun(type, op, want.data(), a.data(), b.data(), n);
          checkLayouts(type, op, false, 0, n, a.data(), b.data(), want.data());
        }
      }
    }
  }
  REQUIRE(setIsa(widestSupported()));
}

TEST_CASE("sumDivide and divide match the reference for every isa, type, length and divisor") {
  std::mt19937_64 rng(54321);
  std::vector<unsigned char> a, b, want;
  for (Isa isa : kIsas) {
    if (!setIsa(isa)) continue;
    for (int t = 0; t < kNumDataTypes; ++t) {
      const DataType type = static_cast<DataType>(t);
      for (uint32_t d : kDivisors) {
        for (size_t n : kLengths) {
          INFO(isaName(isa) << " " << dataTypeName(type));
          makeInputs(type, false, n, rng, a, b);
          want.assign(n * dataTypeSize(type), 0);
          refRun(type, RedOp::kAvg, want.data(), a.data(), b.data(), n, d);
          checkLayouts(type, RedOp::kAvg, false, d, n, a.data(), b.data(), want.data());
          refRun(type, RedOp::kAvg, want.data(), a.data(), nullptr, n, d);
          checkLayouts(type, RedOp::kAvg, true, d, n, a.data(), a.data(), want.data());
        }
      }
    }
  }
  REQUIRE(setIsa(widestSupported()));
}

}  // namespace
}  // namespace ferry::kernels::test
