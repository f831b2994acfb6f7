// Seeded random numbers for parameters and synthetic data.
//
// Every rank must draw exactly the numbers a single process would, so the generator is spelled
// out here (SplitMix64, with a Box-Muller normal) instead of relying on <random>'s distributions,
// whose output the standard leaves to each library.
#pragma once

#include <cmath>
#include <cstdint>

namespace ferry::train {

/// SplitMix64: a 64-bit counter passed through a mixing function; any seed is a good seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  /// Next 64 random bits.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1), from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  /// Standard normal (Box-Muller; the second value of each pair is discarded for simplicity).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

/// A seed derived from a base seed and a stream number, so independent streams never overlap.
inline uint64_t deriveSeed(uint64_t base, uint64_t stream) {
  Rng r(base ^ (stream * 0xd1b54a32d192ed03ull));
  return r.next();
}

}  // namespace ferry::train
