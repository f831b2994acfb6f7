// The GPU half of the Comm API on a machine without a GPU: initAll with host-only ranks, the
// stream-ordered overloads on host buffers (null stream), groups (nesting, fusion of several
// communicators' calls, error reporting) and the errors of device requests without CUDA or a GPU.
// Ranks are threads of this process; values come from the rank so that the expected ones have a
// closed form (small integers, exact in float32).
#include <catch2/catch.hpp>

#include <functional>
#include <thread>
#include <vector>

#include "ferry/comm.hpp"
#include "test/common/rank_threads.hpp"

using ferry::Comm;
using ferry::DataType;
using ferry::RedOp;
using ferry::Status;

namespace {

std::vector<std::unique_ptr<Comm>> hostComms(int n) {
  auto r = Comm::initAll(std::vector<int>(static_cast<size_t>(n), -1));
  INFO(r.status().message());
  REQUIRE(r.isOk());
  return std::move(*r);
}

// Run body(rank) on one thread per rank; returns each rank's status.
std::vector<Status> onThreads(int n, const std::function<Status(int)>& body) {
  return ferry::test::onRankThreads<Status>(n, body);
}

void requireAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) {
    INFO("rank " << r << ": " << st[r].message());
    REQUIRE(st[r].isOk());
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("initAll with host-only ranks runs the host collectives from threads") {
  constexpr int n = 3;
  auto comms = hostComms(n);
  REQUIRE(comms.size() == n);
  for (int r = 0; r < n; ++r) {
    CHECK(comms[r]->rank() == r);
    CHECK(comms[r]->size() == n);
    CHECK(comms[r]->device() == -1);
    CHECK(comms[r]->deviceMemoryBytes() == 0);
  }
  std::vector<std::vector<float>> out(n, std::vector<float>(100));
  requireAllOk(onThreads(n, [&](int r) {
    std::vector<float> in(100);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r + 1) * static_cast<float>(i);
    return comms[r]->allReduce(in.data(), out[r].data(), in.size(), DataType::kFloat32, RedOp::kSum);
  }));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < 100; ++i) REQUIRE(out[r][i] == 6.0f * static_cast<float>(i));  // 1 + 2 + 3
  }
}

TEST_CASE("stream-ordered overloads on host buffers with a null stream run at once") {
  constexpr int n = 3;
  constexpr size_t count = 37;
  auto comms = hostComms(n);
  ferry::Stream none = nullptr;
  std::vector<std::vector<int32_t>> ar(n, std::vector<int32_t>(count)), rs(n, std::vector<int32_t>(count)),
      ag(n, std::vector<int32_t>(n * count)), a2a(n, std::vector<int32_t>(n * count)),
      bc(n, std::vector<int32_t>(count)), rd(n, std::vector<int32_t>(count)), p2p(n, std::vector<int32_t>(count));
  requireAllOk(onThreads(n, [&](int r) -> Status {
    Comm& c = *comms[r];
    std::vector<int32_t> in(n * count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(1000 * r + i);
    FERRY_TRY(c.allReduce(in.data(), ar[r].data(), count, DataType::kInt32, RedOp::kSum, none));
    FERRY_TRY(c.reduceScatter(in.data(), rs[r].data(), count, DataType::kInt32, RedOp::kMax, none));
    FERRY_TRY(c.allGather(in.data(), ag[r].data(), count, DataType::kInt32, none));
    FERRY_TRY(c.allToAll(in.data(), a2a[r].data(), count, DataType::kInt32, none));
    FERRY_TRY(c.broadcast(in.data(), bc[r].data(), count, DataType::kInt32, 1, none));
    FERRY_TRY(c.reduce(in.data(), rd[r].data(), count, DataType::kInt32, RedOp::kSum, 2, none));
    // A ring of sends: even ranks send first, odd ranks receive first.
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      FERRY_TRY(c.send(in.data(), count, DataType::kInt32, next, none));
      FERRY_TRY(c.recv(p2p[r].data(), count, DataType::kInt32, prev, none));
    } else {
      FERRY_TRY(c.recv(p2p[r].data(), count, DataType::kInt32, prev, none));
      FERRY_TRY(c.send(in.data(), count, DataType::kInt32, next, none));
    }
    return Status::ok();
  }));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    for (size_t i = 0; i < count; ++i) {
      REQUIRE(ar[r][i] == static_cast<int32_t>(3000 + 3 * i));
      REQUIRE(rs[r][i] == static_cast<int32_t>(2000 + r * count + i));
      REQUIRE(bc[r][i] == static_cast<int32_t>(1000 + i));
      if (r == 2) REQUIRE(rd[r][i] == static_cast<int32_t>(3000 + 3 * i));
      REQUIRE(p2p[r][i] == static_cast<int32_t>(1000 * ((r + n - 1) % n) + i));
      for (int q = 0; q < n; ++q) {
        REQUIRE(ag[r][q * count + i] == static_cast<int32_t>(1000 * q + i));
        REQUIRE(a2a[r][q * count + i] == static_cast<int32_t>(1000 * q + r * count + i));
      }
    }
  }
}

