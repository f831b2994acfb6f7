// The sweep's warm-up against a library that measures candidate plans on its first calls: the
// timed calls must run the kept plan on buffers that plan has already run on; and nccl-tests'
// opening warm-up before each sweep.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench/perf/backend.hpp"
#include "bench/perf/options.hpp"
#include "bench/perf/sweep.hpp"

namespace {

using namespace ferry::perf;
using ferry::DataType;
using ferry::RedOp;
using ferry::Status;

// One rank. The first `trials` calls of each kind measure (as ferry's tuner does); every call is
// logged with its send buffer and whether it measured. Broadcast copies send to recv, so the
// sweep's check passes.
class MeasuringBackend : public Backend {
 public:
  explicit MeasuringBackend(uint64_t trials, int ranks = 1) : trials_(trials), ranks_(ranks) {}
  struct Logged {
    const void* send;
    const void* recv;
    bool measured;
    size_t count;
  };
  std::vector<Logged> log;

  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  std::string library() const override { return "fake"; }
  bool supports(Coll, DataType, RedOp) const override { return true; }
  Status run(const Call& c) override {
    const bool measured = calls_ < trials_;
    ++calls_;
    if (measured) ++measured_;
    log.push_back({c.send, c.recv, measured, c.count});
    if (c.send != c.recv) std::memcpy(c.recv, c.send, c.count * 4);
    return Status::ok();
  }
  Status barrier() override { return Status::ok(); }
  Status allReduceDoubles(double*, size_t, RedOp) override { return Status::ok(); }
  Status allGatherBytes(const void* in, void* out, size_t bytes) override {
    std::memcpy(out, in, bytes);
    return Status::ok();
  }
  void abort(const std::string&) override {}
  void* allocRegistered(size_t) override { return nullptr; }
  void freeRegistered(void*) override {}
  uint64_t measuredCalls() const override { return measured_; }

 private:
  uint64_t trials_;
  int ranks_;
  uint64_t calls_ = 0;
  uint64_t measured_ = 0;
};

// Every one of the `timed` calls from `timedBegin` on ran the kept plan, on a send buffer that a
// call of the kept plan used before the timed calls began.
void requireTimedCallsWarm(const std::vector<MeasuringBackend::Logged>& log, size_t timedBegin, size_t timed) {
  REQUIRE(log.size() >= timedBegin + timed);
  for (size_t t = timedBegin; t < timedBegin + timed; ++t) {
    CHECK_FALSE(log[t].measured);
    bool warmed = false;
    for (size_t i = 0; i < timedBegin; ++i) warmed = warmed || (log[i].send == log[t].send && !log[i].measured);
    INFO("timed call " << t - timedBegin << " of " << timed);
    CHECK(warmed);
  }
}

}  // namespace

TEST_CASE("perf sweep: timed calls run the kept plan on buffers it has warmed", "[perf]") {
  // 1 KiB of 64 KiB: 64 shifts, so each warm-up call touches a buffer of its own.
  auto o = parseOptions({"broadcast", "-b", "1K", "-e", "1K", "-n", "3", "-w", "3", "-c", "0"});
  REQUIRE(o.isOk());
  o->maxBytes = 64 << 10;
  o->minBytes = 1 << 10;

  // The opening warm-up comes first: -w calls at the largest size out of place and in place, then
  // at the smallest (all 1 KiB here).
  const size_t opening = 9;
  SECTION("trials outlast -w: the kept plan runs -w more calls on the timed calls' buffers") {
    MeasuringBackend be(opening + 7);
    REQUIRE(runSweep(*o, be, {}, 0, "test") == 0);
    // Out of place: 3 warm-ups (measured), settle calls until the last ran the kept plan (4 more:
    // calls 3-6 measure, call 7 does not), 3 again on the first shifts, then 3 timed.
    const size_t settle = 5, rewarm = 3;
    requireTimedCallsWarm(be.log, opening + 3 + settle + rewarm, 3);
    // The timed calls walk the same shifts as the warm-up.
    CHECK(be.log[opening + 3 + settle + rewarm].send == be.log[opening].send);
  }
  SECTION("no trials: the warm-up is -w calls, as nccl-tests'") {
    MeasuringBackend be(0);
    REQUIRE(runSweep(*o, be, {}, 0, "test") == 0);
    // The opening 3 + 3 + 3, then out of place 3 + 3, in place 3 + 3: nothing added.
    REQUIRE(be.log.size() == opening + 12);
    CHECK(be.log[opening + 3].send == be.log[opening].send);
  }
}

