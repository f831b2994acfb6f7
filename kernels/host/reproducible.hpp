// The element conversions of the reproducible mode (collectives/reproducible.hpp runs the calls).
//
// A float sum whose bits depend on nothing but the summands: every rank maps each element to an
// integer on a grid all ranks agree on, the integers are summed (two's complement addition is
// associative and commutative, so any algorithm and order gives the same bits), and the integer sum
// is rounded to the float type once.
//
// Vocabulary:
// - code: the biased exponent field of x (1 for zeros and subnormals: they lie below 2^(2 - bias)),
//   one byte per element (int32 for float64, whose field has 11 bits); the ranks agree on the
//   largest code of each element (an all-reduce with max). The all-ones field (NaN, infinity) is
//   the largest code, so an element some rank holds a NaN or an infinity in is non-finite on all.
// - hi: 2^hi bounds |x| strictly for every finite x of a code: hi = code - bias + 1.
// - lane: the integer one rank contributes, round(x / 2^s) to nearest, ties to even, with
//   s = hi + headroom - precision: `precision` magnitude bits of which `headroom` =
//   ceil(log2 ranks) + 1 stay free, so the sum of every rank's lane cannot overflow.
// - Non-finite elements: each rank's lane counts its NaNs, +infinities and -infinities in three
//   fields of kCountBits(lane); the result is NaN if any rank had a NaN or both infinities met,
//   else the infinity some rank had.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/types.hpp"

namespace ferry::kernels {

/// The integer lane a reduction of `type` over `ranks` ranks uses.
struct ReproLanes {
  int bits = 64;       ///< 32 or 64: the lane type (int32 or int64)
  int precision = 62;  ///< magnitude bits the grid spans: bits - 1, or 52 for an int64 lane of a
                       ///< type of 24 bits or less (its sums then convert exactly through double)
  int headroom = 2;    ///< ceil(log2 ranks) + 1
};

/// True for the types the mode converts: float16, float32, float64, bfloat16.
bool reproSupports(DataType type);

/// The lanes for `type` and `ranks` (>= 1): int32 where its error bound (docs/RELIABILITY.md,
/// "Reproducible reductions") is below a float32 ring's at that rank count, else int64.
ReproLanes reproLanes(DataType type, int ranks);

/// The type of the codes of `type`: uint8, or int32 for float64.
DataType reproCodeType(DataType type);

/// codes[i] = the code of in[i] (an array of reproCodeType(type)).
void reproCodes(DataType type, const void* in, size_t count, void* codes);

/// lanes[i] = in[i] on the grid of codes[i] (every rank's max), as lanes.bits-bit integers.
void reproToLanes(DataType type, const ReproLanes& lanes, const void* in, const void* codes, size_t count, void* out);

/// out[i] = the sum lanes[i] holds (divided by `ranks` when `avg`), rounded once to `type`, nearest
/// with ties to even (subnormals and overflow to infinity included). A zero sum gives +0; a NaN
/// result is the type's positive quiet NaN.
void reproFromLanes(DataType type, const ReproLanes& lanes, const void* in, const void* codes, size_t count, int ranks,
                    bool avg, void* out);

/// The whole reduction of `nrows` ranks' values on one rank, where one rank holds every
/// contribution of its elements (an all-to-all or the ranks' mailboxes delivered them): element k
/// of row j at rows[j] + k elements. out[k] gets the bits reproCodes, a max over the rows,
/// reproToLanes, an integer sum over the rows and reproFromLanes give, with `lanes` and `avg` as
/// there (nrows = the ranks), whatever the rows' order. Works in cache-sized blocks, so each row is
/// read from memory once; out may be one of the rows.
void reproReduceRowList(DataType type, const ReproLanes& lanes, const void* const* rows, int nrows, size_t count,
                        bool avg, void* out);

/// reproReduceRowList over `rows` rows laid out with a stride: row j at in + j * stride elements.
void reproReduceRows(DataType type, const ReproLanes& lanes, const void* in, size_t stride, int rows, size_t count,
                     bool avg, void* out);

}  // namespace ferry::kernels
