// The reproducible mode's routing rule for device buffers on the GPU kernel path
// (gpu::stageForReproducibility), as a pure function: no GPU needed. A group is staged as a whole
// when the mode changes one of its calls; the rule reads only what every rank passes alike, and
// refuses, naming the rank and the call, where one process holds several ranks.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/cuda/stream_issue.hpp"

using ferry::CallKind;
using ferry::DataType;
using ferry::ErrorCode;
using ferry::RedOp;
using ferry::gpu::DevWork;
using ferry::gpu::stageForReproducibility;

namespace {

DevWork work(CallKind kind, DataType type, RedOp op, size_t count, int root = 0) {
  DevWork w;
  w.kind = kind;
  w.type = type;
  w.op = op;
  w.count = count;
  w.root = root;
  return w;
}

bool staged(bool reproducible, const std::vector<DevWork>& works) {
  auto r = stageForReproducibility(reproducible, 1, 0, works);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return *r;
}

}  // namespace

TEST_CASE("the reproducible mode stages the sums and averages it changes, in the float types") {
  for (CallKind kind : {CallKind::kAllReduce, CallKind::kReduceScatter, CallKind::kReduce}) {
    for (DataType type : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16, DataType::kFloat64}) {
      for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
        INFO(ferry::callKindName(kind) << " " << ferry::dataTypeName(type));
        CHECK(staged(true, {work(kind, type, op, 1000)}));
        CHECK_FALSE(staged(false, {work(kind, type, op, 1000)}));
      }
    }
  }
}

TEST_CASE("calls the mode leaves alone keep the kernels") {
  CHECK_FALSE(staged(true, {work(CallKind::kAllReduce, DataType::kFloat32, RedOp::kMax, 1000)}));
  CHECK_FALSE(staged(true, {work(CallKind::kAllReduce, DataType::kFloat32, RedOp::kProd, 1000)}));
  CHECK_FALSE(staged(true, {work(CallKind::kAllReduce, DataType::kInt32, RedOp::kSum, 1000)}));
  CHECK_FALSE(staged(true, {work(CallKind::kAllReduce, DataType::kFloat32, RedOp::kSum, 0)}));
  CHECK_FALSE(staged(true, {work(CallKind::kAllGather, DataType::kFloat32, RedOp::kSum, 1000),
                            work(CallKind::kSend, DataType::kFloat32, RedOp::kSum, 1000, 1),
                            work(CallKind::kBroadcast, DataType::kBfloat16, RedOp::kSum, 1000, 1)}));
  CHECK_FALSE(staged(true, {}));
}

TEST_CASE("one changed call stages its whole group, whatever the other calls' kinds or order") {
  const DevWork sum = work(CallKind::kReduceScatter, DataType::kBfloat16, RedOp::kSum, 4096);
  const DevWork gather = work(CallKind::kAllGather, DataType::kFloat32, RedOp::kSum, 100);
  const DevWork send = work(CallKind::kSend, DataType::kInt32, RedOp::kSum, 7, 1);
  CHECK(staged(true, {gather, send, sum}));
  CHECK(staged(true, {sum, gather}));
  CHECK_FALSE(staged(true, {gather, send}));
}

TEST_CASE("the decision ignores buffers, so ranks with other pointers or memory decide alike") {
  // Pointers, and so memory kinds and streams, are each rank's own; the rule must not read them.
  static float a[16], b[16];
  DevWork w = work(CallKind::kAllReduce, DataType::kFloat32, RedOp::kSum, 16);
  const bool none = staged(true, {w});
  w.send = a;
  w.recv = b;
  CHECK(staged(true, {w}) == none);
  w.send = w.recv;
  CHECK(staged(true, {w}) == none);
}

TEST_CASE("several ranks in one process: refused, naming the rank, the call, why and what to do") {
  const std::vector<DevWork> works = {work(CallKind::kAllGather, DataType::kFloat32, RedOp::kSum, 10),
                                      work(CallKind::kAllReduce, DataType::kFloat32, RedOp::kSum, 1024)};
  auto r = stageForReproducibility(true, 2, 1, works);
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == ErrorCode::kInvalidUsage);
  const std::string m = r.status().message();
  INFO(m);
  CHECK(m.find("allReduce of 1024 float32 on rank 1") != std::string::npos);
  CHECK(m.find("2 ranks of this communicator in one process") != std::string::npos);
  CHECK(m.find("host function") != std::string::npos);
  CHECK(m.find("one rank per process") != std::string::npos);
  CHECK(m.find("FERRY_REPRODUCIBLE") != std::string::npos);
  // Nothing to stage: no refusal, even with several ranks per process.
  auto plain = stageForReproducibility(true, 4, 1, {works[0]});
  REQUIRE(plain.isOk());
  CHECK_FALSE(*plain);
  auto off = stageForReproducibility(false, 4, 1, works);
  REQUIRE(off.isOk());
  CHECK_FALSE(*off);
}
