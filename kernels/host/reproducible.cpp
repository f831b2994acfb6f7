// The reproducible mode's conversions (reproducible.hpp). Scalar loops over tables the compiler can
// vectorise; the one rounding is done on the integer bits (roundBits) wherever a float operation
// could round twice.
#include "kernels/host/reproducible.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/host/half.hpp"
#include "kernels/host/reduce.hpp"
#include "kernels/host/repro_rows.hpp"

namespace ferry::kernels {
namespace {

// An IEEE binary format: precision (with the hidden bit), exponent bias and field width.
struct Format {
  int precision;
  int bias;
  int expBits;
  int totalBits;
  int nonFinite() const { return (1 << expBits) - 1; }
};

constexpr Format kFloat16{11, 15, 5, 16};
constexpr Format kBfloat16{8, 127, 8, 16};
constexpr Format kFloat32{24, 127, 8, 32};
constexpr Format kFloat64{53, 1023, 11, 64};
constexpr int kMaxCodes = 2048;

const Format& formatOf(DataType type) {
  switch (type) {
    case DataType::kFloat16: return kFloat16;
    case DataType::kBfloat16: return kBfloat16;
    case DataType::kFloat32: return kFloat32;
    default: return kFloat64;
  }
}

// Count fields of a non-finite element's lane: NaNs << 2F | +infinities << F | -infinities.
constexpr int countBits(int laneBits) { return laneBits == 32 ? 10 : 20; }

int ceilLog2(int n) {
  int c = 0;
  while ((1LL << c) < n) ++c;
  return c;
}

// The grid exponent s of every finite code (lanes hold round(x / 2^s)): 2^hi, hi = code - bias + 1,
// bounds |x| strictly.
void gridExponents(const Format& f, const ReproLanes& l, int* s) {
  for (int c = 0; c < f.nonFinite(); ++c) s[c] = std::max(c, 1) - f.bias + 1 + l.headroom - l.precision;
}

// Round to nearest integer, ties to even, for |v| < 2^62 (the current rounding mode is the default).
inline double roundNearestEven(double v) {
  // Adding 1.5 * 2^52 leaves no fraction bits below 2^51; above, v is already an integer.
  const double r = (v + 0x1.8p52) - 0x1.8p52;
  return std::fabs(v) < 0x1p51 ? r : v;
}

double loadValue(DataType type, const void* in, size_t i) {
  switch (type) {
    case DataType::kFloat16: return halfToFloat(static_cast<const uint16_t*>(in)[i]);
    case DataType::kBfloat16: return bfloat16ToFloat(static_cast<const uint16_t*>(in)[i]);
    case DataType::kFloat32: return static_cast<const float*>(in)[i];
    default: return static_cast<const double*>(in)[i];
  }
}

uint64_t loadBits(DataType type, const void* in, size_t i) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: return static_cast<const uint16_t*>(in)[i];
    case DataType::kFloat32: {
      uint32_t b;
      std::memcpy(&b, static_cast<const float*>(in) + i, 4);
      return b;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, static_cast<const double*>(in) + i, 8);
      return b;
    }
  }
}

void storeBits(DataType type, void* out, size_t i, uint64_t bits) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(bits); break;
    case DataType::kFloat32: {
      const auto b = static_cast<uint32_t>(bits);
      std::memcpy(static_cast<float*>(out) + i, &b, 4);
      break;
    }
    default: std::memcpy(static_cast<double*>(out) + i, &bits, 8);
  }
}

uint64_t infinityBits(const Format& f, bool negative) {
  const uint64_t sign = negative ? uint64_t{1} << (f.totalBits - 1) : 0;
  return sign | (((uint64_t{1} << f.expBits) - 1) << (f.precision - 1));
}

uint64_t quietNanBits(const Format& f) { return infinityBits(f, false) | (uint64_t{1} << (f.precision - 2)); }

