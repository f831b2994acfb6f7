// The tuner's choices under a fixed host model, FERRY_ALGO / FERRY_PROTO restrictions, and the
// host model's serialisation (it travels from rank 0 to every rank at init).
#include <catch2/catch.hpp>

#include "runtime/tuner.hpp"

using namespace ferry;
using coll::Algorithm;
using coll::OpDesc;
using coll::OpKind;
using coll::Protocol;

namespace {

HostModel model(int cores) {
  HostModel m;
  m.syncSpin = 0.2e-6;
  m.syncSleep = 10e-6;
  m.copyBw = 16e9;
  m.copyBwCache = 40e9;
  m.reduceBw = 12e9;
  m.cmaBw = 14e9;
  m.cmaCall = 1e-6;
  m.l2Bytes = 2 << 20;
  m.cores = cores;
  return m;
}

TunerInputs inputs(int ranks, bool arena = true, bool cma = true) {
  TunerInputs in;
  in.ranks = ranks;
  in.ranksOnHost = ranks;
  in.arena = arena;
  in.cma = cma;
  in.mailboxBytes = 1 << 20;
  in.model = model(2);
  return in;
}

coll::Plan plan(Tuner& t, OpKind kind, size_t floats) {
  return t.choose(OpDesc{kind, floats, DataType::kFloat32, RedOp::kSum, kind == OpKind::kBroadcast ? 0 : -1});
}

}  // namespace

TEST_CASE("small all-reduces go one-shot through the mailboxes, large ones two-shot with single copies", "[tuner]") {
  auto t = Tuner::create(inputs(2), "", "", 0);
  REQUIRE(t.isOk());
  auto small = plan(*t, OpKind::kAllReduce, 2);
  CHECK(small.algorithm == Algorithm::kOneShot);
  CHECK(small.protocol == Protocol::kShm);
  auto large = plan(*t, OpKind::kAllReduce, 64 << 20);
  CHECK(large.algorithm == Algorithm::kTwoShot);
  CHECK(large.protocol == Protocol::kCma);
  CHECK(large.chunkBytes == 256 * 1024);  // L2 / 8
  // A small reduce: only the root waits, so one hand-off and the root's reduction.
  auto reduce = t->choose(OpDesc{OpKind::kReduce, 2, DataType::kFloat32, RedOp::kSum, 0});
  CHECK(reduce.algorithm == Algorithm::kOneShot);
  auto bigReduce = t->choose(OpDesc{OpKind::kReduce, 16 << 20, DataType::kFloat32, RedOp::kSum, 0});
  CHECK(bigReduce.algorithm == Algorithm::kDirect);
}

TEST_CASE("without single-copy reads, large messages are pipelined through the mailboxes or the ring", "[tuner]") {
  auto t = Tuner::create(inputs(4, true, false), "", "", 0);
  REQUIRE(t.isOk());
  auto large = plan(*t, OpKind::kAllReduce, 64 << 20);
  CHECK(large.algorithm == Algorithm::kTwoShot);
  CHECK(large.protocol == Protocol::kShm);
  CHECK(plan(*t, OpKind::kReduceScatter, 16 << 20).protocol == Protocol::kShm);
  CHECK(plan(*t, OpKind::kBroadcast, 64 << 20).protocol == Protocol::kShm);
  // All-gather and all-to-all have no pipelined mailbox variant: large ones take the ring.
  CHECK(plan(*t, OpKind::kAllGather, 16 << 20).algorithm == Algorithm::kRing);
  CHECK(plan(*t, OpKind::kAllToAll, 16 << 20).algorithm == Algorithm::kPairwise);
  CHECK(plan(*t, OpKind::kAllGather, 16).protocol == Protocol::kShm);
}

TEST_CASE("without an arena every collective uses its transport algorithm", "[tuner]") {
  auto t = Tuner::create(inputs(3, false, false), "", "", 0);
  REQUIRE(t.isOk());
  CHECK(plan(*t, OpKind::kAllReduce, 4).algorithm == Algorithm::kRing);
  CHECK(plan(*t, OpKind::kBroadcast, 4).algorithm == Algorithm::kChain);
  CHECK(plan(*t, OpKind::kReduce, 4).algorithm == Algorithm::kChain);
  CHECK(plan(*t, OpKind::kAllToAll, 4).algorithm == Algorithm::kPairwise);
}

