// The float32 sum of reproReduceRowList (reproducible.hpp), written once and compiled per
// instruction set (reproducible.cpp for baseline x86-64, reproducible_avx2.cpp,
// reproducible_avx512.cpp).
//
// Per block of kReproRowBlock elements: the codes' max over the rows; each row's lane on that grid
// added to a 64-bit sum; the sum scaled and rounded once to float32. Each step is the same arithmetic as
// the integer form's float32 loops (reproducible.cpp: float32ToLanes, float32FromLanes), so the bits
// are theirs: the lane is round(x * 2^-s) by the 1.5 * 2^52 addition, the sum (below 2^51) turns
// back into a double exactly, and the one conversion to float rounds. A lane sum in 64 bits equals
// the int32 sum of the integer form, which never overflows (ReproLanes::headroom). Elements whose
// code is the non-finite one take their result from their values (NaN, both infinities: the quiet
// NaN; else the infinity), as the count fields give.
//
// Include only from the per-instruction-set files: everything is in an anonymous namespace so that
// no two instruction sets share a symbol.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/host/reproducible.hpp"

namespace ferry::kernels {
namespace {

/// Elements per block: a block's codes, sums and one row's values stay in the first-level cache.
constexpr size_t kReproRowBlock = 1024;

// One row's part of a block, each its own function: inlined into the loop over the rows, GCC's
// unroll-and-jam (GCC 12, -O3) fuses two rows into one loop that it then leaves scalar. The first
// row's call starts the block's codes and sums, so that no pass over the block only clears them.

// code[i] = the larger of code[i] (the first row: 1, the code of zeros and subnormals) and r[i]'s.
template <bool kFirst>
[[gnu::noinline]] void maxCodes(const float* r, size_t k, uint32_t* code) {
  for (size_t i = 0; i < k; ++i) {
    code[i] = std::max(kFirst ? 1u : code[i], (std::bit_cast<uint32_t>(r[i]) >> 23) & 0xFF);
  }
}
// sum[i] (the first row: 0) plus r[i] as a lane on its element's grid, scale[i] = 2^-s (the first
// row computes it from code[i]; toField: 2^-s's double exponent field for code 0).
template <bool kFirst>
[[gnu::noinline]] void addLanes(const float* r, size_t k, const uint32_t* code, int64_t toField, double* scale,
                                uint64_t* sum) {
  constexpr double kMagic = 0x1.8p52;
  const uint64_t magicBits = std::bit_cast<uint64_t>(kMagic);
  for (size_t i = 0; i < k; ++i) {
    if constexpr (kFirst) scale[i] = std::bit_cast<double>(static_cast<uint64_t>(toField - code[i]) << 52);
    const uint64_t lane = std::bit_cast<uint64_t>(static_cast<double>(r[i]) * scale[i] + kMagic) - magicBits;
    sum[i] = kFirst ? lane : sum[i] + lane;
  }
}

// Elements [first, first + k) of the rows (nrows >= 1); out may be one of them (the results are
// written after every read of the block).
inline void float32SumRowsBlock(const ReproLanes& l, const void* const* rows, int nrows, size_t first, size_t k,
                                float* out) {
  constexpr double kMagic = 0x1.8p52;
  const uint64_t magicBits = std::bit_cast<uint64_t>(kMagic);
  // Double exponent fields of 2^-s and 2^s for code 0 (s = code - 127 + 1 + headroom - precision).
  const int64_t toField = 1023 + l.precision - l.headroom - 1 + 127;
  const int64_t fromField = 1023 - 127 + 1 + l.headroom - l.precision;
  uint32_t code[kReproRowBlock];
  // Unsigned: a non-finite element's lanes are garbage that may wrap (patched below); a finite
  // element's sum never does, and its two's complement bits are the signed sum.
  uint64_t sum[kReproRowBlock];
  auto row = [&](int j) { return static_cast<const float*>(rows[j]) + first; };
  maxCodes<true>(row(0), k, code);
  for (int j = 1; j < nrows; ++j) maxCodes<false>(row(j), k, code);
  uint32_t nonFinite = 0;
  for (size_t i = 0; i < k; ++i) nonFinite |= code[i] == 0xFF;
  double scale[kReproRowBlock];
  addLanes<true>(row(0), k, code, toField, scale, sum);
  for (int j = 1; j < nrows; ++j) addLanes<false>(row(j), k, code, toField, scale, sum);
  // A non-finite element's result, from its values (NaN, both infinities: the quiet NaN; else the
  // infinity), kept in its sum until the values are no longer read.
  if (nonFinite != 0) {
    for (size_t i = 0; i < k; ++i) {
      if (code[i] != 0xFF) continue;
      bool nan = false, pos = false, neg = false;
      for (int j = 0; j < nrows; ++j) {
        const uint32_t b = std::bit_cast<uint32_t>(static_cast<const float*>(rows[j])[first + i]);
        if ((b & 0x7FFFFFFFu) > 0x7F800000u) nan = true;
        if (b == 0x7F800000u) pos = true;
        if (b == 0xFF800000u) neg = true;
      }
      sum[i] = nan || (pos && neg) ? 0x7FC00000u : pos ? 0x7F800000u : 0xFF800000u;
    }
  }
  for (size_t i = 0; i < k; ++i) {
    const double s = std::bit_cast<double>(magicBits + sum[i]) - kMagic;
    const double scale = std::bit_cast<double>(static_cast<uint64_t>(fromField + code[i]) << 52);
    out[i] = static_cast<float>(s * scale);
  }
  if (nonFinite == 0) return;
  for (size_t i = 0; i < k; ++i) {
    if (code[i] != 0xFF) continue;
    const auto bits = static_cast<uint32_t>(sum[i]);
    std::memcpy(out + i, &bits, 4);
  }
}

/// out[k] = the float32 sum of the `nrows` rows rows[j], k < count.
inline void float32SumRows(const ReproLanes& l, const void* const* rows, int nrows, size_t count, float* out) {
  for (size_t first = 0; first < count; first += kReproRowBlock) {
    float32SumRowsBlock(l, rows, nrows, first, std::min(kReproRowBlock, count - first), out + first);
  }
}

}  // namespace
}  // namespace ferry::kernels

namespace ferry::kernels {

#if defined(__x86_64__)
/// float32SumRows built for AVX2 (reproducible_avx2.cpp). Call only where isaSupported(Isa::kAvx2).
void reproFloat32SumRowsAvx2(const ReproLanes& l, const void* const* rows, int nrows, size_t count, float* out);
/// float32SumRows built for AVX-512 (reproducible_avx512.cpp). Call only where isaSupported(Isa::kAvx512).
void reproFloat32SumRowsAvx512(const ReproLanes& l, const void* const* rows, int nrows, size_t count, float* out);
#endif

}  // namespace ferry::kernels
