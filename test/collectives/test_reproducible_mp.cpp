// The reproducible mode (collectives/reproducible.hpp) on real processes: the same adversarial
// vectors (magnitudes across the whole range, cancellations, subnormals, NaN and infinities) summed
// and averaged in float16, float32, float64 and bfloat16 must give the same bits
// - under every plan: each run below forces other algorithms, protocols, transports or simulated
//   hosts, and rank 0 prints a digest of its results, which the parent compares across runs;
// - for every call split: 1000 elements alone, at an offset, and within 4096- and 65536-element
//   calls (and a 600001-element float32 call in place); reduce-scatter's (out of place and in
//   place) and reduce's elements equal all-reduce's;
// - for a permuted rank order: a split with reversed keys sums the same contributions;
// and each result must lie within the documented bound of the exact sum (docs/RELIABILITY.md,
// "Reproducible reductions"), computed here with a compensated long double sum.
// FERRY_TEST_REPRO=all runs every variant (the long suite); otherwise a quick subset.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/memory.hpp"
#include "test/common/mp_harness.hpp"

using namespace ferry;
using namespace ferry::test;

namespace {

constexpr size_t kCount = 65536;
constexpr size_t kSplit = 1000;
constexpr size_t kMiddle = 4096;
constexpr size_t kLarge = 600001;  // over two 1 MiB pieces of float32, and a tail

struct TypeInfo {
  DataType type;
  int size;       // bytes
  int precision;  // significand bits, hidden bit included
  int expBits;
  int bias;
};
const TypeInfo kTypes[] = {{DataType::kFloat32, 4, 24, 8, 127},
                           {DataType::kBfloat16, 2, 8, 8, 127},
                           {DataType::kFloat16, 2, 11, 5, 15},
                           {DataType::kFloat64, 8, 53, 11, 1023}};
const RedOp kOps[] = {RedOp::kSum, RedOp::kAvg};

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The bits contributor j (of n) holds at element i: a mix of kinds chosen per element.
uint64_t contribution(const TypeInfo& t, int n, int j, size_t i) {
  const uint64_t mantMask = (uint64_t{1} << (t.precision - 1)) - 1;
  const uint64_t fieldMax = (uint64_t{1} << t.expBits) - 1;
  const uint64_t sign = uint64_t{1} << (t.precision - 1 + t.expBits);
  const uint64_t e = mix(i * 7919 + static_cast<uint64_t>(t.type));  // per element
  const uint64_t r = mix(e ^ (static_cast<uint64_t>(j) * 0x632BE59BD9B4E019ull));
  auto make = [&](uint64_t field, uint64_t mant, bool negative) {
    return (negative ? sign : 0) | (field << (t.precision - 1)) | (mant & mantMask);
  };
  switch (e % 16) {
    case 0: {  // non-finite on one or two contributors
      const int who = static_cast<int>((e >> 8) % static_cast<uint64_t>(n));
      const int other = (who + 1) % n;
      const uint64_t kind = (e >> 16) % 4;
      if (j == who) return kind == 0 ? make(fieldMax, 1, false) : make(fieldMax, 0, kind == 2);
      if (j == other && kind == 3) return make(fieldMax, 0, true);  // +inf meets -inf
      return make(1 + r % (fieldMax - 1), r >> 12, (r >> 4) & 1);
    }
    case 1:
    case 2: {  // cancellation: one value with alternating signs, one contributor perturbed
      const uint64_t field = 1 + (e >> 8) % (fieldMax - 1);
      uint64_t mant = e >> 20;
      if (j == 0) mant ^= r & 7;
      return make(field, mant, (j & 1) != 0);
    }
    case 3:  // subnormals
      return make(0, r >> 12, (r >> 4) & 1);
    case 4:
    case 5:
    case 6: {  // magnitudes across the whole finite range
      return make(r % fieldMax, r >> 12, (r >> 5) & 1);
    }
    default: {  // nearby magnitudes, mixed signs
      const uint64_t centre = 4 + (e >> 8) % (fieldMax - 8);
      return make(centre - 3 + r % 7, r >> 12, (r >> 5) & 1);
    }
  }
}

long double valueOf(const TypeInfo& t, uint64_t bits) {
  const uint64_t mant = bits & ((uint64_t{1} << (t.precision - 1)) - 1);
  const uint64_t field = (bits >> (t.precision - 1)) & ((uint64_t{1} << t.expBits) - 1);
  const bool negative = (bits >> (t.precision - 1 + t.expBits)) & 1;
  long double v;
  if (field == (uint64_t{1} << t.expBits) - 1) {
    v = mant != 0 ? NAN : INFINITY;
  } else if (field == 0) {
    v = std::ldexp(static_cast<long double>(mant), 1 - t.bias - (t.precision - 1));
  } else {
    v = std::ldexp(static_cast<long double>(mant | (uint64_t{1} << (t.precision - 1))),
                   static_cast<int>(field) - t.bias - (t.precision - 1));
  }
  return negative ? -v : v;
}

uint64_t load(const TypeInfo& t, const std::vector<uint8_t>& buf, size_t i) {
  uint64_t b = 0;
  std::memcpy(&b, buf.data() + i * t.size, t.size);
  return b;
}

std::vector<uint8_t> inputOf(const TypeInfo& t, int n, int j, size_t count) {
  std::vector<uint8_t> buf(count * t.size);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t b = contribution(t, n, j, i);
    std::memcpy(buf.data() + i * t.size, &b, t.size);
  }
  return buf;
}