// The bits of (m + sticky * t) * 2^e rounded to nearest, ties to even, in format f, for some
// 0 < t < 1 when `sticky` (a remainder the division dropped). A sticky remainder needs m to carry
// at least two bits below the result's last place, which callers guarantee.
uint64_t roundBits(const Format& f, bool negative, uint64_t m, bool sticky, int e) {
  const uint64_t sign = negative ? uint64_t{1} << (f.totalBits - 1) : 0;
  if (m == 0) return 0;
  const int p = f.precision;
  const int emin = 1 - f.bias;
  const int top = 63 - std::countl_zero(m) + e;  // exponent of the leading bit
  int lsb = std::max(top, emin) - (p - 1);       // exponent of the result's last place
  const int shift = lsb - e;
  uint64_t mant;
  if (shift <= 0) {
    mant = m << -shift;  // exact; a sticky remainder is then below half the last place
  } else if (shift > 64) {
    mant = 0;  // below half the smallest subnormal
  } else {
    mant = shift == 64 ? 0 : m >> shift;
    const uint64_t rest = shift == 64 ? m : m & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (sticky || (mant & 1) != 0))) ++mant;
  }
  if ((mant >> p) != 0) {  // rounding carried into the next binade
    mant >>= 1;
    ++lsb;
  }
  if (mant < (uint64_t{1} << (p - 1))) return sign | mant;  // subnormal (or zero)
  const int biased = lsb + (p - 1) + f.bias;
  if (biased >= (1 << f.expBits) - 1) return infinityBits(f, negative);
  return sign | (static_cast<uint64_t>(biased) << (p - 1)) | (mant & ((uint64_t{1} << (p - 1)) - 1));
}

// Bits of sum / ranks for a lane sum of magnitude a on grid exponent s: divided exactly, the
// remainder kept as a sticky bit, at least 64 quotient bits before rounding.
uint64_t averageBits(const Format& f, bool negative, uint64_t a, int s, int ranks) {
  if ((ranks & (ranks - 1)) == 0) return roundBits(f, negative, a, false, s - std::countr_zero(unsigned(ranks)));
  const unsigned __int128 num = static_cast<unsigned __int128>(a) << 64;
  unsigned __int128 q = num / static_cast<unsigned>(ranks);
  bool sticky = num % static_cast<unsigned>(ranks) != 0;
  int e = s - 64;
  const auto high = static_cast<uint64_t>(q >> 64);
  if (high != 0) {
    const int z = 64 - std::countl_zero(high);
    sticky = sticky || (q & ((static_cast<unsigned __int128>(1) << z) - 1)) != 0;
    q >>= z;
    e += z;
  }
  return roundBits(f, negative, static_cast<uint64_t>(q), sticky, e);
}

// One non-finite element's result from its count fields.
uint64_t nonFiniteBits(const Format& f, uint64_t counts, int laneBits) {
  const int cb = countBits(laneBits);
  const uint64_t mask = (uint64_t{1} << cb) - 1;
  const uint64_t nans = counts >> (2 * cb), pos = (counts >> cb) & mask, neg = counts & mask;
  if (nans != 0 || (pos != 0 && neg != 0)) return quietNanBits(f);
  return infinityBits(f, pos == 0);
}

// 1.5 * 2^52: adding it to |d| < 2^51 rounds d to an integer (nearest, ties to even) held in the
// low mantissa bits, so the integer is the bit pattern's difference from the constant's.
constexpr double kMagic = 0x1.8p52;
const int64_t kMagicBits = std::bit_cast<int64_t>(kMagic);

// A non-finite element's lane from its value: one count in the field of its kind.
template <typename Lane>
Lane nonFiniteLane(double x, int cb) {
  if (std::isnan(x)) return Lane{1} << (2 * cb);
  if (std::isinf(x)) return x > 0 ? Lane{1} << cb : Lane{1};
  return 0;
}

