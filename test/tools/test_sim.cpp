// ferry-sim's engine against answers computable by hand: one flow, shared links, max-min fairness,
// the ring all-reduce's alpha-beta formula, and symmetry folding against a replay of every rank.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "collectives/table.hpp"
#include "tools/ferry_sim/recorder.hpp"
#include "tools/ferry_sim/replay.hpp"
#include "tools/ferry_sim/sweep.hpp"
#include "tools/ferry_sim/topology.hpp"

using namespace ferry;
using namespace ferry::sim;

namespace {

// Explicit links, and per sender the path of its messages (whoever receives them).
class TestFabric final : public Fabric {
 public:
  TestFabric(std::vector<double> cap, std::vector<std::vector<int>> paths, double latency)
      : cap_(std::move(cap)), paths_(std::move(paths)), latency_(latency) {}
  int links() const override { return static_cast<int>(cap_.size()); }
  double capacity(int link) const override { return cap_[static_cast<size_t>(link)]; }
  double route(int src, int, std::vector<int>& path) const override {
    const auto& p = paths_[static_cast<size_t>(src)];
    path.insert(path.end(), p.begin(), p.end());
    return latency_;
  }

 private:
  std::vector<double> cap_;
  std::vector<std::vector<int>> paths_;
  double latency_;
};

// Rank `from` sends `bytes` to rank `to`, which receives and waits.
void message(std::vector<Program>& progs, int from, int to, uint64_t bytes) {
  Program& s = progs[static_cast<size_t>(from)];
  s.ops.push_back({Op::Kind::kSend, to, s.requests++, bytes});
  Program& r = progs[static_cast<size_t>(to)];
  r.ops.push_back({Op::Kind::kRecv, from, r.requests, bytes});
  r.ops.push_back({Op::Kind::kWait, from, r.requests++, 0});
}

Topology parsed(const std::string& text) {
  auto t = Topology::parse(text);
  REQUIRE(t.isOk());
  return *t;
}

}  // namespace

TEST_CASE("sim: one flow on one link takes latency plus bytes over bandwidth", "[sim]") {
  TestFabric fabric({1e9}, {{0}, {}}, 5e-6);
  std::vector<Program> progs(2);
  message(progs, 0, 1, 1'000'000);
  const ReplayResult r = replay(fabric, progs, 2, {});
  REQUIRE(r.complete);
  CHECK(r.seconds == Approx(5e-6 + 1e-3).epsilon(1e-9));
}

TEST_CASE("sim: two flows sharing a link get half its bandwidth each", "[sim]") {
  // Ranks 0 and 1 both send 1 MB to rank 2 over link 0.
  TestFabric fabric({1e9}, {{0}, {0}, {}}, 0);
  std::vector<Program> progs(3);
  message(progs, 0, 2, 1'000'000);
  message(progs, 1, 2, 1'000'000);
  const ReplayResult r = replay(fabric, progs, 3, {});
  REQUIRE(r.complete);
  CHECK(r.seconds == Approx(2e-3).epsilon(1e-9));
  const std::vector<double> rates = maxMinRates({{0}, {0}}, {1e9});
  CHECK(rates[0] == Approx(0.5e9));
  CHECK(rates[1] == Approx(0.5e9));
}

TEST_CASE("sim: max-min fair rates over three links", "[sim]") {
  // L0 = 6, L1 = 4, L2 = 10. f0 crosses L0 and L1, f1 L1 and L2, f2 L2, f3 L0. L1 is the
  // bottleneck (4 / 2 = 2 each for f0, f1); then L0 has 6 - 2 = 4 for f3, L2 10 - 2 = 8 for f2.
  const std::vector<double> rates = maxMinRates({{0, 1}, {1, 2}, {2}, {0}}, {6, 4, 10});
  REQUIRE(rates.size() == 4);
  CHECK(rates[0] == Approx(2));
  CHECK(rates[1] == Approx(2));
  CHECK(rates[2] == Approx(8));
  CHECK(rates[3] == Approx(4));
}