// Whether result bits `got` for element i meet the documented rule and bound: non-finite results
// as the rule says; else within 1/2 ulp of the result plus n * 2^(emax + h - P) (divided by n for
// avg), P = 31 for types of 24 bits or less and 62 for float64, of the exact sum.
std::string checkElement(const TypeInfo& t, int n, RedOp op, size_t i, uint64_t got) {
  const uint64_t inf = ((uint64_t{1} << t.expBits) - 1) << (t.precision - 1);
  const uint64_t qnan = inf | (uint64_t{1} << (t.precision - 2));
  const uint64_t sign = uint64_t{1} << (t.precision - 1 + t.expBits);
  bool nan = false, pos = false, neg = false;
  long double s = 0, c = 0, largest = 0;
  for (int j = 0; j < n; ++j) {
    const long double x = valueOf(t, contribution(t, n, j, i));
    if (std::isnan(x)) nan = true;
    if (std::isinf(x)) (x > 0 ? pos : neg) = true;
    if (!std::isfinite(x)) continue;
    largest = std::max(largest, std::fabs(x));
    const long double u = s + x;  // two-sum: s + c is the sum, c the part s lost
    const long double bp = u - s;
    c += (s - (u - bp)) + (x - bp);
    s = u;
  }
  char where[96];
  std::snprintf(where, sizeof(where), "%s %s element %zu: got bits %#llx", dataTypeName(t.type), redOpName(op), i,
                static_cast<unsigned long long>(got));
  if (nan || (pos && neg)) return got == qnan ? "" : std::string(where) + ", expected the quiet NaN";
  if (pos || neg) return got == (inf | (neg ? sign : 0)) ? "" : std::string(where) + ", expected an infinity";
  long double exact = s + c;
  const long double result = valueOf(t, got);
  int h = 1;
  while ((1 << (h - 1)) < n) ++h;
  const int precision = t.type == DataType::kFloat64 ? 62 : 31;
  const int emin = 1 - t.bias;
  long double bound = 0;
  if (largest > 0) bound = n * std::ldexp(1.0L, std::max(std::ilogb(largest), emin) + h - precision);
  if (op == RedOp::kAvg) {
    exact /= n;
    bound /= n;
  }
  if (std::isinf(result)) {
    const long double maxFinite = std::ldexp(2.0L - std::ldexp(1.0L, 1 - t.precision), t.bias);
    return std::fabs(exact) + bound >= maxFinite && (result > 0) == (exact > 0) ? ""
                                                                                : std::string(where) + ", overflowed";
  }
  const int e = result == 0 ? emin : std::max(std::ilogb(result), emin);
  bound += std::ldexp(0.5L, e - (t.precision - 1));
  if (std::fabs(result - exact) <= bound * (1 + 0x1p-40L)) return "";
  std::ostringstream o;
  o.precision(21);
  o << where << " = " << result << ", exact " << exact << ", error " << std::fabs(result - exact) << " > bound "
    << bound;
  return o.str();
}