TEST_CASE("perf sweep: the opening warm-up runs the largest size, then the smallest", "[perf]") {
  auto o = parseOptions({"broadcast", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "3", "-c", "0"});
  REQUIRE(o.isOk());
  MeasuringBackend be(0);
  REQUIRE(runSweep(*o, be, {}, 0, "test") == 0);
  // 3 calls of 4 KiB out of place (here only one 4 KiB slice), 3 in place (send is the receive
  // buffer), 3 of 1 KiB walking through the buffers; then the sweep from 1 KiB: (3 warm-ups + 2
  // timed) x 2 placements x 3 sizes.
  REQUIRE(be.log.size() == 9 + 5 * 2 * 3);
  const auto* base = static_cast<const uint8_t*>(be.log[0].send);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(be.log[i].count == 1024);  // floats
    CHECK(be.log[i].send == base);
    CHECK(be.log[3 + i].count == 1024);
    CHECK(be.log[3 + i].send != base);
    CHECK(be.log[6 + i].count == 256);
    CHECK(be.log[6 + i].send == base + 1024 * i);
  }
  CHECK(be.log[9].count == 256);

  // Under a budget that allows one call of the largest size, the opening still makes two.
  auto b = parseOptions(
      {"broadcast", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "3", "-c", "0", "--iter_budget", "4K"});
  REQUIRE(b.isOk());
  MeasuringBackend budgeted(0);
  REQUIRE(runSweep(*b, budgeted, {}, 0, "test") == 0);
  REQUIRE(budgeted.log.size() > 4);
  CHECK(budgeted.log[0].count == 1024);
  CHECK(budgeted.log[1].count == 1024);
  CHECK(budgeted.log[2].count == 1024);  // in place
  CHECK(budgeted.log[3].count == 1024);
  CHECK(budgeted.log[4].count == 256);
}

TEST_CASE("perf sweep: the opening warm-up walks a smaller side through its whole buffer", "[perf]") {
  // Over 4 ranks an all-gather of 4 KiB reads 1 KiB per rank: the sweep's shifts at smaller sizes
  // reach all 4 KiB of the send buffer, so the opening's largest calls run at each of its 4 places.
  auto o = parseOptions({"all_gather", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "2", "-c", "0"});
  REQUIRE(o.isOk());
  MeasuringBackend be(0, 4);
  REQUIRE(runSweep(*o, be, {}, 0, "test") == 0);
  const auto* send = static_cast<const uint8_t*>(be.log[0].send);
  const auto* recv = static_cast<const uint8_t*>(be.log[0].recv);
  for (size_t place = 0; place < 4; ++place) {
    for (size_t i = 0; i < 2; ++i) {
      const auto& call = be.log[place * 2 + i];
      CHECK(call.count == 256);  // floats per rank
      CHECK(call.send == send + place * 1024);
      CHECK(call.recv == recv);  // the output fills its buffer at every place
    }
  }
  // Then in place (2 calls) and the smallest size (2 calls), as before; nothing else walks.
  CHECK(be.log[8].count == 256);
  CHECK(be.log[10].count == 64);
  CHECK(be.log[12].count == 64);
  REQUIRE(be.log.size() == 8 + 2 + 2 + 4 * 2 * 3);

  // Reduce-scatter: the output is the smaller side and walks; the input stays.
  auto r = parseOptions({"reduce_scatter", "-b", "4K", "-e", "4K", "-n", "1", "-w", "2", "-c", "0"});
  REQUIRE(r.isOk());
  MeasuringBackend rs(0, 4);
  REQUIRE(runSweep(*r, rs, {}, 0, "test") == 0);
  for (size_t place = 0; place < 4; ++place) {
    CHECK(rs.log[place * 2].send == rs.log[0].send);
    CHECK(rs.log[place * 2].recv == static_cast<const uint8_t*>(rs.log[0].recv) + place * 1024);
  }
}
