// Closed-form test values: every input element is a small integer chosen from (rank, index, op) so
// that every reduction of up to 8 ranks is exact in every data type, whatever the order of
// reduction. Expected results are computed in int64 and converted to the type once, so a
// comparison of bits is exact. (Integer products may wrap; the conversion wraps the same way.)
// float8 holds few integers exactly (e4m3 up to 16, e5m2 up to 8), so its sums use -1..1 and its
// averages the same value on every rank (see reduceInput).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/types.hpp"

namespace ferry::test {

inline bool isUnsigned(DataType t) { return t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64; }

/// float32 -> float16 bits for values exactly representable (small integers).
inline uint16_t toHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  if ((x & 0x7fffffff) == 0) return static_cast<uint16_t>(sign);
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

inline bool isFloat8(DataType t) { return t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2; }

/// float32 -> float8 bits (mantBits 3: e4m3, 2: e5m2), round to nearest even, saturating. Exact for
/// the small integers of reduceInput; other values (moveInput's) only need to be deterministic.
inline uint8_t toFloat8Bits(float f, int mantBits) {
  const int bias = mantBits == 3 ? 7 : 15;
  const int maxCode = mantBits == 3 ? 0x7E : 0x7B;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < 1 - bias) e = 1 - bias;
  int im = static_cast<int>(std::nearbyint(std::ldexp(a, mantBits - e)));
  if (im >= (2 << mantBits)) {
    im /= 2;
    ++e;
  }
  if (im < (1 << mantBits)) return static_cast<uint8_t>(sign | im);
  const int code = e + bias > 31 ? maxCode : ((e + bias) << mantBits) | (im - (1 << mantBits));
  return static_cast<uint8_t>(sign | (code > maxCode ? maxCode : code));
}