// FNV-1a over bytes, for the digests the parent compares.
uint64_t digest(const std::vector<uint8_t>& v, uint64_t h = 0xcbf29ce484222325ull) {
  for (uint8_t b : v) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

std::string failed(const Status& s, const std::string& what) { return what + " returned " + s.toString(); }

// One rank's checks on communicator c, contributor j: prints rank 0's digests.
std::string runChecks(Comm& c, int j, bool reversedToo) {
  const int n = c.size();
  std::unique_ptr<Comm> reversed;
  if (reversedToo) {
    auto r = c.split(0, n - 1 - c.rank());
    if (!r.isOk()) return failed(r.status(), "split");
    reversed = std::move(*r);
    if (!reversed->reproducible()) return "split() did not pass the reproducible mode on";
  }
  for (const TypeInfo& t : kTypes) {
    const std::vector<uint8_t> in = inputOf(t, n, j, kCount);
    for (RedOp op : kOps) {
      const std::string what = std::string(dataTypeName(t.type)) + " " + redOpName(op);
      std::vector<uint8_t> full(kCount * t.size), part(kMiddle * t.size), alone(kSplit * t.size);
      std::vector<uint8_t> shifted(kSplit * t.size);
      Status st = c.allReduce(in.data(), full.data(), kCount, t.type, op);
      if (st.isOk()) st = c.allReduce(in.data(), part.data(), kMiddle, t.type, op);
      if (st.isOk()) st = c.allReduce(in.data(), alone.data(), kSplit, t.type, op);
      if (st.isOk()) st = c.allReduce(in.data() + kSplit * t.size, shifted.data(), kSplit, t.type, op);
      if (!st.isOk()) return failed(st, what + " allReduce");
      for (size_t i = 0; i < kCount; ++i) {
        const uint64_t want = load(t, full, i);
        if (i < kMiddle && load(t, part, i) != want)
          return what + ": 4096-element call differs at " + std::to_string(i);
        if (i < kSplit && load(t, alone, i) != want)
          return what + ": 1000-element call differs at " + std::to_string(i);
        if (i >= kSplit && i < 2 * kSplit && load(t, shifted, i - kSplit) != want) {
          return what + ": the call at offset 1000 differs at " + std::to_string(i);
        }
        if (i % 4 == static_cast<size_t>(c.rank()) % 4) {  // the ranks share the exact checks
          std::string err = checkElement(t, n, op, i, want);
          if (!err.empty()) return err;
        }
      }
      // A float32 call long enough for several pieces of the exchanged all-reduce and a tail of the
      // integer form, in place: its first elements are the 65536-element call's.
      if (t.type == DataType::kFloat32 && op == RedOp::kSum) {
        std::vector<uint8_t> large = inputOf(t, n, j, kLarge);
        st = c.allReduce(large.data(), large.data(), kLarge, t.type, op);
        if (!st.isOk()) return failed(st, what + " allReduce in place");
        for (size_t i = 0; i < kCount; ++i) {
          if (load(t, large, i) != load(t, full, i)) {
            return what + ": the in-place " + std::to_string(kLarge) + "-element call differs at " + std::to_string(i);
          }
        }
        for (size_t i = kLarge - kSplit; i < kLarge; ++i) {  // the last piece and the tail, against the bound
          std::string err = checkElement(t, n, op, i, load(t, large, i));
          if (!err.empty()) return "in place: " + err;
        }
      }
      // Reduce-scatter's block and reduce's vector hold the same elements.
      const size_t block = kCount / n;
      std::vector<uint8_t> mine(block * t.size), rooted(kCount * t.size);
      st = c.reduceScatter(in.data(), mine.data(), block, t.type, op);
      if (!st.isOk()) return failed(st, what + " reduceScatter");
      // In place too: the output is this rank's block of its input, one of the values reduced.
      std::vector<uint8_t> inPlace = in;
      uint8_t* myBlock = inPlace.data() + c.rank() * block * t.size;
      st = c.reduceScatter(inPlace.data(), myBlock, block, t.type, op);
      if (!st.isOk()) return failed(st, what + " reduceScatter in place");
      for (size_t i = 0; i < block; ++i) {
        const uint64_t want = load(t, full, c.rank() * block + i);
        if (load(t, mine, i) != want) {
          return what + ": reduceScatter differs from allReduce at " + std::to_string(c.rank() * block + i);
        }
        if (std::memcmp(myBlock + i * t.size, full.data() + (c.rank() * block + i) * t.size, t.size) != 0) {
          return what + ": the in-place reduceScatter differs from allReduce at " +
                 std::to_string(c.rank() * block + i);
        }
      }
      st = c.reduce(in.data(), rooted.data(), kCount, t.type, op, n - 1);
      if (!st.isOk()) return failed(st, what + " reduce");
      if (c.rank() == n - 1 && rooted != full) return what + ": reduce differs from allReduce";
      if (reversed) {
        std::vector<uint8_t> other(kCount * t.size);
        st = reversed->allReduce(in.data(), other.data(), kCount, t.type, op);
        if (!st.isOk()) return failed(st, what + " allReduce on the reversed split");
        if (other != full) return what + ": the reversed rank order gives other bits";
      }
      if (c.rank() == 0) {
        std::printf("DIGEST n=%d %s %016llx\n", n, what.c_str(), static_cast<unsigned long long>(digest(full)));
        std::fflush(stdout);
      }
    }
  }
  return "";
}

struct Variant {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
  bool viaEnv;        // FERRY_REPRODUCIBLE=1 rather than Comm::setReproducible
  int quickSize = 0;  // the quick run's one world size (0: every size)
};

bool allVariants() {
  const char* v = std::getenv("FERRY_TEST_REPRO");
  return v != nullptr && std::string(v) == "all";
}

}  // namespace

