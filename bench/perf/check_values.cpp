// Closed-form check values. See check_values.hpp for the patterns and why they are exact.
#include "bench/perf/check_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/perf/dtypes.hpp"

namespace ferry::perf {
namespace {

constexpr uint8_t kSentinelByte = 0xA5;
// Tables of expected results hold (aMax + 1) x period entries; this bounds them to 512 KiB.
constexpr uint64_t kMaxExpectedEntries = 65536;
constexpr uint64_t kMaxOffset = 1023;

// What countWrongT compares against.
enum Kind { kReduced, kOwnInput, kSentinel, kMoved };

template <typename U>
uint64_t loadAt(const void* base, size_t i) {
  U v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(U), sizeof(U));
  return v;
}

template <typename U>
void storeAt(void* base, size_t i, uint64_t bits) {
  const U v = static_cast<U>(bits);
  std::memcpy(static_cast<char*>(base) + i * sizeof(U), &v, sizeof(U));
}

// Calls fn(U{}) with U the unsigned integer of `size` bytes.
template <typename Fn>
auto withWidth(size_t size, Fn&& fn) {
  switch (size) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}

}  // namespace

CheckPlan::CheckPlan(Coll coll, DataType type, RedOp op, int nranks, int rank, int root, uint64_t seed)
    : coll_(coll), type_(type), op_(op), nranks_(nranks), rank_(rank), root_(root),
      seed_(mixBits(seed + 0x9E3779B97F4A7C15ull)), reduces_(collInfo(coll).reduces), eltSize_(typeInfo(type).size) {
  const TypeInfo& t = typeInfo(type);
  if (t.isFloat) {
    mantissaBits_ = t.mantissaBits;
    signShift_ = static_cast<int>(t.size * 8 - 1);
    exponentBase_ = (uint64_t{1} << (t.exponentBits - 1)) - 1 - 4;  // the bias less 4 binades
  }
  if (reduces_) planReduction();
}

