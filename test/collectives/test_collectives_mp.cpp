// Every collective × data type × op × world size {1,2,3,4,8} × count {0,1,7,252,1023,1048579} ×
// in-place/out-of-place, on real processes over each transport (meson.build's variants), compared
// exactly with closed-form values.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/memory.hpp"
#include "test/common/mp_harness.hpp"
#include "test/common/values.hpp"

using namespace ferry;
using namespace ferry::test;

namespace {

// 252: 1008 bytes of float32 fill a line slot exactly (the largest call through one), 2016 of
// float64 do not.
const size_t kCounts[] = {0, 1, 7, 252, 1023, 1048579};
const size_t kQuickLargest = 262147;
const RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

// FERRY_TEST_SWEEP=quick: the variants that force one algorithm or transport (meson.build) run
// fewer world sizes and types and a smaller largest count; the default variant runs everything.
// FERRY_TEST_SWEEP=small: as quick, without the largest count (with a small FERRY_SLICE_BYTES the
// pipelined algorithms still cut 1023 elements into several slices).
bool small() {
  const char* v = std::getenv("FERRY_TEST_SWEEP");
  return v != nullptr && std::string(v) == "small";
}
bool quick() {
  const char* v = std::getenv("FERRY_TEST_SWEEP");
  return v != nullptr && (std::string(v) == "quick" || small());
}
// FERRY_TEST_WORLDS=5,6,7: these world sizes instead (the logarithmic algorithms' non-powers of two).
std::vector<int> worlds() {
  if (launchedWorldSize() > 0) return {launchedWorldSize()};  // a rank of a launched job (mp_harness.hpp)
  if (const char* v = std::getenv("FERRY_TEST_WORLDS"); v != nullptr && *v != '\0') {
    std::vector<int> out;
    for (const char* p = v; *p != '\0';) {
      char* end = nullptr;
      const long n = std::strtol(p, &end, 10);
      if (end == p || n < 1 || n > 64) return {};  // runSweep fails on no world: a bad value is not ignored
      out.push_back(static_cast<int>(n));
      p = *end == ',' ? end + 1 : end;
    }
    return out;
  }
  if (quick()) return {2, 3, 4};
  return {1, 2, 3, 4, 8};
}
std::vector<DataType> types() {
  if (quick()) return {DataType::kInt8, DataType::kFloat32, DataType::kFloat64, DataType::kBfloat16};
  return allTypes();
}

std::string label(const char* coll, DataType t, RedOp op, size_t count, bool inPlace, int extra = -1) {
  std::string s = std::string(coll) + "(" + dataTypeName(t) + ", " + redOpName(op) + ", count " +
                  std::to_string(count) + (inPlace ? ", in-place" : ", out-of-place");
  if (extra >= 0) s += ", root " + std::to_string(extra);
  return s + ")";
}

using Sweep = std::function<std::string(Comm&, DataType, RedOp, size_t, bool)>;

// Runs `sweep` over every type, op, count and placement on each world size.
// perRankBlocks: the count is per rank and buffers hold n blocks (reduce-scatter, all-gather,
// all-to-all); the largest count is then divided by n so every world size moves about as many
// bytes (still several chunks of every pipelined algorithm).
void runSweep(const Sweep& sweep, bool withOps, bool perRankBlocks = false) {
  const std::vector<int> ws = worlds();
  REQUIRE_FALSE(ws.empty());
  for (int n : ws) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [&](Comm& c) -> std::string {
      for (DataType t : types()) {
        for (RedOp op : kOps) {
          if (!withOps && op != RedOp::kSum) continue;
          for (size_t count : kCounts) {
            // The quick variants' largest count is a quarter: still several chunks of every
            // pipelined algorithm (1 MiB of float32), at a quarter of the time.
            if (small() && count == kCounts[std::size(kCounts) - 1]) continue;
            if (quick() && count == kCounts[std::size(kCounts) - 1]) count = kQuickLargest;
            if (perRankBlocks && count >= kQuickLargest) count = (count / c.size()) | 1;
            for (bool inPlace : {false, true}) {
              std::string err = sweep(c, t, op, count, inPlace);
              if (!err.empty()) return err;
            }
          }
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

std::string failed(const Status& s, const std::string& what) { return what + " returned " + s.toString(); }

// Plain buffers' storage, handed from one call's buffers to the next: freed and fresh pages cost
// a page fault per 4 KiB, and per 8 MiB call that outweighed the collective (docs/ARCHITECTURE.md,
// "Building and testing"). Every buffer is filled in full before its call, so no value carries over.
std::vector<std::vector<uint8_t>>& spareStorage() {
  static std::vector<std::vector<uint8_t>> spare;
  return spare;
}

// A collective's buffer. FERRY_TEST_BUFFERS=shared: from ferry::hostAlloc on every rank (peers
// then read it in place); =shared-odd: on odd ranks only (every rank must see that not all are).
class Buffer {
 public:
  Buffer(const Comm& c, size_t bytes, uint8_t fill = 0) : bytes_(bytes) {
    const char* v = std::getenv("FERRY_TEST_BUFFERS");
    const std::string mode = v != nullptr ? v : "";
    if (mode == "shared" || (mode == "shared-odd" && c.rank() % 2 == 1)) {
      auto p = hostAlloc(bytes);
      if (!p.isOk()) {  // in a rank's process: no Catch2 assertions here
        std::fprintf(stderr, "rank %d: %s\n", c.rank(), p.status().toString().c_str());
        std::abort();
      }
      shared_ = static_cast<uint8_t*>(*p);
    } else {
      auto& spare = spareStorage();
      if (!spare.empty()) {
        vec_ = std::move(spare.back());
        spare.pop_back();
      }
      vec_.resize(bytes);
    }
    std::memset(data(), fill, bytes);
  }
  ~Buffer() {
    if (shared_ != nullptr && !hostFree(shared_).isOk()) std::abort();
    if (shared_ == nullptr) spareStorage().push_back(std::move(vec_));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data() { return shared_ != nullptr ? shared_ : vec_.data(); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  uint8_t* shared_ = nullptr;
  std::vector<uint8_t> vec_;
};

}  // namespace

TEST_CASE("allReduce", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        Buffer in(c, count * es + 1), out(c, count * es + 1);
        fillPattern(t, in.data(), count,
                    pattern(t, kReducePeriod, [&](size_t i) { return reduceInput(t, op, n, r, i); }));
        void* dst = inPlace ? in.data() : out.data();
        std::string what = label("allReduce", t, op, count, inPlace);
        Status s = c.allReduce(in.data(), dst, count, t, op);
        if (!s.isOk()) return failed(s, what);
        return comparePattern(t, dst, count,
                              pattern(t, kReducePeriod, [&](size_t i) { return reduceExpected(t, op, n, i); }), 0,
                              what);
      },
      true);
}

TEST_CASE("reduceScatter", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        Buffer in(c, count * n * es + 1), out(c, count * es + 1);
        fillPattern(t, in.data(), count * n,
                    pattern(t, kReducePeriod, [&](size_t i) { return reduceInput(t, op, n, r, i); }));
        void* dst = inPlace ? in.data() + r * count * es : out.data();
        std::string what = label("reduceScatter", t, op, count, inPlace);
        Status s = c.reduceScatter(in.data(), dst, count, t, op);
        if (!s.isOk()) return failed(s, what);
        return comparePattern(t, dst, count,
                              pattern(t, kReducePeriod, [&](size_t i) { return reduceExpected(t, op, n, i); }),
                              r * count, what);
      },
      true, true);
}

TEST_CASE("allGather", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        Buffer in(c, count * es + 1), out(c, count * n * es + 1);
        uint8_t* src = inPlace ? out.data() + r * count * es : in.data();
        fillPattern(t, src, count, pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, r, i); }));
        std::string what = label("allGather", t, op, count, inPlace);
        Status s = c.allGather(src, out.data(), count, t);
        if (!s.isOk()) return failed(s, what);
        for (int b = 0; b < n; ++b) {
          std::string err = comparePattern(t, out.data() + b * count * es, count,
                                           pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, b, i); }), 0,
                                           what + " block " + std::to_string(b));
          if (!err.empty()) return err;
        }
        return "";
      },
      false, true);
}