TEST_CASE("reproducible sums under every plan, split and rank order", "[mp]") {
  const char* big = "67108864";
  std::vector<Variant> variants = {
      {"tuner", {}, true},
      {"ring and chain", {{"FERRY_ALGO", "ring,chain"}}, false, 3},
      {"two hosts tcp", {{"FERRY_TEST_HOSTS", "2"}, {"FERRY_TRANSPORT", "tcp"}}, false, 4},
      // The pipelined form's outputs through streaming stores (a reduce-scatter's via a staging chunk).
      {"streaming stores", {{"FERRY_STREAM_MIN_BYTES", "1"}}, false, 4},
  };
  if (allVariants()) {
    variants.push_back({"doubling", {{"FERRY_ALGO", "allreduce:doubling"}}, false});
    variants.push_back(
        {"oneshot", {{"FERRY_ALGO", "allreduce:oneshot;reduce:oneshot"}, {"FERRY_MAILBOX_BYTES", big}}, true});
    variants.push_back({"mailbox", {{"FERRY_PROTO", "mailbox"}, {"FERRY_MAILBOX_BYTES", big}}, false});
    variants.push_back({"cma", {{"FERRY_PROTO", "cma"}}, false});
    variants.push_back(
        {"ring ucx", {{"FERRY_TRANSPORT", "ucx"}, {"UCX_NET_DEVICES", "lo"}, {"FERRY_ALGO", "ring,chain"}}, false});
    variants.push_back({"two hosts hierarchical", {{"FERRY_TEST_HOSTS", "2"}, {"FERRY_ALGO", "hierarchical"}}, true});
    variants.push_back({"three hosts", {{"FERRY_TEST_HOSTS", "3"}}, false});
  }
  const std::vector<int> worlds = launchedWorldSize() > 0 ? std::vector<int>{launchedWorldSize()}
                                  : allVariants()         ? std::vector<int>{2, 3, 4}
                                                          : std::vector<int>{3, 4};
  std::map<std::string, std::pair<std::string, std::string>> seen;  // digest key -> (value, first variant)
  for (const Variant& v : variants) {
    for (auto& [k, val] : v.env) setenv(k, val, 1);
    if (v.viaEnv) setenv("FERRY_REPRODUCIBLE", "1", 1);
    for (int n : worlds) {
      if (!allVariants() && v.quickSize != 0 && n != v.quickSize) continue;
      INFO("variant " << v.name << ", world size " << n);
      auto outcomes = runRanks(n, [&](Comm& c) -> std::string {
        if (!v.viaEnv) c.setReproducible(true);
        if (!c.reproducible()) return "the reproducible mode is off";
        // Contributions by rank; the first variant also runs them in the reversed order.
        return runChecks(c, c.rank(), &v == &variants[0]);
      });
      CHECK(summarize(outcomes) == "");
      std::istringstream lines(outcomes[0].output);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("DIGEST ", 0) != 0) continue;
        const std::string key = line.substr(7, line.rfind(' ') - 7), value = line.substr(line.rfind(' ') + 1);
        auto [it, fresh] = seen.emplace(key, std::make_pair(value, std::string(v.name)));
        INFO(key << ": " << v.name << " gives " << value << ", " << it->second.second << " gave " << it->second.first);
        CHECK(it->second.first == value);
      }
    }
    for (auto& [k, val] : v.env) unsetenv(k);
    unsetenv("FERRY_REPRODUCIBLE");
  }
  CHECK(!seen.empty());
}