TEST_CASE("a group on one thread drives every rank: nested, fused at the outermost end") {
  constexpr int n = 3;
  constexpr size_t count = 64;
  auto comms = hostComms(n);
  std::vector<std::vector<float>> in(n, std::vector<float>(count)), sum(n, std::vector<float>(count)),
      got(n, std::vector<float>(count, -1.0f));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>(r * 100 + i);
  }
  REQUIRE(ferry::groupStart().isOk());
  REQUIRE(ferry::groupStart().isOk());  // nested: only the outermost end issues
  for (int r = 0; r < n; ++r) {
    REQUIRE(comms[r]->allReduce(in[r].data(), sum[r].data(), count, DataType::kFloat32, RedOp::kSum, nullptr).isOk());
    // Receive before send on every rank: inside a group that cannot deadlock.
    REQUIRE(comms[r]->recv(got[r].data(), count, DataType::kFloat32, (r + n - 1) % n, nullptr).isOk());
    REQUIRE(comms[r]->send(in[r].data(), count, DataType::kFloat32, (r + 1) % n, nullptr).isOk());
  }
  REQUIRE(ferry::groupEnd().isOk());
  CHECK(got[0][0] == -1.0f);  // nothing ran yet
  Status end = ferry::groupEnd();
  INFO(end.message());
  REQUIRE(end.isOk());
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      REQUIRE(sum[r][i] == static_cast<float>(300 + 3 * i));
      REQUIRE(got[r][i] == in[(r + n - 1) % n][i]);
    }
  }
}

TEST_CASE("a failed call inside a group fails the group's end and nothing runs") {
  auto comms = hostComms(2);
  std::vector<float> buf(8, 1.0f), out(8, -1.0f);
  REQUIRE(ferry::groupStart().isOk());
  REQUIRE(comms[0]->allReduce(buf.data(), out.data(), 8, DataType::kFloat32, RedOp::kSum, nullptr).isOk());
  Status bad = comms[1]->allReduce(buf.data(), out.data(), 8, static_cast<DataType>(77), RedOp::kSum, nullptr);
  REQUIRE(bad.code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(bad.message(), "type 77"));
  CHECK(contains(bad.message(), "rank 1"));
  Status end = ferry::groupEnd();
  REQUIRE(end.code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(end.message(), "groupEnd"));
  CHECK(contains(end.message(), "type 77"));
  CHECK(out[0] == -1.0f);
  // The next group starts clean.
  REQUIRE(ferry::groupStart().isOk());
  REQUIRE(ferry::groupEnd().isOk());
}

TEST_CASE("groupEnd without groupStart is a usage error") {
  Status st = ferry::groupEnd();
  REQUIRE(st.code() == ferry::ErrorCode::kInvalidUsage);
  CHECK(contains(st.message(), "groupStart"));
}

TEST_CASE("argument errors of the stream overloads name the argument and the rank") {
  auto comms = hostComms(1);
  std::vector<float> buf(4);
  Status st = comms[0]->broadcast(buf.data(), buf.data(), 4, DataType::kFloat32, 3, nullptr);
  REQUIRE(st.code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(st.message(), "root 3"));
  st = comms[0]->send(buf.data(), 4, DataType::kFloat32, 0, nullptr);  // to itself, outside a group
  REQUIRE(st.code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(st.message(), "peer 0"));
  st = comms[0]->allReduce(nullptr, buf.data(), 4, DataType::kFloat32, RedOp::kSum, nullptr);
  REQUIRE(st.code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(st.message(), "send buffer is null"));
  // Count 0 does nothing, even with null buffers.
  REQUIRE(comms[0]->allReduce(nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum, nullptr).isOk());
}

TEST_CASE("initAll rejects bad device lists") {
  auto empty = Comm::initAll({});
  REQUIRE(empty.status().code() == ferry::ErrorCode::kInvalidArgument);
  auto negative = Comm::initAll({-1, -5});
  REQUIRE(negative.status().code() == ferry::ErrorCode::kInvalidArgument);
  CHECK(contains(negative.status().message(), "devices[1] = -5"));
}

TEST_CASE("device requests without CUDA or without a GPU fail at once, on every rank, saying why") {
  // Rank 1 is host-only and would wait in the rendezvous: it learns rank 0's failure there.
  auto r = Comm::initAll({0, -1});
  REQUIRE_FALSE(r.isOk());
  const std::string m = r.status().message();
  INFO(m);
  if (r.status().code() == ferry::ErrorCode::kInvalidUsage) {
    CHECK(contains(m, "built without CUDA"));
  } else {
    // Built with CUDA on a machine without a GPU (CI) the CUDA call, rank and device are named.
    // (On a machine with a GPU device 0 exists and this case does not apply.)
    auto probe = Comm::initAll({-1});
    REQUIRE(probe.isOk());
    CHECK(r.status().code() == ferry::ErrorCode::kUnhandledCudaError);
    CHECK(contains(m, "cudaSetDevice(0)"));
    CHECK(contains(m, "rank 0"));
  }
}

TEST_CASE("host buffers on a non-null stream need CUDA to wait for the stream") {
  auto comms = hostComms(1);
  auto gpu = Comm::initAll({0});
  if (gpu.isOk()) return;  // a GPU is present: the gpu suite covers streams
  std::vector<float> buf(4, 1.0f);
  auto fake = reinterpret_cast<ferry::Stream>(uintptr_t{0x10});
  Status st = comms[0]->allReduce(buf.data(), buf.data(), 4, DataType::kFloat32, RedOp::kSum, fake);
  REQUIRE_FALSE(st.isOk());
  INFO(st.message());
  CHECK((contains(st.message(), "cudaStreamSynchronize") || contains(st.message(), "built without CUDA")));
  CHECK(contains(st.message(), "rank 0"));
}