// float32 to lanes without branches or tables, so the loop vectorises: 2^-s built from the code's
// bits, the rounding done by kMagic. Non-finite elements are patched in a second, rare pass.
template <typename Lane>
void float32ToLanes(const ReproLanes& l, const float* in, const uint8_t* codes, size_t count, Lane* out) {
  // The double exponent field of 2^-s = 2^(precision - headroom - code + bias - 1).
  const int64_t field = 1023 + l.precision - l.headroom - 1 + kFloat32.bias;
  for (size_t i = 0; i < count; ++i) {
    const double scale = std::bit_cast<double>(static_cast<uint64_t>(field - codes[i]) << 52);
    const double d = static_cast<double>(in[i]) * scale + kMagic;
    out[i] = static_cast<Lane>(std::bit_cast<int64_t>(d) - kMagicBits);
  }
  for (size_t i = 0; i < count; ++i) {
    if (codes[i] == kFloat32.nonFinite()) out[i] = nonFiniteLane<Lane>(in[i], countBits(l.bits));
  }
}

// float32 sums from lanes: |sum| < 2^51 converts to double exactly by kMagic, the scaling by 2^s is
// exact, and the conversion to float rounds once.
template <typename Lane>
void float32FromLanes(const ReproLanes& l, const Lane* in, const uint8_t* codes, size_t count, float* out) {
  // The double exponent field of 2^s = 2^(code - bias + 1 + headroom - precision).
  const int64_t field = 1023 - kFloat32.bias + 1 + l.headroom - l.precision;
  for (size_t i = 0; i < count; ++i) {
    const double sum = std::bit_cast<double>(kMagicBits + static_cast<int64_t>(in[i])) - kMagic;
    const double scale = std::bit_cast<double>(static_cast<uint64_t>(field + codes[i]) << 52);
    out[i] = static_cast<float>(sum * scale);
  }
  for (size_t i = 0; i < count; ++i) {
    if (codes[i] == kFloat32.nonFinite()) {
      out[i] =
          std::bit_cast<float>(static_cast<uint32_t>(nonFiniteBits(kFloat32, static_cast<uint64_t>(in[i]), l.bits)));
    }
  }
}

template <typename Lane, typename Code>
void toLanes(DataType type, const ReproLanes& l, const void* in, const Code* codes, size_t count, Lane* out) {
  const Format& f = formatOf(type);
  const int nonFinite = f.nonFinite();
  int s[kMaxCodes];
  gridExponents(f, l, s);
  const int cb = countBits(l.bits);
  if (type == DataType::kFloat32 && l.precision <= 52) {
    float32ToLanes(l, static_cast<const float*>(in), reinterpret_cast<const uint8_t*>(codes), count, out);
    return;
  }
  if (type != DataType::kFloat64) {
    // |x| / 2^s < 2^precision <= 2^52 and x has at most 24 bits: the product is exact in double.
    double scale[256];
    for (int c = 0; c < nonFinite; ++c) scale[c] = std::ldexp(1.0, -s[c]);
    for (size_t i = 0; i < count; ++i) {
      const double x = loadValue(type, in, i);
      if (codes[i] == nonFinite) {
        out[i] = std::isnan(x) ? Lane{1} << (2 * cb) : std::isinf(x) ? (x > 0 ? Lane{1} << cb : Lane{1}) : Lane{0};
        continue;
      }
      out[i] = static_cast<Lane>(roundNearestEven(x * scale[codes[i]]));
    }
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const double x = static_cast<const double*>(in)[i];
    if (codes[i] == nonFinite) {
      out[i] = std::isnan(x) ? Lane{1} << (2 * cb) : std::isinf(x) ? (x > 0 ? Lane{1} << cb : Lane{1}) : Lane{0};
      continue;
    }
    // ldexp is exact unless the result is subnormal, and then far below one half: it rounds to 0.
    out[i] = static_cast<Lane>(roundNearestEven(std::ldexp(x, -s[codes[i]])));
  }
}

