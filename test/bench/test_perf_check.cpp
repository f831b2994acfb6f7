// The exact check: conversions, closed-form results in every type whatever the order of
// reduction, and the per-collective comparison that counts wrong elements.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "bench/perf/check_values.hpp"
#include "bench/perf/dtypes.hpp"
#include "bench/perf/options.hpp"

namespace {

using ferry::DataType;
using ferry::RedOp;
using namespace ferry::perf;

constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                          RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};

// a op b in `type`, the way a reduction kernel computes it: exactly, then rounded to the type.
uint64_t combine(DataType type, RedOp op, uint64_t a, uint64_t b) {
  const double x = loadValue(type, &a), y = loadValue(type, &b);
  double r = 0;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: r = x + y; break;
    case RedOp::kProd: r = x * y; break;
    case RedOp::kMax: r = std::max(x, y); break;
    case RedOp::kMin: r = std::min(x, y); break;
    case RedOp::kBand: r = static_cast<double>(static_cast<int64_t>(x) & static_cast<int64_t>(y)); break;
    case RedOp::kBor: r = static_cast<double>(static_cast<int64_t>(x) | static_cast<int64_t>(y)); break;
    case RedOp::kBxor: r = static_cast<double>(static_cast<int64_t>(x) ^ static_cast<int64_t>(y)); break;
  }
  return encoder(type)(r);
}

// Fold `values` (element bits) in the order `order`, or as a pairwise tree when `order` is empty.
uint64_t reduceInOrder(DataType type, RedOp op, const std::vector<uint64_t>& values, std::vector<size_t> order) {
  if (order.empty()) {
    std::vector<uint64_t> level = values;
    while (level.size() > 1) {
      std::vector<uint64_t> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(combine(type, op, level[i], level[i + 1]));
      if (level.size() % 2) next.push_back(level.back());
      level = next;
    }
    return level[0];
  }
  uint64_t acc = values[order[0]];
  for (size_t i = 1; i < order.size(); ++i) acc = combine(type, op, acc, values[order[i]]);
  return acc;
}

// avg's last step, as ferry's kernels do it: floats divide in float32 (the 16-bit types too) or
// float64, integers truncate.
uint64_t divideAvg(DataType type, uint64_t sum, int n) {
  const double s = loadValue(type, &sum);
  if (type == DataType::kFloat64) return encoder(type)(s / n);
  if (typeInfo(type).isFloat) return encoder(type)(static_cast<float>(s) / static_cast<float>(n));
  return encoder(type)(std::trunc(s / n));
}

}  // namespace