TEST_CASE("FERRY_ALGO and FERRY_PROTO restrict the choice, per collective or for all", "[tuner]") {
  auto ring = Tuner::create(inputs(2), "RING", "", 0);
  REQUIRE(ring.isOk());
  CHECK(plan(*ring, OpKind::kAllReduce, 2).algorithm == Algorithm::kRing);
  // ring does not apply to broadcast: the restriction is ignored there.
  CHECK(plan(*ring, OpKind::kBroadcast, 2).algorithm == Algorithm::kDirect);

  auto per = Tuner::create(inputs(2), "allreduce:twoshot;allgather:ring", "", 0);
  REQUIRE(per.isOk());
  CHECK(plan(*per, OpKind::kAllReduce, 2).algorithm == Algorithm::kTwoShot);
  CHECK(plan(*per, OpKind::kAllGather, 2).algorithm == Algorithm::kRing);
  CHECK(plan(*per, OpKind::kReduceScatter, 2).algorithm == Algorithm::kDirect);

  auto cma = Tuner::create(inputs(2), "", "cma", 0);
  REQUIRE(cma.isOk());
  auto p = plan(*cma, OpKind::kAllReduce, 2);
  CHECK(p.algorithm == Algorithm::kTwoShot);
  CHECK(p.protocol == Protocol::kCma);

  auto chunk = Tuner::create(inputs(2), "", "", 65536);
  REQUIRE(chunk.isOk());
  CHECK(plan(*chunk, OpKind::kAllReduce, 64 << 20).chunkBytes == 65536);
}

TEST_CASE("FERRY_ALGO naming an unknown collective is an error naming the knob", "[tuner]") {
  auto t = Tuner::create(inputs(2), "allsum:ring", "", 0);
  REQUIRE_FALSE(t.isOk());
  CHECK(t.status().code() == ErrorCode::kInvalidArgument);
  CHECK(t.status().message().find("FERRY_ALGO") != std::string::npos);
  CHECK(t.status().message().find("allsum") != std::string::npos);
}

TEST_CASE("oversubscribed ranks pay kernel wake-ups: larger messages stay one-shot", "[tuner]") {
  auto in = inputs(8);
  auto t = Tuner::create(in, "", "", 0);
  REQUIRE(t.isOk());
  auto cands = t->candidates(OpKind::kAllReduce, 4096);
  double oneshot = 0, twoshot = 0;
  for (auto& c : cands) {
    if (c.plan.algorithm == Algorithm::kOneShot) oneshot = c.seconds;
    if (c.plan.algorithm == Algorithm::kTwoShot && c.plan.protocol == Protocol::kShm) twoshot = c.seconds;
  }
  CHECK(oneshot < twoshot);
  CHECK(oneshot > in.model.syncSleep);
}

TEST_CASE("small broadcasts go through the root's mailbox, where the root waits for no reader", "[tuner]") {
  for (int ranks : {2, 4}) {
    auto t = Tuner::create(inputs(ranks), "", "", 0);
    REQUIRE(t.isOk());
    for (size_t floats : {size_t{2}, size_t{1024}, size_t{16384}}) {
      CAPTURE(ranks, floats);
      auto p = plan(*t, OpKind::kBroadcast, floats);
      CHECK(p.algorithm == Algorithm::kDirect);
      CHECK(p.protocol == Protocol::kShm);
    }
  }
  // Large ones: with a core per rank, one single-copy read beats two copies by the root; with
  // three readers of one root on two cores, the reads contend and the mailbox pipeline wins.
  auto two = Tuner::create(inputs(2), "", "", 0);
  REQUIRE(two.isOk());
  CHECK(plan(*two, OpKind::kBroadcast, 16 << 20).protocol == Protocol::kCma);
  auto four = Tuner::create(inputs(4), "", "", 0);
  REQUIRE(four.isOk());
  CHECK(plan(*four, OpKind::kBroadcast, 1 << 20).protocol == Protocol::kShm);
}

TEST_CASE("the host model survives serialisation and rejects garbage", "[tuner]") {
  HostModel m = model(2);
  auto back = HostModel::deserialize(m.serialize());
  REQUIRE(back.isOk());
  CHECK(back->copyBw == Approx(m.copyBw));
  CHECK(back->copyBwCache == Approx(m.copyBwCache));
  CHECK(back->cmaCall == Approx(m.cmaCall));
  CHECK(back->cores == 2);
  CHECK_FALSE(HostModel::deserialize({'x', 'y'}).isOk());
}