template <typename Lane, typename Code>
void fromLanes(DataType type, const ReproLanes& l, const Lane* in, const Code* codes, size_t count, int ranks, bool avg,
               void* out) {
  const Format& f = formatOf(type);
  const int nonFinite = f.nonFinite();
  int s[kMaxCodes];
  gridExponents(f, l, s);
  if (type == DataType::kFloat32 && !avg && l.precision <= 52) {
    float32FromLanes(l, in, reinterpret_cast<const uint8_t*>(codes), count, static_cast<float*>(out));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const Lane v = in[i];
    if (codes[i] == nonFinite) {
      storeBits(type, out, i, nonFiniteBits(f, static_cast<uint64_t>(v), l.bits));
      continue;
    }
    const bool negative = v < 0;
    const uint64_t a = negative ? uint64_t{0} - static_cast<uint64_t>(static_cast<int64_t>(v))
                                : static_cast<uint64_t>(static_cast<int64_t>(v));
    const int e = s[codes[i]];
    storeBits(type, out, i, avg ? averageBits(f, negative, a, e, ranks) : roundBits(f, negative, a, false, e));
  }
}

}  // namespace

bool reproSupports(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

ReproLanes reproLanes(DataType type, int ranks) {
  ReproLanes l;
  l.headroom = ceilLog2(std::max(ranks, 1)) + 1;
  if (type == DataType::kFloat64) return l;  // int64, 62 bits
  // An int32 lane pre-rounds each value by at most 2^(h - 31) of the largest one; the float32 ring
  // errs by up to (n - 1) roundings of 2^-24 of the sum of magnitudes, one of them the final
  // rounding a float32 result makes here too (float16/bfloat16 results round once more anyway).
  const int n = std::max(ranks, 1);
  const double extra = n * std::ldexp(1.0, l.headroom - 31);
  const double ring = (n - (type == DataType::kFloat32 ? 2 : 1)) * 0x1p-24;
  if (extra <= ring && n < (1 << countBits(32))) {
    l.bits = 32;
    l.precision = 31;
  } else {
    l.precision = 52;
  }
  return l;
}

DataType reproCodeType(DataType type) { return type == DataType::kFloat64 ? DataType::kInt32 : DataType::kUint8; }

void reproCodes(DataType type, const void* in, size_t count, void* codes) {
  const Format& f = formatOf(type);
  const uint64_t fieldMask = (uint64_t{1} << f.expBits) - 1;
  if (type == DataType::kFloat32) {
    const auto* p = static_cast<const uint32_t*>(in);
    auto* c = static_cast<uint8_t*>(codes);
    for (size_t i = 0; i < count; ++i) {
      const uint32_t field = (p[i] >> 23) & 0xFF;
      c[i] = static_cast<uint8_t>(field == 0 ? 1 : field);
    }
  } else if (type == DataType::kFloat64) {
    auto* c = static_cast<int32_t*>(codes);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t field = (loadBits(type, in, i) >> 52) & fieldMask;
      c[i] = static_cast<int32_t>(field == 0 ? 1 : field);
    }
  } else {
    auto* c = static_cast<uint8_t*>(codes);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t field = (loadBits(type, in, i) >> (f.precision - 1)) & fieldMask;
      c[i] = static_cast<uint8_t>(field == 0 ? 1 : field);
    }
  }
}

void reproToLanes(DataType type, const ReproLanes& lanes, const void* in, const void* codes, size_t count, void* out) {
  if (type == DataType::kFloat64) {
    toLanes(type, lanes, in, static_cast<const int32_t*>(codes), count, static_cast<int64_t*>(out));
  } else if (lanes.bits == 32) {
    toLanes(type, lanes, in, static_cast<const uint8_t*>(codes), count, static_cast<int32_t*>(out));
  } else {
    toLanes(type, lanes, in, static_cast<const uint8_t*>(codes), count, static_cast<int64_t*>(out));
  }
}