// Buffers every rank allocated with hostAlloc switch the pipelined form to reading the peers'
// inputs in place (FERRY_TUNE_TRIALS=0: at every size); its bits must be those of private buffers,
// which go through the mailboxes.
TEST_CASE("reproducible sums from shared buffers equal those from private ones", "[mp]") {
  setenv("FERRY_TUNE_TRIALS", "0", 1);
  for (int n : {3, 4}) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [](Comm& c) -> std::string {
      c.setReproducible(true);
      for (const TypeInfo& t : kTypes) {
        const std::vector<uint8_t> in = inputOf(t, c.size(), c.rank(), kCount);
        const size_t bytes = in.size(), block = kCount / c.size();
        auto send = hostAlloc(bytes), recv = hostAlloc(bytes);
        if (!send.isOk() || !recv.isOk()) return std::string("hostAlloc failed");
        auto* s = static_cast<uint8_t*>(*send);
        auto* r = static_cast<uint8_t*>(*recv);
        std::string err;
        for (RedOp op : kOps) {
          const std::string what = std::string(dataTypeName(t.type)) + " " + redOpName(op);
          std::vector<uint8_t> want(bytes), wantBlock(block * t.size);
          std::memcpy(s, in.data(), bytes);
          Status st = c.allReduce(in.data(), want.data(), kCount, t.type, op);
          if (st.isOk()) st = c.reduceScatter(in.data(), wantBlock.data(), block, t.type, op);
          if (st.isOk()) st = c.allReduce(s, r, kCount, t.type, op);
          if (!st.isOk()) err = failed(st, what);
          if (err.empty() && std::memcmp(r, want.data(), bytes) != 0) err = what + ": shared allReduce differs";
          // In place: the input's own block receives the result.
          uint8_t* mine = s + c.rank() * block * t.size;
          if (err.empty()) st = c.reduceScatter(s, mine, block, t.type, op);
          if (err.empty() && !st.isOk()) err = failed(st, what + " reduceScatter");
          if (err.empty() && std::memcmp(mine, wantBlock.data(), block * t.size) != 0) {
            err = what + ": shared in-place reduceScatter differs";
          }
          if (!err.empty()) break;
        }
        (void)hostFree(s);
        (void)hostFree(r);
        if (!err.empty()) return err;
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
  unsetenv("FERRY_TUNE_TRIALS");
}