// Chooses the pattern, aMax and the period for the op and type, then tabulates this rank's phase
// inputs and the encoded inputs and results. Values are exact integers (or powers of two) in
// double until encoded: every one is at most 2^53, or a power of two.
void CheckPlan::planReduction() {
  const TypeInfo& t = typeInfo(type_);
  const int64_t n = nranks_;
  const int64_t limit = t.exactLimit;
  double aWeight = 0;  // how many times the offset a enters the result
  switch (op_) {
    case RedOp::kSum:
    case RedOp::kAvg: {
      const int64_t perRank = limit / n;  // the sum of n values of at most perRank stays exact
      if (perRank >= 1) {
        pattern_ = Pattern::kDense;
        modulus_ = std::max<int64_t>(1, std::min<int64_t>(perRank / 2, 8));
        aMax_ = static_cast<uint64_t>(std::min<int64_t>(perRank - modulus_, kMaxOffset));
        aWeight = static_cast<double>(n);
      } else {  // more ranks than the type can sum: at most `limit` ranks contribute a 1
        pattern_ = Pattern::kSparse;
        modulus_ = (n + limit - 1) / limit;
      }
      break;
    }
    case RedOp::kProd:
      pattern_ = Pattern::kPowerOfTwo;
      modulus_ = std::max<int64_t>(3, (n + t.maxPow2 - 1) / t.maxPow2);
      break;
    case RedOp::kMax:
    case RedOp::kMin:
      pattern_ = Pattern::kExtreme;
      modulus_ = std::min<int64_t>(n + 1, limit + 1);
      aMax_ = static_cast<uint64_t>(std::min<int64_t>(limit - (modulus_ - 1), kMaxOffset));
      aWeight = 1;
      break;
    case RedOp::kBand:
    case RedOp::kBor:
    case RedOp::kBxor:
      // Integer types only. No offset (a bitwise result is no affine function of it): 1..64 by phase.
      pattern_ = Pattern::kDense;
      modulus_ = std::min<int64_t>(limit, 64);
      aMax_ = 0;
      break;
  }
  period_ = static_cast<uint64_t>(modulus_);
  aMax_ = std::min<uint64_t>(aMax_, kMaxExpectedEntries / period_ - 1);

  const EncodeFn encode = encoder(type_);
  phaseInput_.resize(period_);
  int64_t maxInput = 0;
  for (uint64_t k = 0; k < period_; ++k) {
    phaseInput_[k] = phase(k, rank_);
    for (int r = 0; r < nranks_; ++r) maxInput = std::max(maxInput, phase(k, r));
  }
  inputEnc_.resize(static_cast<size_t>(maxInput) + aMax_ + 1);
  for (size_t v = 0; v < inputEnc_.size(); ++v) inputEnc_[v] = encode(static_cast<double>(v));

  expectedEnc_.resize((aMax_ + 1) * period_);
  for (uint64_t k = 0; k < period_; ++k) {
    // Fold the phase contributions in rank order; the patterns make any order give the same.
    double folded = static_cast<double>(phase(k, 0));
    for (int r = 1; r < nranks_; ++r) {
      const double v = static_cast<double>(phase(k, r));
      switch (op_) {
        case RedOp::kSum:
        case RedOp::kAvg: folded += v; break;
        case RedOp::kProd: folded *= v; break;
        case RedOp::kMax: folded = std::max(folded, v); break;
        case RedOp::kMin: folded = std::min(folded, v); break;
        case RedOp::kBand: folded = static_cast<double>(static_cast<int64_t>(folded) & static_cast<int64_t>(v)); break;
        case RedOp::kBor: folded = static_cast<double>(static_cast<int64_t>(folded) | static_cast<int64_t>(v)); break;
        case RedOp::kBxor: folded = static_cast<double>(static_cast<int64_t>(folded) ^ static_cast<int64_t>(v)); break;
      }
    }
    for (uint64_t a = 0; a <= aMax_; ++a) {
      double result = folded + aWeight * static_cast<double>(a);
      if (op_ == RedOp::kAvg) {
        // Integers truncate toward zero (NCCL's and ferry's avg); floats round the quotient.
        result = t.isFloat ? result / static_cast<double>(n) : std::trunc(result / static_cast<double>(n));
      }
      expectedEnc_[a * period_ + k] = encode(result);
    }
  }
}

int64_t CheckPlan::phase(uint64_t k, int r) const {
  const int64_t v = (static_cast<int64_t>(k) + (pattern_ == Pattern::kDense ? 3 : 1) * r) % modulus_;
  switch (pattern_) {
    case Pattern::kDense: return 1 + v;
    case Pattern::kSparse: return v == 0 ? 1 : 0;
    case Pattern::kPowerOfTwo: return v == 0 ? 2 : 1;
    case Pattern::kExtreme: return v;
  }
  return 0;
}

CheckPlan::Terms CheckPlan::terms(size_t g) const {
  const uint64_t h = mixBits(seed_ ^ (static_cast<uint64_t>(g) * 0xD6E8FEB86659FD93ull));
  // Each 32-bit half scaled into its range by a multiply (Lemire's reduction): no division.
  return {((h >> 32) * (aMax_ + 1)) >> 32, ((h & 0xffffffffu) * period_) >> 32};
}

int64_t CheckPlan::reductionInput(int r, size_t g) const {
  const Terms tm = terms(g);
  return static_cast<int64_t>(tm.a) + phase(tm.k, r);
}

uint64_t CheckPlan::expectedBits(size_t g) const {
  const Terms tm = terms(g);
  return expectedEnc_[tm.a * period_ + tm.k];
}