void reproFromLanes(DataType type, const ReproLanes& lanes, const void* in, const void* codes, size_t count, int ranks,
                    bool avg, void* out) {
  if (type == DataType::kFloat64) {
    fromLanes(type, lanes, static_cast<const int64_t*>(in), static_cast<const int32_t*>(codes), count, ranks, avg, out);
  } else if (lanes.bits == 32) {
    fromLanes(type, lanes, static_cast<const int32_t*>(in), static_cast<const uint8_t*>(codes), count, ranks, avg, out);
  } else {
    fromLanes(type, lanes, static_cast<const int64_t*>(in), static_cast<const uint8_t*>(codes), count, ranks, avg, out);
  }
}

namespace {

template <typename Lane, typename Code>
void reduceRows(DataType type, const ReproLanes& l, const void* const* rows, int nrows, size_t count, bool avg,
                uint8_t* out) {
  const size_t size = dataTypeSize(type);
  Code codes[kReproRowBlock], rowCodes[kReproRowBlock];
  Lane sum[kReproRowBlock], rowLanes[kReproRowBlock];
  auto row = [&](int j) { return static_cast<const uint8_t*>(rows[j]); };
  for (size_t first = 0; first < count; first += kReproRowBlock) {
    const size_t k = std::min(kReproRowBlock, count - first), at = first * size;
    // The largest code of each element over the rows, as the max all-reduce would agree on.
    reproCodes(type, row(0) + at, k, codes);
    for (int j = 1; j < nrows; ++j) {
      reproCodes(type, row(j) + at, k, rowCodes);
      for (size_t i = 0; i < k; ++i) codes[i] = std::max(codes[i], rowCodes[i]);
    }
    // The rows' lanes on that grid, summed (no lane sum overflows: ReproLanes::headroom).
    reproToLanes(type, l, row(0) + at, codes, k, sum);
    for (int j = 1; j < nrows; ++j) {
      reproToLanes(type, l, row(j) + at, codes, k, rowLanes);
      for (size_t i = 0; i < k; ++i) {
        sum[i] = static_cast<Lane>(static_cast<std::make_unsigned_t<Lane>>(sum[i]) +
                                   static_cast<std::make_unsigned_t<Lane>>(rowLanes[i]));
      }
    }
    // Written after every read of the block: out may be one of the rows.
    reproFromLanes(type, l, sum, codes, k, nrows, avg, out + at);
  }
}

}  // namespace

void reproReduceRowList(DataType type, const ReproLanes& lanes, const void* const* rows, int nrows, size_t count,
                        bool avg, void* out) {
  if (type == DataType::kFloat32 && !avg) {
#if defined(__x86_64__)
    if (activeIsa() == Isa::kAvx512) {
      reproFloat32SumRowsAvx512(lanes, rows, nrows, count, static_cast<float*>(out));
      return;
    }
    if (activeIsa() == Isa::kAvx2) {
      reproFloat32SumRowsAvx2(lanes, rows, nrows, count, static_cast<float*>(out));
      return;
    }
#endif
    float32SumRows(lanes, rows, nrows, count, static_cast<float*>(out));
    return;
  }
  auto* dst = static_cast<uint8_t*>(out);
  if (type == DataType::kFloat64) {
    reduceRows<int64_t, int32_t>(type, lanes, rows, nrows, count, avg, dst);
  } else if (lanes.bits == 32) {
    reduceRows<int32_t, uint8_t>(type, lanes, rows, nrows, count, avg, dst);
  } else {
    reduceRows<int64_t, uint8_t>(type, lanes, rows, nrows, count, avg, dst);
  }
}

void reproReduceRows(DataType type, const ReproLanes& lanes, const void* in, size_t stride, int rows, size_t count,
                     bool avg, void* out) {
  const size_t rowBytes = stride * dataTypeSize(type);
  std::vector<const void*> list(static_cast<size_t>(rows));
  for (int j = 0; j < rows; ++j) list[static_cast<size_t>(j)] = static_cast<const uint8_t*>(in) + j * rowBytes;
  reproReduceRowList(type, lanes, list.data(), rows, count, avg, out);
}

}  // namespace ferry::kernels
