// The exact correctness check: inputs whose collective result is known in closed form and exactly
// representable in every type, whatever order the ranks' values are combined in.
//
// Vocabulary. Element g of rank r's input is a function of (seed, r, g). For each element a hash h
// of (seed, g) gives two terms shared by every rank: an offset a and a phase k (a period-sized
// residue). Reductions then use small non-negative integers:
//   sum, avg  r contributes a + 1 + (k + 3r) mod P: the result is n*a + a per-phase constant.
//             With more ranks than the type can sum (n > exactLimit), one rank in q contributes 1.
//   prod      r contributes 2 if (k + r) mod q == 0, else 1: the result is 2^(count), and q keeps
//             the count within the type's largest power of two.
//   max, min  r contributes a + (k + r) mod (n+1): the result is a + a per-phase extreme.
//   band, bor, bxor (integers only)  r contributes 1 + (k + 3r) mod P, P <= 64, without an offset:
//             the result is a per-phase constant.
// Every partial result is an integer no larger than the type's exact limit, so it is exact in any
// order: results compare bit for bit. avg divides once at the end; it is compared within 2 ulp
// (floats round the quotient, integers truncate it).
// Collectives that only move data (all_gather, alltoall, broadcast, sendrecv) send hashed bit
// patterns of (seed, source rank, index) instead: any pattern survives a copy, so every bit of
// every element is checked. Floats get a finite exponent so no NaN is ever sent.
//
// Cost: one hash and two table look-ups per element; no expected buffer is stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ferry/types.hpp"
#include "bench/perf/collectives.hpp"

namespace ferry::perf {

/// splitmix64's finalizer: every input bit affects every output bit (the checks' fills, the
/// reference run's digests).
uint64_t mixBits(uint64_t x);

/// Inputs and expected outputs of one checked run of a collective on one rank.
class CheckPlan {
 public:
  CheckPlan(Coll coll, DataType type, RedOp op, int nranks, int rank, int root, uint64_t seed);

  /// Write this rank's input: `count` elements, global input indices [0, count).
  void fillInput(void* data, size_t count) const;
  /// Fill a receive buffer with the sentinel, so elements the collective should write but did
  /// not are caught.
  static void fillSentinel(void* data, size_t bytes);
  /// Elements of this rank's output at `out` that differ from the expected result. `out` is where
  /// the collective's recv argument pointed; `inPlace` matters only where the unwritten receive
  /// buffer has a defined value (reduce on a non-root rank).
  uint64_t countWrong(const void* out, const CollCounts& counts, bool inPlace) const;

  // The closed forms, exposed for the unit tests.
  /// Element g of rank r's input of a reduction, as an integer.
  int64_t reductionInput(int r, size_t g) const;
  /// Bits of the expected reduction result at index g (in the element's low bytes).
  uint64_t expectedBits(size_t g) const;
  /// Bits of element g of rank r's input of a data-moving collective.
  uint64_t movementBits(int r, size_t g) const;
  /// True for avg, whose results are compared within 2 ulp.
  bool tolerant() const { return op_ == RedOp::kAvg && reduces_; }

 private:
  struct Terms {
    uint64_t a;
    uint64_t k;
  };
  // The four reduction patterns of the overview, and rank r's contribution (less a) at phase k.
  enum class Pattern { kDense, kSparse, kPowerOfTwo, kExtreme };
  Terms terms(size_t g) const;
  int64_t phase(uint64_t k, int r) const;
  void planReduction();
  uint64_t countWrongT(const void* out, size_t count, size_t first, int source, int kind) const;

  Coll coll_;
  DataType type_;
  RedOp op_;
  int nranks_;
  int rank_;
  int root_;
  uint64_t seed_;
  bool reduces_;
  size_t eltSize_;
  // Float layout for movement patterns (mantissaBits_ 0 for integers).
  int mantissaBits_ = 0;
  int signShift_ = 0;
  uint64_t exponentBase_ = 0;

  // Reduction pattern: a in [0, aMax], k in [0, period); input = inputEnc_[a + phaseInput_[k]];
  // expected = expectedEnc_[a * period + k].
  Pattern pattern_ = Pattern::kDense;
  int64_t modulus_ = 1;
  uint64_t aMax_ = 0;
  uint64_t period_ = 1;
  std::vector<int64_t> phaseInput_;    // this rank's contribution per phase (less a)
  std::vector<uint64_t> inputEnc_;     // encoded input values, indexed by value
  std::vector<uint64_t> expectedEnc_;  // encoded results, indexed by a * period + k
};

}  // namespace ferry::perf