TEST_CASE("sim: computations occupy their rank at the modelled rate", "[sim]") {
  TestFabric fabric({1e9}, {{0}, {}}, 0);
  std::vector<Program> progs(2);
  progs[0].ops.push_back({Op::Kind::kReduce, -1, 0, 2'000'000});
  message(progs, 0, 1, 1'000'000);
  const ReplayResult r = replay(fabric, progs, 2, {1e9, 1e9});
  CHECK(r.seconds == Approx(2e-3 + 1e-3).epsilon(1e-9));
}

TEST_CASE("sim: ring all-reduce on a uniform machine takes 2(p-1)(alpha + n/(p beta))", "[sim]") {
  const Topology t = parsed("gpus_per_host = 1\nintra_bw = 1e9\nnic_bw = 1e9\nnic_latency = 10e-6\n");
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  REQUIRE(ring != nullptr);
  for (int p : {2, 5, 8}) {
    const size_t bytes = size_t{40960} * static_cast<size_t>(p);  // segments of 40 KiB: one slice each
    const SimPoint pt = simulate(t, *ring, CallKind::kAllReduce, bytes, DataType::kFloat32, p, 1 << 20);
    INFO("p = " << p << ": " << pt.error);
    REQUIRE(pt.error.empty());
    const double expected = 2.0 * (p - 1) * (10e-6 + static_cast<double>(bytes) / p / 1e9);
    CHECK(pt.seconds == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("sim: calls in a row overlap where the algorithm lets them, as ferry-perf times them", "[sim]") {
  const Topology t = parsed("gpus_per_host = 1\nintra_bw = 1e9\nnic_bw = 1e9\nnic_latency = 10e-6\n");
  const coll::AlgorithmRow* chain =
      coll::findRow(CallKind::kBroadcast, coll::Algorithm::kChain, coll::Protocol::kMessages);
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  REQUIRE(chain != nullptr);
  REQUIRE(ring != nullptr);
  // A chain of 8 ranks, 4 slices: one call fills the chain (6 + 4 slice times); in a row the root
  // starts the next call as it sends its last slice, so a call costs little more than its slices.
  const size_t bytes = 4 * t.sliceBytes;
  const double sliceTime = 10e-6 + static_cast<double>(t.sliceBytes) / 1e9;
  const SimPoint one = simulate(t, *chain, CallKind::kBroadcast, bytes, DataType::kFloat32, 8, 1 << 20, 1);
  const SimPoint five = simulate(t, *chain, CallKind::kBroadcast, bytes, DataType::kFloat32, 8, 1 << 20, 5);
  REQUIRE(one.error.empty());
  REQUIRE(five.error.empty());
  CHECK(one.seconds == Approx(10 * sliceTime).epsilon(0.02));
  CHECK(five.seconds < 0.7 * one.seconds);
  CHECK(five.seconds > 4 * static_cast<double>(t.sliceBytes) / 1e9);
  CHECK(five.algBw == Approx(static_cast<double>(bytes) / 1e9 / five.seconds));
  // A ring all-reduce: each call waits for every rank's data, so calls in a row take as long.
  const SimPoint r1 = simulate(t, *ring, CallKind::kAllReduce, 40960 * 5, DataType::kFloat32, 5, 1 << 20, 1);
  const SimPoint r3 = simulate(t, *ring, CallKind::kAllReduce, 40960 * 5, DataType::kFloat32, 5, 1 << 20, 3);
  REQUIRE(r3.error.empty());
  CHECK(r3.seconds == Approx(r1.seconds).epsilon(0.01));
}

TEST_CASE("sim: a folded replay matches the replay of every rank", "[sim]") {
  // 4 hosts x 4 ranks, two tiers with an oversubscribed uplink: the ring folds to one host.
  const Topology t = parsed(
      "gpus_per_host = 4\nintra_bw = 20e9\nintra_latency = 1e-6\nnics_per_host = 2\nnic_bw = 5e9\n"
      "nic_latency = 5e-6\nhop_latency = 1e-6\ntiers = 2\ntier1_hosts = 2\ntier2_oversub = 2\n"
      "reduce_bw = 50e9\n");
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  CallSpec spec;
  spec.count = size_t{1} << 20;
  spec.n = 16;
  auto folded = recordCall(*ring, spec, 4, 1 << 24);
  auto every = recordCall(*ring, spec, 16, 1 << 24);
  REQUIRE(folded.isOk());
  REQUIRE(every.isOk());
  CHECK(folded->period == 4);
  CHECK(every->period == 16);
  const ReplayResult a = replay(*t.fabric(16, 4), folded->programs, 16, t.compute);
  const ReplayResult b = replay(*t.fabric(16, 16), every->programs, 16, t.compute);
  REQUIRE(a.complete);
  REQUIRE(b.complete);
  CHECK(a.seconds == Approx(b.seconds).epsilon(0.02));
  // Recursive doubling folds by XOR, not by shifting.
  const coll::AlgorithmRow* doubling =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kDoubling, coll::Protocol::kMessages);
  auto dFolded = recordCall(*doubling, spec, 4, 1 << 24);
  auto dEvery = recordCall(*doubling, spec, 16, 1 << 24);
  REQUIRE(dFolded.isOk());
  REQUIRE(dEvery.isOk());
  CHECK(dFolded->period == 4);
  CHECK(dFolded->fold == Fold::kXor);
  const ReplayResult c = replay(*t.fabric(16, 4), dFolded->programs, 16, t.compute, dFolded->fold);
  const ReplayResult d = replay(*t.fabric(16, 16), dEvery->programs, 16, t.compute);
  REQUIRE(c.complete);
  CHECK(c.seconds == Approx(d.seconds).epsilon(0.02));
}

TEST_CASE("sim: the rails ring crosses hosts through every NIC, and folds", "[sim]") {
  // 2 hosts x 8 ranks, a NIC per rank: the one ring crosses through one NIC per host (50 GB/s of
  // busbw), the rails ring through all 8 at once: bounded by the 8 NICs (400 GB/s) and a rank's
  // own link, which carries 7 of the 8 parts (376 x 8 / 7 GB/s).
  const auto topo = [](int nics) {
    return parsed("gpus_per_host = 8\nintra_bw = 376e9\nintra_latency = 2e-6\nnics_per_host = " + std::to_string(nics) +
                  "\nnic_bw = 50e9\nnic_latency = 4e-6\nreduce_bw = 1500e9\n");
  };
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  const coll::AlgorithmRow* rails =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRails, coll::Protocol::kMessages);
  REQUIRE(ring != nullptr);
  REQUIRE(rails != nullptr);
  const size_t bytes = size_t{256} << 20;
  const double busBytes = 2.0 * 15 / 16 * static_cast<double>(bytes);
  const SimPoint one = simulate(topo(8), *ring, CallKind::kAllReduce, bytes, DataType::kFloat32, 16, 1 << 24);
  const SimPoint eight = simulate(topo(8), *rails, CallKind::kAllReduce, bytes, DataType::kFloat32, 16, 1 << 24);
  REQUIRE(one.error.empty());
  REQUIRE(eight.error.empty());
  CHECK(busBytes / one.seconds < 50e9);
  CHECK(busBytes / eight.seconds > 0.9 * 400e9);
  CHECK(busBytes / eight.seconds < 400e9);
  // With 4 NICs, 4 rails: the NICs bound it (4 x 50 GB/s); with one, the rails ring is the ring.
  const SimPoint four = simulate(topo(4), *rails, CallKind::kAllReduce, bytes, DataType::kFloat32, 16, 1 << 24);
  REQUIRE(four.error.empty());
  CHECK(busBytes / four.seconds == Approx(200e9).epsilon(0.05));
  const SimPoint single = simulate(topo(1), *rails, CallKind::kAllReduce, bytes, DataType::kFloat32, 16, 1 << 24);
  const SimPoint ringOne = simulate(topo(1), *ring, CallKind::kAllReduce, bytes, DataType::kFloat32, 16, 1 << 24);
  CHECK(single.seconds == Approx(ringOne.seconds).epsilon(1e-9));
  // Each host's ranks run its first host's programs, every peer moved by a host: the rails fold.
  const Topology t = topo(4);
  CallSpec spec;
  spec.count = size_t{1} << 18;
  spec.n = 32;
  spec.hostRanks = 8;
  spec.rails = 4;
  for (const coll::AlgorithmRow* row :
       {rails, coll::findRow(CallKind::kReduceScatter, coll::Algorithm::kRails, coll::Protocol::kMessages),
        coll::findRow(CallKind::kAllGather, coll::Algorithm::kRails, coll::Protocol::kMessages)}) {
    REQUIRE(row != nullptr);
    INFO(callKindName(row->kind));
    spec.kind = row->kind;
    spec.count = row->kind == CallKind::kAllReduce ? size_t{1} << 18 : size_t{1} << 13;
    auto folded = recordCall(*row, spec, 8, 1 << 24);
    auto every = recordCall(*row, spec, 32, 1 << 24);
    REQUIRE(folded.isOk());
    REQUIRE(every.isOk());
    CHECK(folded->period == 8);
    const ReplayResult a = replay(*t.fabric(32, 8), folded->programs, 32, t.compute);
    const ReplayResult b = replay(*t.fabric(32, 32), every->programs, 32, t.compute);
    REQUIRE(a.complete);
    REQUIRE(b.complete);
    CHECK(a.seconds == Approx(b.seconds).epsilon(0.02));
  }
}

TEST_CASE("sim: rates recomputed per component match rates recomputed for every flow", "[sim]") {
  // 5 hosts x 4 ranks (20: no fold), an oversubscribed tier and a shared fabric link: every flow
  // between hosts contends with every other, flows within a host only with their host's.
  const Topology t = parsed(
      "gpus_per_host = 4\nintra_bw = 20e9\nintra_latency = 1e-6\nnics_per_host = 2\nnic_bw = 5e9\n"
      "nic_latency = 5e-6\nhop_latency = 1e-6\ntiers = 2\ntier1_hosts = 2\ntier2_oversub = 2\n"
      "reduce_bw = 50e9\n");
  const Topology shared = parsed(
      "gpus_per_host = 2\nintra_bw = 10e9\nnics_per_host = 1\nnic_bw = 5e9\nnic_latency = 5e-6\nfabric_bw = 12e9\n");
  int replays = 0;
  for (const Topology* topo : {&t, &shared}) {
    for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
      if (row->kind != CallKind::kAllReduce || !recordable(*row)) continue;
      for (size_t count : {size_t{3}, size_t{1} << 12, size_t{1} << 20}) {
        INFO(coll::algorithmName(row->algorithm) << ", " << count << " floats, " << topo->ranksPerHost << " per host");
        CallSpec spec;
        spec.count = count;
        spec.n = 20;
        spec.sliceBytes = 64 * 1024;
        auto every = recordCall(*row, spec, 20, 1 << 24);
        REQUIRE(every.isOk());
        const auto fabric = topo->fabric(20, 20);
        const ReplayResult a = replay(*fabric, every->programs, 20, topo->compute, Fold::kShift, RateScope::kComponent);
        const ReplayResult b = replay(*fabric, every->programs, 20, topo->compute, Fold::kShift, RateScope::kEveryFlow);
        REQUIRE(a.complete);
        REQUIRE(b.complete);
        CHECK(a.seconds == Approx(b.seconds).epsilon(1e-9));
        CHECK(a.flows == b.flows);
        ++replays;
      }
    }
  }
  CHECK(replays >= 18);
}