TEST_CASE("half and bfloat16 conversions round to nearest even and round-trip") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    REQUIRE(floatToHalf(halfToFloat(static_cast<uint16_t>(h))) == h);
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) continue;
    REQUIRE(floatToBfloat16(bfloat16ToFloat(static_cast<uint16_t>(h))) == h);
  }
  CHECK(floatToHalf(2049.0f) == floatToHalf(2048.0f));  // tie to even
  CHECK(floatToHalf(2051.0f) == floatToHalf(2052.0f));
  CHECK(floatToHalf(65520.0f) == 0x7c00);               // rounds past the largest half
  CHECK(halfToFloat(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(floatToBfloat16(257.0f) == floatToBfloat16(256.0f));
  CHECK(floatToBfloat16(259.0f) == floatToBfloat16(260.0f));
}

TEST_CASE("ulp distance counts representable values between two elements") {
  const uint16_t one = floatToHalf(1.0f), next = static_cast<uint16_t>(one + 1), third = static_cast<uint16_t>(one + 3);
  CHECK(ulpDistance(DataType::kFloat16, &one, &one) == 0);
  CHECK(ulpDistance(DataType::kFloat16, &one, &next) == 1);
  CHECK(ulpDistance(DataType::kFloat16, &third, &one) == 3);
  const float plus = 0.0f, minus = -0.0f;
  CHECK(ulpDistance(DataType::kFloat32, &plus, &minus) == 0);
  const int32_t a = -2, b = 3;
  CHECK(ulpDistance(DataType::kInt32, &a, &b) == 5);
}

TEST_CASE("reduction results are exact in every type and any order of combination") {
  for (DataType type : allTypes()) {
    for (RedOp op : kOps) {
      if (!opRunsOn(op, type)) continue;  // the bitwise ops: integer types only
      for (int n : {1, 2, 3, 4, 5, 8, 17, 64, 300}) {
        CAPTURE(typeInfo(type).ferryName, static_cast<int>(op), n);
        const CheckPlan plan(Coll::kAllReduce, type, op, n, 0, 0, 42);
        std::vector<size_t> forward(static_cast<size_t>(n));
        std::iota(forward.begin(), forward.end(), 0);
        std::vector<size_t> backward(forward.rbegin(), forward.rend());
        std::vector<size_t> rotated = forward;
        std::rotate(rotated.begin(), rotated.begin() + n / 2, rotated.end());
        for (size_t g = 0; g < 64; ++g) {
          std::vector<uint64_t> in(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            in[static_cast<size_t>(r)] = encoder(type)(static_cast<double>(plan.reductionInput(r, g)));
          }
          const uint64_t want = plan.expectedBits(g);
          for (const auto& order : {forward, backward, rotated, std::vector<size_t>{}}) {
            uint64_t got = reduceInOrder(type, op, in, order);
            if (op == RedOp::kAvg) got = divideAvg(type, got, n);
            if (op == RedOp::kAvg) REQUIRE(ulpDistance(type, &got, &want) <= 2);
            else REQUIRE(got == want);
          }
        }
      }
    }
  }
}

TEST_CASE("every rank's own fill matches the closed form of its inputs") {
  for (DataType type : {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kBfloat16}) {
    const int n = 5;
    for (int r = 0; r < n; ++r) {
      const CheckPlan plan(Coll::kReduceScatter, type, RedOp::kSum, n, r, 0, 7);
      const size_t elt = typeInfo(type).size;
      std::vector<uint8_t> buf(100 * elt);
      plan.fillInput(buf.data(), 100);
      for (size_t g = 0; g < 100; ++g) {
        uint64_t got = 0;
        std::memcpy(&got, buf.data() + g * elt, elt);
        REQUIRE(got == encoder(type)(static_cast<double>(plan.reductionInput(r, g))));
      }
    }
  }
}

// Simulates each collective in memory for n ranks from the plans' inputs, checks that the
// comparison finds nothing wrong, then corrupts one element and expects exactly one.
TEST_CASE("countWrong accepts each collective's exact result and catches one wrong element") {
  const int n = 3;
  const size_t pc = 48;  // paramCount: a multiple of 16 bytes in every type
  for (Coll coll : allColls()) {
    for (DataType type : {DataType::kUint8, DataType::kFloat16, DataType::kFloat64}) {
      CAPTURE(collInfo(coll).name, typeInfo(type).ferryName);
      const size_t elt = typeInfo(type).size;
      const int root = 1;
      const CollCounts c =
          collCounts(coll,
                     pc * (coll == Coll::kAllGather || coll == Coll::kReduceScatter || coll == Coll::kAllToAll ? n : 1),
                     elt, n);
      REQUIRE(c.paramCount == pc);
      std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(c.sendCount * elt));
      std::vector<CheckPlan> plans;
      for (int r = 0; r < n; ++r) {
        plans.emplace_back(coll, type, RedOp::kSum, n, r, root, 9);
        plans.back().fillInput(in[r].data(), c.sendCount);
      }
      for (int me = 0; me < n; ++me) {
        std::vector<uint8_t> out(std::max<size_t>(c.recvCount, 1) * elt);
        CheckPlan::fillSentinel(out.data(), out.size());
        auto copy = [&](size_t dst, int src, size_t from) {
          std::memcpy(out.data() + dst * elt, in[src].data() + from * elt, pc * elt);
        };
        auto reduced = [&](size_t first) {
          for (size_t j = 0; j < pc; ++j) {
            uint64_t acc = 0;
            std::memcpy(&acc, in[0].data() + (first + j) * elt, elt);
            for (int r = 1; r < n; ++r) {
              uint64_t v = 0;
              std::memcpy(&v, in[r].data() + (first + j) * elt, elt);
              acc = combine(type, RedOp::kSum, acc, v);
            }
            std::memcpy(out.data() + j * elt, &acc, elt);
          }
        };
        switch (coll) {
          case Coll::kAllReduce: reduced(0); break;
          case Coll::kReduceScatter: reduced(static_cast<size_t>(me) * pc); break;
          case Coll::kReduce:
            if (me == root) reduced(0);
            break;
          case Coll::kAllGather:
            for (int r = 0; r < n; ++r) copy(r * pc, r, 0);
            break;
          case Coll::kAllToAll:
            for (int r = 0; r < n; ++r) copy(r * pc, r, me * pc);
            break;
          case Coll::kBroadcast: copy(0, root, 0); break;
          case Coll::kSend: copy(0, (me + n - 1) % n, 0); break;
          case Coll::kRecv:
          case Coll::kBarrier: break;  // not in the sweep
        }
        REQUIRE(plans[me].countWrong(out.data(), c, false) == 0);
        out[out.size() / 2] ^= 0x10;
        REQUIRE(plans[me].countWrong(out.data(), c, false) == 1);
      }
    }
  }
}

TEST_CASE("different seeds give different data") {
  const CheckPlan a(Coll::kAllGather, DataType::kFloat32, RedOp::kSum, 4, 0, 0, 1);
  const CheckPlan b(Coll::kAllGather, DataType::kFloat32, RedOp::kSum, 4, 0, 0, 2);
  int same = 0;
  for (size_t g = 0; g < 100; ++g) same += a.movementBits(1, g) == b.movementBits(1, g);
  CHECK(same < 5);
}
