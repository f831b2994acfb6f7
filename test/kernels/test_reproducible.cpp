// The reproducible mode's conversions (kernels/host/reproducible.hpp): the one rounding of an
// integer sum equals a single rounding by the hardware of the exact value (held in long double,
// whose 64-bit significand holds every lane), subnormal and overflowing results included; and a
// lone rank's value comes back unchanged through the grid.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/host/reduce.hpp"
#include "kernels/host/reproducible.hpp"

using namespace ferry;
using namespace ferry::kernels;

namespace {

static_assert(LDBL_MANT_DIG >= 64, "the references need a 64-bit long double significand");

// Lane sums of up to `magnitudeBits` bits with random codes; expected: the exact value
// K * 2^(s - shift) rounded once by a cast from long double.
template <typename T, typename Code>
void checkRounding(DataType type, int ranks, bool avg, int bias, int maxCode, int magnitudeBits) {
  const ReproLanes lanes = reproLanes(type, ranks);
  std::mt19937_64 rng(42 + static_cast<int>(type) * 8 + ranks);
  const size_t n = 200000;
  std::vector<int64_t> k64(n);
  std::vector<int32_t> k32(n);
  std::vector<Code> codes(n);
  std::vector<T> got(n);
  for (size_t i = 0; i < n; ++i) {
    const int width = 1 + static_cast<int>(rng() % magnitudeBits);
    int64_t k = static_cast<int64_t>(rng() >> (64 - width));
    if (rng() & 1) k = -k;
    k64[i] = k;
    k32[i] = static_cast<int32_t>(k);
    codes[i] = static_cast<Code>(1 + rng() % (maxCode - 1));  // 1 .. maxCode - 1: finite
  }
  const void* in = lanes.bits == 32 ? static_cast<const void*>(k32.data()) : k64.data();
  reproFromLanes(type, lanes, in, codes.data(), n, ranks, avg, got.data());
  // Dividing by 3 in long double is safe: the quotient's bits repeat 01, so no rounding to 64 bits
  // lands on a midpoint of a narrower type.
  const bool power = (ranks & (ranks - 1)) == 0;
  const int shift = avg && power ? __builtin_ctz(static_cast<unsigned>(ranks)) : 0;
  for (size_t i = 0; i < n; ++i) {
    const int s = static_cast<int>(codes[i]) - bias + 1 + lanes.headroom - lanes.precision - shift;
    long double exact = std::ldexp(static_cast<long double>(k64[i]), s);
    if (avg && !power) exact /= ranks;
    const T want = static_cast<T>(exact);
    if (std::memcmp(&want, &got[i], sizeof(T)) != 0) {
      INFO("lane " << k64[i] << ", code " << static_cast<int>(codes[i]) << ", 2^" << s << ": got " << got[i]
                   << ", expected " << want);
      REQUIRE(false);
    }
  }
}

}  // namespace

TEST_CASE("reproducible: one rounding of the lane sum, as the hardware rounds the exact value", "[kernels]") {
  SECTION("float32 sums, int64 lanes (2 ranks)") {
    checkRounding<float, uint8_t>(DataType::kFloat32, 2, false, 127, 255, 51);
  }
  SECTION("float32 sums, int32 lanes (4 ranks)") {
    checkRounding<float, uint8_t>(DataType::kFloat32, 4, false, 127, 255, 30);
  }
  SECTION("float32 averages of 4 ranks") { checkRounding<float, uint8_t>(DataType::kFloat32, 4, true, 127, 255, 30); }
  SECTION("float32 averages of 3 ranks") { checkRounding<float, uint8_t>(DataType::kFloat32, 3, true, 127, 255, 29); }
  SECTION("float64 averages of 3 ranks") {
    checkRounding<double, int32_t>(DataType::kFloat64, 3, true, 1023, 2047, 60);
  }
  SECTION("float64 sums (3 ranks)") { checkRounding<double, int32_t>(DataType::kFloat64, 3, false, 1023, 2047, 60); }
  SECTION("float64 averages of 8 ranks") {
    checkRounding<double, int32_t>(DataType::kFloat64, 8, true, 1023, 2047, 58);
  }
}

TEST_CASE("reproducible: a lone rank's finite values come back unchanged", "[kernels]") {
  std::mt19937_64 rng(7);
  const size_t n = 100000;
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    INFO(dataTypeName(type));
    const size_t size = dataTypeSize(type);
    const int expBits = type == DataType::kFloat16 ? 5 : type == DataType::kFloat64 ? 11 : 8;
    const int mantBits = static_cast<int>(size) * 8 - 1 - expBits;
    std::vector<uint8_t> in(n * size), out(n * size), codes(n * 4);
    std::vector<int64_t> lanes(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t bits = rng();
      const uint64_t field = (bits >> mantBits) & ((uint64_t{1} << expBits) - 1);
      if (field == (uint64_t{1} << expBits) - 1) bits ^= uint64_t{1} << mantBits;  // keep it finite
      if ((bits & ((uint64_t{1} << (mantBits + expBits)) - 1)) == 0) bits = 1;     // zeros come back as +0
      std::memcpy(in.data() + i * size, &bits, size);
    }
    const ReproLanes l = reproLanes(type, 1);
    reproCodes(type, in.data(), n, codes.data());
    reproToLanes(type, l, in.data(), codes.data(), n, lanes.data());
    reproFromLanes(type, l, lanes.data(), codes.data(), n, 1, false, out.data());
    size_t differing = 0;
    for (size_t i = 0; i < n; ++i) differing += std::memcmp(in.data() + i * size, out.data() + i * size, size) != 0;
    CHECK(differing == 0);
  }
}