TEST_CASE("sim: recording runs the row's own schedule", "[sim]") {
  // Recursive doubling on 8 ranks: 3 exchanges of the whole vector with rank ^ 1, ^ 2, ^ 4.
  const coll::AlgorithmRow* row =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kDoubling, coll::Protocol::kMessages);
  CallSpec spec;
  spec.count = 256;
  spec.n = 8;
  auto p = recordRank(*row, spec, 5);
  REQUIRE(p.isOk());
  std::vector<int> sendPeers;
  int reduces = 0;
  for (const Op& op : p->ops) {
    if (op.kind == Op::Kind::kSend) {
      sendPeers.push_back(op.peer);
      CHECK(op.bytes == 1024);
    }
    if (op.kind == Op::Kind::kReduce) ++reduces;
  }
  CHECK(sendPeers == std::vector<int>{4, 7, 1});
  CHECK(reduces == 3);
}

TEST_CASE("sim: the ring below one element per rank sends each element around the ring twice", "[sim]") {
  // 3 floats on 16 ranks: segments 0..2 hold one element, 3..15 none (the ring's loops jump over
  // those). Each non-empty segment goes around the ring once in each phase, one element to the next
  // rank at each hop; the empty segments send nothing.
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  CallSpec spec;
  spec.count = 3;
  spec.n = 16;
  int total = 0;
  for (int r = 0; r < spec.n; ++r) {
    auto p = recordRank(*ring, spec, r);
    REQUIRE(p.isOk());
    int sends = 0, recvs = 0;
    for (const Op& op : p->ops) {
      if (op.kind == Op::Kind::kSend) {
        ++sends;
        CHECK(op.peer == (r + 1) % spec.n);
        CHECK(op.bytes == 4);
      }
      if (op.kind == Op::Kind::kRecv) ++recvs;
    }
    // Rank r sends every non-empty segment but r (reduce-scatter) and but r + 1 (all-gather), and
    // receives every one but r - 1 and but r.
    auto has = [&](int g) { return ((g % spec.n + spec.n) % spec.n) < 3 ? 1 : 0; };
    INFO("rank " << r);
    CHECK(sends == 6 - has(r) - has(r + 1));
    CHECK(recvs == 6 - has(r - 1) - has(r));
    total += sends;
  }
  CHECK(total == 2 * 3 * (spec.n - 1));
}