/// Store integer `v` as one element of `type` at `p`.
inline void store(DataType type, void* p, int64_t v) {
  switch (type) {
    case DataType::kInt8: {
      int8_t x = static_cast<int8_t>(static_cast<uint8_t>(v));
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kInt32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kInt64:
    case DataType::kUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DataType::kFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kFloat64: {
      double x = static_cast<double>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DataType::kFloat16: {
      uint16_t x = toHalfBits(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: {
      const uint8_t x = toFloat8Bits(static_cast<float>(v), type == DataType::kFloat8e4m3 ? 3 : 2);
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kBfloat16: {
      float f = static_cast<float>(v);
      uint32_t x;
      std::memcpy(&x, &f, 4);
      uint16_t b = static_cast<uint16_t>(x >> 16);
      std::memcpy(p, &b, 2);
      break;
    }
  }
}

/// Input of `rank` at index `i` for a reduction `op` over `n` ranks.
inline int64_t reduceInput(DataType t, RedOp op, int n, int rank, size_t i) {
  const int64_t r = rank, k = static_cast<int64_t>(i);
  const bool u = isUnsigned(t);
  if (isFloat8(t) && op == RedOp::kSum) return (r * 3 + k) % 3 - 1;  // partial sums stay within ±8
  if (isFloat8(t) && op == RedOp::kAvg) return k % 3 - 1;            // every partial sum j * v exact
  switch (op) {
    case RedOp::kSum: return u ? (r * 3 + k) % 5 : (r * 3 + k) % 5 - 2;
    case RedOp::kProd: {
      int64_t v = (r + k) % 3 == 0 ? 2 : 1;
      return (!u && (r + 2 * k) % 4 == 0) ? -v : v;
    }
    case RedOp::kMax:
    case RedOp::kMin: return u ? (r * 7 + k * 3) % 11 : (r * 7 + k * 3) % 11 - 5;
    // Beyond 8 ranks only ranks 0-3 contribute: the sum of any subset of ranks (a tree's or a
    // halving's partial result) then stays within 8-bit integers up to 31 ranks.
    case RedOp::kAvg: return n > 8 && r >= 4 ? 0 : n * (u ? (r * 3 + k) % 3 : (r * 3 + k) % 3 - 1);
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor: {
      // Integer types only: bits 3..6 shared by every rank, bit r % 3 of the rank's own; signed
      // types complement odd elements, so the sign bit and the wrap to the type's width are exercised.
      const int64_t v = ((k % 11) << 3) | (int64_t{1} << (r % 3));
      return (!u && k % 2 == 1) ? ~v : v;
    }
  }
  return 0;
}

/// The reduction over ranks 0..n-1 of reduceInput at index i.
inline int64_t reduceExpected(DataType t, RedOp op, int n, size_t i) {
  int64_t acc = reduceInput(t, op, n, 0, i);
  for (int r = 1; r < n; ++r) {
    int64_t v = reduceInput(t, op, n, r, i);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMax: acc = v > acc ? v : acc; break;
      case RedOp::kMin: acc = v < acc ? v : acc; break;
      case RedOp::kBand: acc &= v; break;
      case RedOp::kBor: acc |= v; break;
      case RedOp::kBxor: acc ^= v; break;
    }
  }
  return op == RedOp::kAvg ? acc / n : acc;
}

/// Data of `rank` at index `i` for the data-movement collectives.
inline int64_t moveInput(DataType t, int rank, size_t i) {
  int64_t v = (static_cast<int64_t>(rank) * 37 + static_cast<int64_t>(i) * 11) % 100;
  return isUnsigned(t) ? v : v - 50;
}

/// reduceInput and reduceExpected repeat with this period in the index; moveInput with kMovePeriod.
inline constexpr size_t kReducePeriod = 660;  // lcm(5, 3, 4, 11)
inline constexpr size_t kMovePeriod = 100;

/// Element bytes of value(0..period-1): one period of a periodic sequence, stored once.
template <typename F>
std::vector<uint8_t> pattern(DataType t, size_t period, F value) {
  const size_t es = dataTypeSize(t);
  std::vector<uint8_t> p(period * es);
  for (size_t i = 0; i < period; ++i) store(t, p.data() + i * es, value(i));
  return p;
}

/// One period of `pat` starting at element `phase % period`: what fillPattern writes from index 0.
inline std::vector<uint8_t> rotatePattern(DataType t, const std::vector<uint8_t>& pat, size_t phase) {
  const size_t es = dataTypeSize(t), period = pat.size() / es, at = (phase % period) * es;
  std::vector<uint8_t> rot(pat.begin() + static_cast<std::ptrdiff_t>(at), pat.end());
  rot.insert(rot.end(), pat.begin(), pat.begin() + static_cast<std::ptrdiff_t>(at));
  return rot;
}

/// dst[i] = element (i + phase) % period of `pat`, for i < count. A period per memcpy, not an
/// element: the sweeps fill and check millions of elements per call.
inline void fillPattern(DataType t, void* dst, size_t count, const std::vector<uint8_t>& pat, size_t phase = 0) {
  const std::vector<uint8_t> rot = rotatePattern(t, pat, phase);
  const size_t bytes = count * dataTypeSize(t);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t at = 0; at < bytes; at += rot.size()) std::memcpy(d + at, rot.data(), std::min(rot.size(), bytes - at));
}

/// Compares with fillPattern's sequence; describes the first wrong element. A period that matches
/// as a whole is skipped; one that does not is compared element by element.
inline std::string comparePattern(DataType t, const void* got, size_t count, const std::vector<uint8_t>& pat,
                                  size_t phase, const std::string& what) {
  const std::vector<uint8_t> rot = rotatePattern(t, pat, phase);
  const size_t es = dataTypeSize(t), bytes = count * es;
  const auto* g = static_cast<const uint8_t*>(got);
  size_t bad = 0, first = 0;
  for (size_t at = 0; at < bytes; at += rot.size()) {
    const size_t len = std::min(rot.size(), bytes - at);
    if (std::memcmp(g + at, rot.data(), len) == 0) continue;
    for (size_t b = 0; b < len; b += es) {
      if (std::memcmp(g + at + b, rot.data() + b, es) != 0 && bad++ == 0) first = (at + b) / es;
    }
  }
  if (bad == 0) return "";
  return what + ": " + std::to_string(bad) + " of " + std::to_string(count) + " elements wrong, first at index " +
         std::to_string(first);
}

/// Compare `count` elements of `got` with expected(i); on mismatch describe the first one.
template <typename F>
std::string compare(DataType t, const void* got, size_t count, F expected, const std::string& what) {
  const size_t es = dataTypeSize(t);
  std::vector<uint8_t> want(es);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    store(t, want.data(), expected(i));
    if (std::memcmp(want.data(), static_cast<const uint8_t*>(got) + i * es, es) != 0) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  return what + ": " + std::to_string(bad) + " of " + std::to_string(count) + " elements wrong, first at " +
         std::to_string(first) + " (expected value " + std::to_string(expected(first)) + ")";
}

/// All data types.
inline std::vector<DataType> allTypes() {
  std::vector<DataType> v;
  for (int t = 0; t < kNumDataTypes; ++t) v.push_back(static_cast<DataType>(t));
  return v;
}

}  // namespace ferry::test