TEST_CASE("reproducible: one rank's reduction of every row gives the integer form's bits", "[kernels]") {
  // Random bits: every code and NaNs, with infinities, zeros and subnormals of both signs mixed in;
  // half the elements draw their exponents from a narrow band, so that sums cancel.
  std::mt19937_64 rng(11);
  const size_t n = 3000;  // not a multiple of reproReduceRows' block
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    for (int ranks : {2, 3, 4, 5, 33}) {
      for (bool avg : {false, true}) {
        INFO(dataTypeName(type) << ", " << ranks << " ranks, " << (avg ? "avg" : "sum"));
        const size_t size = dataTypeSize(type);
        const int expBits = type == DataType::kFloat16 ? 5 : type == DataType::kFloat64 ? 11 : 8;
        const int mantBits = static_cast<int>(size) * 8 - 1 - expBits;
        std::vector<uint8_t> rows(ranks * n * size);
        for (size_t e = 0; e < ranks * n; ++e) {
          uint64_t bits = rng();
          if ((e % n) % 2 == 0) {  // exponent field near the middle of the range
            const uint64_t mid = (uint64_t{1} << (expBits - 1)) + rng() % 3;
            bits = (bits & ~(((uint64_t{1} << expBits) - 1) << mantBits)) | (mid << mantBits);
          }
          const uint64_t field = ((uint64_t{1} << expBits) - 1) << mantBits;
          const uint64_t sign = uint64_t{1} << (mantBits + expBits);
          switch (rng() % 16) {  // infinities of both signs, zeros of both signs, subnormals
            case 0: bits = field; break;
            case 1: bits = field | sign; break;
            case 2: bits &= sign; break;
            case 3: bits &= ~field; break;
            default: break;
          }
          std::memcpy(rows.data() + e * size, &bits, size);
        }
        // The integer form, as the collectives run it: codes per rank, max, lanes per rank, sum.
        const ReproLanes l = reproLanes(type, ranks);
        const size_t codeSize = type == DataType::kFloat64 ? 4 : 1;
        std::vector<uint8_t> codes(n * codeSize), rowCodes(n * codeSize), want(n * size), got(n * size);
        std::vector<int64_t> sum64(n), lane64(n);
        std::vector<int32_t> sum32(n), lane32(n);
        for (int j = 0; j < ranks; ++j) {
          reproCodes(type, rows.data() + j * n * size, n, rowCodes.data());
          for (size_t i = 0; i < n; ++i) {
            if (codeSize == 4) {
              int32_t a, b;
              std::memcpy(&a, codes.data() + i * 4, 4);
              std::memcpy(&b, rowCodes.data() + i * 4, 4);
              a = std::max(a, b);
              std::memcpy(codes.data() + i * 4, &a, 4);
            } else {
              codes[i] = std::max(codes[i], rowCodes[i]);
            }
          }
        }
        for (int j = 0; j < ranks; ++j) {
          if (l.bits == 32) {
            reproToLanes(type, l, rows.data() + j * n * size, codes.data(), n, lane32.data());
            for (size_t i = 0; i < n; ++i) sum32[i] += lane32[i];
          } else {
            reproToLanes(type, l, rows.data() + j * n * size, codes.data(), n, lane64.data());
            for (size_t i = 0; i < n; ++i) sum64[i] += lane64[i];
          }
        }
        const void* sums = l.bits == 32 ? static_cast<const void*>(sum32.data()) : sum64.data();
        reproFromLanes(type, l, sums, codes.data(), n, ranks, avg, want.data());
        const Isa before = activeIsa();
        for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
          if (!setIsa(isa)) continue;
          INFO(isaName(isa));
          reproReduceRows(type, l, rows.data(), n, ranks, n, avg, got.data());
          size_t differing = 0;
          for (size_t i = 0; i < n; ++i) {
            differing += std::memcmp(want.data() + i * size, got.data() + i * size, size) != 0;
          }
          CHECK(differing == 0);
          // As a list of rows in another order, the result written over the first of them (the
          // pipelined form's in-place reduce-scatter).
          std::vector<uint8_t> copy = rows;
          std::vector<const void*> list(ranks);
          for (int j = 0; j < ranks; ++j) list[j] = copy.data() + ((j + 1) % ranks) * n * size;
          uint8_t* over = copy.data() + (1 % ranks) * n * size;
          reproReduceRowList(type, l, list.data(), ranks, n, avg, over);
          differing = 0;
          for (size_t i = 0; i < n; ++i) differing += std::memcmp(want.data() + i * size, over + i * size, size) != 0;
          CHECK(differing == 0);
        }
        setIsa(before);
      }
    }
  }
}