TEST_CASE("sim: the tuner's formulas pick the fastest all-reduce row on hosts of 8 ranks and 1, 4 or 8 NICs", "[sim]") {
  // One and two hosts of 8 ranks, NVLink-like within a host. With a NIC per rank the exchanges
  // between hosts do not share a link and those within a host are cheap: halving and doubling
  // (whose first steps stay in a host) beat the one ring. With fewer NICs, or on one host, the ring.
  for (int nics : {1, 4, 8}) {
    for (int n : {8, 16}) {
      const Topology t =
          parsed("gpus_per_host = 8\nintra_bw = 450e9\nintra_latency = 2e-6\nnics_per_host = " + std::to_string(nics) +
                 "\nnic_bw = 50e9\nnic_latency = 4e-6\nreduce_bw = 1500e9\n");
      for (size_t bytes : {size_t{8}, size_t{256} << 20}) {
        const size_t count = bytes / 4;
        const coll::AlgorithmRow* chosen = modelChoice(t, CallKind::kAllReduce, count, DataType::kFloat32, n);
        REQUIRE(chosen != nullptr);
        double best = 1e30, choice = 0;
        std::string fastest;
        for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
          if (row->kind != CallKind::kAllReduce || !recordable(*row)) continue;
          const SimPoint pt = simulate(t, *row, CallKind::kAllReduce, bytes, DataType::kFloat32, n, 1 << 24);
          REQUIRE(pt.error.empty());
          if (pt.seconds < best) best = pt.seconds, fastest = pt.row;
          if (row == chosen) choice = pt.seconds;
        }
        INFO(n << " ranks, " << nics << " NICs, " << bytes << " B: chose " << coll::algorithmName(chosen->algorithm)
               << " (" << choice << " s), fastest " << fastest << " (" << best << " s)");
        CHECK(choice <= best * 1.1);
      }
    }
  }
}