TEST_CASE("allToAll", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        Buffer in(c, count * n * es + 1), out(c, count * n * es + 1);
        fillPattern(t, in.data(), count * n, pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, r, i); }));
        auto* dst = inPlace ? in.data() : out.data();
        std::string what = label("allToAll", t, op, count, inPlace);
        Status s = c.allToAll(in.data(), dst, count, t);
        if (!s.isOk()) return failed(s, what);
        // Block j of the output came from rank j's block r.
        for (int j = 0; j < n; ++j) {
          std::string err = comparePattern(t, dst + j * count * es, count,
                                           pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, j, i); }),
                                           r * count, what + " block " + std::to_string(j));
          if (!err.empty()) return err;
        }
        return "";
      },
      false, true);
}

// In place on odd ranks, out of place on even ones (each rank's own choice): no rank may return
// while a peer still reads its input. Every rank scribbles over its input as soon as its call
// returns, so a peer that read it late gets a wrong block. Blocks of several chunks (4 MiB of
// int32 per peer), three calls in a row.
TEST_CASE("allToAll in place on some ranks", "[mp]") {
  for (int n : {2, 3, 4}) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [](Comm& c) -> std::string {
      const int n = c.size(), r = c.rank();
      const DataType t = DataType::kInt32;
      const size_t es = dataTypeSize(t);
      const bool inPlace = r % 2 == 1;
      for (size_t count : {size_t{1}, size_t{1048579}}) {
        for (int call = 0; call < 3; ++call) {
          Buffer in(c, count * n * es), out(c, count * n * es);
          auto input = [&](int from, size_t i) { return moveInput(t, (from + call) % 7, i); };
          fillPattern(t, in.data(), count * n, pattern(t, kMovePeriod, [&](size_t i) { return input(r, i); }));
          uint8_t* dst = inPlace ? in.data() : out.data();
          std::string what = label("allToAll", t, RedOp::kSum, count, inPlace) + " call " + std::to_string(call);
          Status s = c.allToAll(in.data(), dst, count, t);
          if (!s.isOk()) return failed(s, what);
          if (!inPlace) std::memset(in.data(), 0xA5, count * n * es);  // the input is the caller's again
          for (int j = 0; j < n; ++j) {
            std::string err = comparePattern(t, dst + j * count * es, count,
                                             pattern(t, kMovePeriod, [&](size_t i) { return input(j, i); }), r * count,
                                             what + " block " + std::to_string(j));
            if (!err.empty()) return err;
          }
          if (inPlace) std::memset(in.data(), 0xA5, count * n * es);
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

TEST_CASE("broadcast", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        for (int root : {0, n - 1}) {
          Buffer in(c, count * es + 1), out(c, count * es + 1, 0xEE);
          uint8_t* src = inPlace ? out.data() : in.data();
          auto pat = pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, root, i); });
          if (r == root) fillPattern(t, src, count, pat);
          std::string what = label("broadcast", t, op, count, inPlace, root);
          Status s = c.broadcast(src, out.data(), count, t, root);
          if (!s.isOk()) return failed(s, what);
          std::string err = comparePattern(t, out.data(), count, pat, 0, what);
          if (!err.empty()) return err;
        }
        return "";
      },
      false);
}