uint64_t CheckPlan::movementBits(int r, size_t g) const {
  const uint64_t h = mixBits(seed_ ^ (static_cast<uint64_t>(g) * 0x9E3779B97F4A7C15ull) ^
                             (static_cast<uint64_t>(r + 1) * 0xC2B2AE3D27D4EB4Full));
  if (mantissaBits_ == 0) return h;  // integers: any bits
  // sign | exponent within 4 binades of 1.0 | random mantissa: always finite and normal.
  const uint64_t exponent = exponentBase_ + ((h >> 56) & 7);
  return ((h >> 63) << signShift_) | (exponent << mantissaBits_) | (h & ((uint64_t{1} << mantissaBits_) - 1));
}

void CheckPlan::fillInput(void* data, size_t count) const {
  withWidth(eltSize_, [&](auto tag) {
    using U = decltype(tag);
    if (reduces_) {
      for (size_t g = 0; g < count; ++g) {
        const Terms tm = terms(g);
        storeAt<U>(data, g, inputEnc_[tm.a + static_cast<uint64_t>(phaseInput_[tm.k])]);
      }
    } else {
      for (size_t g = 0; g < count; ++g) storeAt<U>(data, g, movementBits(rank_, g));
    }
  });
}

void CheckPlan::fillSentinel(void* data, size_t bytes) { std::memset(data, kSentinelByte, bytes); }

uint64_t CheckPlan::countWrongT(const void* out, size_t count, size_t first, int source, int kind) const {
  // One loop per kind and width, so that the comparison inlines and nothing switches per element.
  auto scan = [&](auto want) {
    return withWidth(eltSize_, [&](auto tag) -> uint64_t {
      using U = decltype(tag);
      uint64_t wrong = 0;
      for (size_t j = 0; j < count; ++j) {
        const U got = static_cast<U>(loadAt<U>(out, j));
        const U w = static_cast<U>(want(first + j));
        if (got == w) continue;
        if (kind == kReduced && tolerant() && ulpDistance(type_, &got, &w) <= 2) continue;
        ++wrong;
      }
      return wrong;
    });
  };
  switch (kind) {
    case kReduced: return scan([&](size_t g) { return expectedBits(g); });
    case kOwnInput:
      return scan([&](size_t g) {
        const Terms tm = terms(g);
        return inputEnc_[tm.a + static_cast<uint64_t>(phaseInput_[tm.k])];
      });
    case kSentinel: {
      uint64_t sentinel = 0;
      std::memset(&sentinel, kSentinelByte, sizeof(sentinel));
      return scan([&](size_t) { return sentinel; });
    }
    default: return scan([&](size_t g) { return movementBits(source, g); });
  }
}

uint64_t CheckPlan::countWrong(const void* out, const CollCounts& c, bool inPlace) const {
  const size_t pc = c.paramCount;
  const auto* bytes = static_cast<const char*>(out);
  switch (coll_) {
    case Coll::kAllReduce: return countWrongT(out, pc, 0, 0, kReduced);
    case Coll::kReduceScatter: return countWrongT(out, pc, static_cast<size_t>(rank_) * pc, 0, kReduced);
    case Coll::kReduce:
      if (rank_ == root_) return countWrongT(out, pc, 0, 0, kReduced);
      return countWrongT(out, pc, 0, 0, inPlace ? kOwnInput : kSentinel);
    case Coll::kAllGather: {
      uint64_t wrong = 0;
      for (int r = 0; r < nranks_; ++r) wrong += countWrongT(bytes + r * pc * eltSize_, pc, 0, r, kMoved);
      return wrong;
    }
    case Coll::kAllToAll: {
      uint64_t wrong = 0;
      for (int r = 0; r < nranks_; ++r) {
        wrong += countWrongT(bytes + r * pc * eltSize_, pc, static_cast<size_t>(rank_) * pc, r, kMoved);
      }
      return wrong;
    }
    case Coll::kBroadcast: return countWrongT(out, pc, 0, root_, kMoved);
    case Coll::kSend: return countWrongT(out, pc, 0, (rank_ + nranks_ - 1) % nranks_, kMoved);
    case Coll::kBarrier:
    case Coll::kRecv: break;  // not in the sweep
  }
  return 0;
}

uint64_t mixBits(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace ferry::perf