TEST_CASE("sim: topology files name the line and key they cannot take", "[sim]") {
  auto bad = Topology::parse("gpus_per_host = 8\nnic_speed = 1e9\n");
  REQUIRE_FALSE(bad.isOk());
  CHECK_THAT(bad.status().message(), Catch::Contains("line 2") && Catch::Contains("nic_speed"));
  auto neg = Topology::parse("nic_bw = -3\n");
  REQUIRE_FALSE(neg.isOk());
  CHECK_THAT(neg.status().message(), Catch::Contains("nic_bw"));
}

TEST_CASE("sim: a message between NVLink domains crosses the link between them", "[sim]") {
  // One host of 8 ranks in two NVLink domains of 4 (H200 NVL's NVL4 bridges), 50 GB/s between them.
  const Topology t = parsed(
      "gpus_per_host = 8\nintra_bw = 450e9\nintra_latency = 2e-6\nnvlink_domain = 4\ndomain_bw = 50e9\n"
      "domain_latency = 1e-6\nnic_bw = 50e9\nreduce_bw = 1500e9\n");
  const auto fabric = t.fabric(8, 8);
  std::vector<int> within, across;
  CHECK(fabric->route(1, 3, within) == Approx(2e-6));
  CHECK(within.size() == 2);
  CHECK(fabric->route(1, 6, across) == Approx(3e-6));
  REQUIRE(across.size() == 4);
  CHECK(fabric->capacity(across[2]) == 50e9);
  CHECK(fabric->capacity(across[3]) == 50e9);
  // Two messages from domain 0 to domain 1 share its link out: 50 MB each at 25 GB/s.
  std::vector<Program> progs(8);
  message(progs, 0, 4, 50'000'000);
  message(progs, 1, 5, 50'000'000);
  const ReplayResult r = replay(*fabric, progs, 8, t.compute);
  REQUIRE(r.complete);
  CHECK(r.seconds == Approx(3e-6 + 2e-3).epsilon(1e-6));
  // The ring over the host crosses between the domains once each way: that link bounds its busbw.
  const coll::AlgorithmRow* ring =
      coll::findRow(CallKind::kAllReduce, coll::Algorithm::kRing, coll::Protocol::kMessages);
  REQUIRE(ring != nullptr);
  const size_t bytes = size_t{256} << 20;
  const SimPoint p = simulate(t, *ring, CallKind::kAllReduce, bytes, DataType::kFloat32, 8, 1 << 24);
  REQUIRE(p.error.empty());
  const double busbw = 2.0 * 7 / 8 * static_cast<double>(bytes) / p.seconds;
  CHECK(busbw < 50e9);
  CHECK(busbw > 0.9 * 50e9);
  // Domains must divide the host, and need the link between them.
  auto uneven =
      Topology::parse("gpus_per_host = 8\nintra_bw = 1e9\nnic_bw = 1e9\nnvlink_domain = 3\ndomain_bw = 1e9\n");
  REQUIRE_FALSE(uneven.isOk());
  CHECK_THAT(uneven.status().message(), Catch::Contains("nvlink_domain = 3") && Catch::Contains("gpus_per_host = 8"));
  auto unlinked = Topology::parse("gpus_per_host = 8\nintra_bw = 1e9\nnic_bw = 1e9\nnvlink_domain = 4\n");
  REQUIRE_FALSE(unlinked.isOk());
  CHECK_THAT(unlinked.status().message(), Catch::Contains("domain_bw"));
}