TEST_CASE("reduce", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp op, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        for (int root : {0, n - 1}) {
          Buffer in(c, count * es + 1), out(c, count * es + 1);
          fillPattern(t, in.data(), count,
                      pattern(t, kReducePeriod, [&](size_t i) { return reduceInput(t, op, n, r, i); }));
          void* dst = inPlace ? in.data() : out.data();
          std::string what = label("reduce", t, op, count, inPlace, root);
          Status s = c.reduce(in.data(), dst, count, t, op, root);
          if (!s.isOk()) return failed(s, what);
          if (r == root) {
            std::string err =
                comparePattern(t, dst, count,
                               pattern(t, kReducePeriod, [&](size_t i) { return reduceExpected(t, op, n, i); }), 0,
                               what);
            if (!err.empty()) return err;
          }
        }
        return "";
      },
      true);
}

// The bitwise ops on every integer type, through allReduce and reduce to the first and the last
// rank. Apart from the sweeps: they exist for the integer types only, and the sweep variants would
// multiply their cost.
TEST_CASE("bitwise allReduce and reduce", "[mp]") {
  const std::vector<int> sizes =
      launchedWorldSize() > 0 ? std::vector<int>{launchedWorldSize()} : std::vector<int>{2, 3, 4};
  for (int n : sizes) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [&](Comm& c) -> std::string {
      const int r = c.rank();
      for (DataType t : allTypes()) {
        if (isFloatingPoint(t)) continue;
        const size_t es = dataTypeSize(t);
        for (RedOp op : {RedOp::kBand, RedOp::kBor, RedOp::kBxor}) {
          const auto input = pattern(t, kReducePeriod, [&](size_t i) { return reduceInput(t, op, n, r, i); });
          const auto want = pattern(t, kReducePeriod, [&](size_t i) { return reduceExpected(t, op, n, i); });
          for (size_t count : {size_t{1}, size_t{7}, size_t{1023}, kQuickLargest}) {
            for (bool inPlace : {false, true}) {
              Buffer in(c, count * es + 1), out(c, count * es + 1);
              fillPattern(t, in.data(), count, input);
              void* dst = inPlace ? in.data() : out.data();
              std::string what = label("allReduce", t, op, count, inPlace);
              Status s = c.allReduce(in.data(), dst, count, t, op);
              if (!s.isOk()) return failed(s, what);
              std::string err = comparePattern(t, dst, count, want, 0, what);
              if (!err.empty()) return err;
              for (int root : {0, n - 1}) {
                fillPattern(t, in.data(), count, input);
                what = label("reduce", t, op, count, inPlace, root);
                s = c.reduce(in.data(), dst, count, t, op, root);
                if (!s.isOk()) return failed(s, what);
                err = r == root ? comparePattern(t, dst, count, want, 0, what) : "";
                if (!err.empty()) return err;
              }
            }
          }
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

namespace {

// Min and max over special values (docs/RELIABILITY.md, "Special values in min and max"): NaN,
// -0, +0, infinities and two ordinary values, each with its bits per floating type and its order.
struct Special {
  uint64_t bits[4];  // float32, float64, float16, bfloat16
  double value;      // the order of the non-NaN values; NaN for the NaNs
};
const Special kSpecials[] = {
    {{0x7FC00001, 0x7FF8000000000001, 0x7E01, 0x7FC1}, NAN},
    {{0xFFC00002, 0xFFF8000000000002, 0xFE02, 0xFFC2}, NAN},
    {{0x00000000, 0x0000000000000000, 0x0000, 0x0000}, 0.0},
    {{0x80000000, 0x8000000000000000, 0x8000, 0x8000}, -0.0},
    {{0x7F800000, 0x7FF0000000000000, 0x7C00, 0x7F80}, INFINITY},
    {{0xFF800000, 0xFFF0000000000000, 0xFC00, 0xFF80}, -INFINITY},
    {{0x3F800000, 0x3FF0000000000000, 0x3C00, 0x3F80}, 1.0},
    {{0xBF800000, 0xBFF0000000000000, 0xBC00, 0xBF80}, -1.0},
};
constexpr size_t kNumSpecials = std::size(kSpecials);
const DataType kSpecialTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBfloat16};

// Rank r's special at element i: every combination of specials over up to four ranks occurs.
size_t specialAt(int r, size_t i) {
  size_t k = i;
  for (int j = 0; j < r; ++j) k /= kNumSpecials;
  return k % kNumSpecials;
}

// The rule on two specials' bits (type index ti): a NaN wins, of two NaNs the larger bits;
// max(-0, +0) = +0, min = -0; else the ordered choice. Symmetric, so any fold order gives it.
uint64_t specialRule(bool isMax, size_t ti, size_t a, size_t b) {
  const uint64_t ba = kSpecials[a].bits[ti], bb = kSpecials[b].bits[ti];
  const double va = kSpecials[a].value, vb = kSpecials[b].value;
  if (va != va && vb != vb) return ba > bb ? ba : bb;
  if (va != va) return ba;
  if (vb != vb) return bb;
  if (va == vb) return isMax ? (ba & bb) : (ba | bb);
  return isMax == (va > vb) ? ba : bb;
}

size_t specialIndex(size_t ti, uint64_t bits) {
  for (size_t k = 0; k < kNumSpecials; ++k) {
    if (kSpecials[k].bits[ti] == bits) return k;
  }
  return kNumSpecials;
}

// Element i of the reduction over n ranks (ranks folded from the last: the rule makes it irrelevant).
uint64_t specialExpected(bool isMax, size_t ti, int n, size_t i) {
  uint64_t acc = kSpecials[specialAt(n - 1, i)].bits[ti];
  for (int r = n - 2; r >= 0; --r) acc = specialRule(isMax, ti, specialIndex(ti, acc), specialAt(r, i));
  return acc;
}

std::string compareSpecials(const uint8_t* got, size_t es, size_t count, size_t first, const std::string& what,
                            const std::function<uint64_t(size_t)>& want) {
  for (size_t i = 0; i < count; ++i) {
    uint64_t g = 0;
    std::memcpy(&g, got + i * es, es);
    if (g != want(first + i)) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "%s: element %zu is 0x%llx, expected 0x%llx", what.c_str(), i,
                    static_cast<unsigned long long>(g), static_cast<unsigned long long>(want(first + i)));
      return buf;
    }
  }
  return "";
}

}  // namespace

// Every combination of NaN, -0, +0, +-Inf, 1 and -1 over the ranks, in allReduce, reduce and
// reduceScatter with min and max: the documented rule, whatever plan runs (meson.build runs it
// under each algorithm).
TEST_CASE("min and max special values", "[mp]") {
  // Quick: four ranks only (every combination of the specials over them).
  const std::vector<int> sizes = launchedWorldSize() > 0 ? std::vector<int>{launchedWorldSize()}
                                 : quick()               ? std::vector<int>{4}
                                                         : std::vector<int>{2, 3, 4};
  for (int n : sizes) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [&](Comm& c) -> std::string {
      const int r = c.rank();
      size_t combos = 1;
      for (int j = 0; j < n; ++j) combos *= kNumSpecials;
      for (size_t ti = 0; ti < std::size(kSpecialTypes); ++ti) {
        const DataType t = kSpecialTypes[ti];
        const size_t es = dataTypeSize(t);
        for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
          const bool isMax = op == RedOp::kMax;
          auto want = [&](size_t i) { return specialExpected(isMax, ti, n, i % combos); };
          // Every combination once, then enough of them for the pipelined and chunked plans.
          for (size_t count : {combos, size_t{65539}}) {
            for (bool inPlace : {false, true}) {
              const size_t total = count * static_cast<size_t>(n);
              Buffer in(c, total * es + 1), out(c, total * es + 1);
              for (size_t i = 0; i < total; ++i) {
                std::memcpy(in.data() + i * es, &kSpecials[specialAt(r, i % combos)].bits[ti], es);
              }
              void* dst = inPlace ? in.data() : out.data();
              std::string what = label("allReduce", t, op, count, inPlace);
              Status s = c.allReduce(in.data(), dst, count, t, op);
              if (!s.isOk()) return failed(s, what);
              std::string err = compareSpecials(static_cast<uint8_t*>(dst), es, count, 0, what, want);
              if (!err.empty()) return err;
              for (int root : {0, n - 1}) {
                for (size_t i = 0; i < count; ++i) {
                  std::memcpy(in.data() + i * es, &kSpecials[specialAt(r, i % combos)].bits[ti], es);
                }
                what = label("reduce", t, op, count, inPlace, root);
                s = c.reduce(in.data(), dst, count, t, op, root);
                if (!s.isOk()) return failed(s, what);
                err = r == root ? compareSpecials(static_cast<uint8_t*>(dst), es, count, 0, what, want) : "";
                if (!err.empty()) return err;
              }
              // Reduce-scatter: block r of every rank's n blocks; element i of the whole is index i.
              for (size_t i = 0; i < total; ++i) {
                std::memcpy(in.data() + i * es, &kSpecials[specialAt(r, i % combos)].bits[ti], es);
              }
              const size_t block = count;
              void* rsOut = inPlace ? in.data() + static_cast<size_t>(r) * block * es : out.data();
              what = label("reduceScatter", t, op, block, inPlace);
              s = c.reduceScatter(in.data(), rsOut, block, t, op);
              if (!s.isOk()) return failed(s, what);
              err =
                  compareSpecials(static_cast<uint8_t*>(rsOut), es, block, static_cast<size_t>(r) * block, what, want);
              if (!err.empty()) return err;
            }
          }
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

TEST_CASE("sendRecv and barrier", "[mp]") {
  runSweep(
      [](Comm& c, DataType t, RedOp, size_t count, bool inPlace) -> std::string {
        const int n = c.size(), r = c.rank();
        const size_t es = dataTypeSize(t);
        if (inPlace) {
          Status s = c.barrier();
          return s.isOk() ? "" : failed(s, "barrier");
        }
        if (n == 1) return "";
        // Ring shift: even ranks send first, odd ranks receive first (works for any n with blocking calls).
        Buffer in(c, count * es + 1), out(c, count * es + 1);
        fillPattern(t, in.data(), count, pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, r, i); }));
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        std::string what = label("send/recv", t, RedOp::kSum, count, false);
        Status s1, s2;
        if (r % 2 == 0) {
          s1 = c.send(in.data(), count, t, next);
          s2 = c.recv(out.data(), count, t, prev);
        } else {
          s2 = c.recv(out.data(), count, t, prev);
          s1 = c.send(in.data(), count, t, next);
        }
        if (!s1.isOk()) return failed(s1, what);
        if (!s2.isOk()) return failed(s2, what);
        return comparePattern(t, out.data(), count,
                              pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, prev, i); }), 0, what);
      },
      false);
}