TEST_CASE("sim: reductions on shared cores take their share of what the machine carries", "[sim]") {
  // Two hosts of one rank on one machine whose two cores carry 2 GB/s between them (fabric_bw).
  // Rank 0 reduces 4 MB (1 ms alone at 4 GB/s, a quarter of a core's 2 / 2 GB/s per byte) while
  // rank 1 sends it 4 MB: unshared, the message takes 2 ms; sharing the cores, 1 GB/s for the
  // reduction's millisecond, then 3 MB at 2 GB/s.
  const std::string machine =
      "gpus_per_host = 1\nintra_bw = 1e9\nnic_bw = 10e9\nnic_latency = 1e-6\n"
      "fabric_bw = 2e9\nreduce_bw = 4e9\n";
  const auto run = [](const Topology& t) {
    std::vector<Program> progs(2);
    progs[0].ops.push_back({Op::Kind::kReduce, -1, 0, 4'000'000});
    message(progs, 1, 0, 4'000'000);
    const ReplayResult r = replay(*t.fabric(2, 2), progs, 2, t.compute);
    REQUIRE(r.complete);
    return r.seconds;
  };
  CHECK(run(parsed(machine)) == Approx(1e-6 + 2e-3).epsilon(1e-6));
  const Topology shared = parsed(machine + "shared_cores = 2\n");
  CHECK(run(shared) == Approx(1e-6 + 2.5e-3).epsilon(1e-6));
  // Alone, a reduction on shared cores takes bytes / reduce_bw as before.
  std::vector<Program> alone(2);
  alone[0].ops.push_back({Op::Kind::kReduce, -1, 0, 4'000'000});
  CHECK(replay(*shared.fabric(2, 2), alone, 2, shared.compute).seconds == Approx(1e-3).epsilon(1e-6));
}