// Point-to-point calls between two ranks while the others go on with the collectives. A stream of
// small broadcasts is acknowledged by its chain's tail to the root, and one of reduces by the root
// to the chain's head, each only at the acknowledging rank's next different call (Exec::begin).
// Here the expecting rank (the broadcast's root, the reduce's head) talks to the next rank of its
// chain while the acknowledging rank is in the stream's next call, waiting on that rank: the
// expecting rank must not wait for the acknowledgement before its point-to-point call, or no rank
// gets on.
TEST_CASE("point-to-point calls between a stream's calls", "[mp]") {
  for (int n : worlds()) {
    if (n < 2) continue;
    INFO("world size " << n);
    auto outcomes = runRanks(n, [](Comm& c) -> std::string {
      const int n = c.size(), r = c.rank();
      // Two ranks swap a word: `a` sends first.
      auto swap = [&](int a, int b, uint64_t value) -> std::string {
        if (r != a && r != b) return "";
        const int peer = r == a ? b : a;
        uint64_t word = r == a ? value : 0;
        Status s1 = r == a ? c.send(&word, 1, DataType::kUint64, peer) : c.recv(&word, 1, DataType::kUint64, peer);
        Status s2 = r == a ? c.recv(&word, 1, DataType::kUint64, peer) : c.send(&word, 1, DataType::kUint64, peer);
        const std::string what = "send/recv between " + std::to_string(a) + " and " + std::to_string(b);
        if (!s1.isOk()) return failed(s1, what);
        if (!s2.isOk()) return failed(s2, what);
        return word == value ? "" : what + ": got " + std::to_string(word);
      };
      for (int root : {0, n - 1}) {
        float v[4], sum[4];
        for (int k = 0; k < 4; ++k) {
          const std::string call = " " + std::to_string(k) + " of root " + std::to_string(root);
          for (int i = 0; i < 4; ++i) v[i] = r == root ? static_cast<float>(100 * root + 10 * k + i) : -1.0f;
          Status s = c.broadcast(v, v, 4, DataType::kFloat32, root);
          if (!s.isOk()) return failed(s, "broadcast" + call);
          for (int i = 0; i < 4; ++i) {
            if (v[i] != static_cast<float>(100 * root + 10 * k + i)) {
              return "broadcast" + call + ": element " + std::to_string(i) + " is " + std::to_string(v[i]);
            }
          }
          if (k == 1) {
            if (std::string e = swap(root, (root + 1) % n, 0x5eed00u + static_cast<uint64_t>(root)); !e.empty())
              return e;
          }
        }
        for (int k = 0; k < 4; ++k) {
          const std::string call = " " + std::to_string(k) + " to root " + std::to_string(root);
          for (int i = 0; i < 4; ++i) v[i] = static_cast<float>(r + k + i);
          Status s = c.reduce(v, sum, 4, DataType::kFloat32, RedOp::kSum, root);
          if (!s.isOk()) return failed(s, "reduce" + call);
          for (int i = 0; r == root && i < 4; ++i) {
            const float want = static_cast<float>(n * (n - 1) / 2 + n * (k + i));
            if (sum[i] != want)
              return "reduce" + call + ": element " + std::to_string(i) + " is " + std::to_string(sum[i]);
          }
          if (k == 1) {
            const int head = (root + 1) % n;
            if (std::string e = swap(head, (head + 1) % n, 0xfeed00u + static_cast<uint64_t>(root)); !e.empty())
              return e;
          }
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

TEST_CASE("sendRecv batch in any order", "[mp]") {
  // Every rank sends (peer+1)*(rank+1)*97 elements to every rank, itself included, and lists its
  // sends and receives in an order that would deadlock as blocking calls.
  for (int n : {1, 2, 3, 4}) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [](Comm& c) -> std::string {
      const int n = c.size(), r = c.rank();
      const DataType t = DataType::kInt32;
      auto len = [](int from, int to) { return static_cast<size_t>((to + 1) * (from + 1) * 97); };
      std::vector<std::vector<uint8_t>> in(n), out(n);
      std::vector<P2pOp> ops;
      for (int k = 0; k < n; ++k) {
        int p = (r % 2 == 0) ? k : n - 1 - k;
        in[p].resize(len(r, p) * 4);
        out[p].resize(len(p, r) * 4);
        fillPattern(t, in[p].data(), len(r, p),
                    pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, r * 16 + p, i); }));
        P2pOp rv = P2pOp::recv(out[p].data(), len(p, r), t, p), sd = P2pOp::send(in[p].data(), len(r, p), t, p);
        if (r % 2 == 0) {
          ops.push_back(rv);
          ops.push_back(sd);
        } else {
          ops.push_back(sd);
          ops.push_back(rv);
        }
      }
      Status s = c.sendRecv(ops);
      if (!s.isOk()) return failed(s, "sendRecv batch");
      for (int p = 0; p < n; ++p) {
        std::string err = comparePattern(t, out[p].data(), len(p, r),
                                         pattern(t, kMovePeriod, [&](size_t i) { return moveInput(t, p * 16 + r, i); }),
                                         0, "from rank " + std::to_string(p));
        if (!err.empty()) return err;
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}

// Broadcasts and one-shot reduces leave their data in the writers' line slots, eager heaps or
// mailboxes and return, so writers run ahead of their readers until a claim stops them (80 calls
// of 64 and 256 KiB wrap the 4 MiB heap). A stream of such calls, whose readers start late, must
// still deliver every call's own data: a claim that let a writer reuse memory too early shows up
// as a later call's values. Run with FERRY_PROTO=mailbox and one-shot reduces (meson.build).
TEST_CASE("one-way calls run ahead", "[mp]") {
  const DataType t = DataType::kFloat32;
  for (int n : {2, 3}) {
    INFO("world size " << n);
    auto outcomes = runRanks(n, [t](Comm& c) -> std::string {
      const int n = c.size(), r = c.rank();
      constexpr int kCalls = 80;
      for (size_t bytes : {size_t{8} << 10, size_t{64} << 10, size_t{256} << 10}) {
        const size_t count = bytes / 4;
        for (int root : {0, n - 1}) {
          std::vector<std::vector<float>> got(kCalls, std::vector<float>(count, -1.0f));
          std::vector<float> in(count);
          // The readers (the root of the reduces) start late: the others run ahead meanwhile.
          if (r != root) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          for (int k = 0; k < kCalls; ++k) {
            for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((k * 131 + i) % 1021);
            Status s = c.broadcast(in.data(), got[k].data(), count, t, root);
            if (!s.isOk()) return failed(s, "broadcast of " + std::to_string(bytes) + " B, call " + std::to_string(k));
          }
          for (int k = 0; k < kCalls; ++k) {
            for (size_t i = 0; i < count; ++i) {
              if (got[k][i] != static_cast<float>((k * 131 + i) % 1021)) {
                return "broadcast of " + std::to_string(bytes) + " B from root " + std::to_string(root) + ", call " +
                       std::to_string(k) + ": element " + std::to_string(i) + " is " + std::to_string(got[k][i]);
              }
            }
          }
          if (r == root) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          for (int k = 0; k < kCalls; ++k) {
            for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((k * 7 + r * 3 + i) % 509);
            Status s = c.reduce(in.data(), got[k].data(), count, t, RedOp::kSum, root);
            if (!s.isOk()) return failed(s, "reduce of " + std::to_string(bytes) + " B, call " + std::to_string(k));
          }
          if (r != root) continue;
          for (int k = 0; k < kCalls; ++k) {
            for (size_t i = 0; i < count; ++i) {
              float want = 0;
              for (int p = 0; p < n; ++p) want += static_cast<float>((k * 7 + p * 3 + i) % 509);
              if (got[k][i] != want) {
                return "reduce of " + std::to_string(bytes) + " B to root " + std::to_string(root) + ", call " +
                       std::to_string(k) + ": element " + std::to_string(i) + " is " + std::to_string(got[k][i]) +
                       ", expected " + std::to_string(want);
              }
            }
          }
        }
      }
      return "";
    });
    CHECK(summarize(outcomes) == "");
  }
}
