// The argument checks every front end shares (base/call_check.hpp), alone and through the
// C++ API with ranks as threads: each bad argument is refused with its name, value, rank and the
// valid range, before anything moves; exact in-place buffers pass.
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "ferry/comm.hpp"
#include "base/call_check.hpp"
#include "test/common/rank_threads.hpp"

using ferry::Call;
using ferry::CallKind;
using ferry::checkCall;
using ferry::CheckOptions;
using ferry::ErrorCode;
using ferry::Status;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A call as a front end passes it, type and op as the raw integers a C caller may pass.
struct Args {
  Call call;
  CheckOptions options;
};

Args args(CallKind kind, const void* send, const void* recv, size_t count, int type, int op = 0, int root = 0) {
  Args a;
  a.call.kind = kind;
  a.call.send = send;
  a.call.recv = const_cast<void*>(recv);
  a.call.count = count;
  a.call.type = static_cast<ferry::DataType>(type);
  a.call.op = static_cast<ferry::RedOp>(op);
  a.call.root = root;
  return a;
}

// checkCall() with `fn` as the entry point the messages name.
Status check(const char* fn, Args a, int rank, int size) {
  a.call.caller = fn;
  return checkCall(a.call, rank, size, a.options);
}

// Requires `st` to be an invalid-argument error containing every part.
void requireRefused(const Status& st, std::initializer_list<const char*> parts) {
  INFO(st.message());
  REQUIRE(st.code() == ErrorCode::kInvalidArgument);
  for (const char* p : parts) CHECK(contains(st.message(), p));
}

}  // namespace

TEST_CASE("types and reductions are checked against their tables") {
  std::vector<float> a(4), b(4);
  const int kUint8 = static_cast<int>(ferry::DataType::kUint8);
  for (int type : {-1, ferry::kNumDataTypes, INT_MIN, INT_MAX}) {
    requireRefused(check("allReduce", args(CallKind::kAllReduce, a.data(), b.data(), 4, type), 1, 4),
                   {"allReduce on rank 1", ("type " + std::to_string(type)).c_str(), ferry::dataTypeList()});
  }
  // The list is generated from the name table: every type is in it, the last one too.
  CHECK(contains(ferry::dataTypeList(), "0.." + std::to_string(ferry::kNumDataTypes - 1) + ": int8, uint8"));
  CHECK(contains(ferry::dataTypeList(), "float8e5m2"));
  for (int op : {-1, -2, INT_MIN, ferry::kNumRedOps, 1000}) {
    for (CallKind k : {CallKind::kAllReduce, CallKind::kReduce, CallKind::kReduceScatter}) {
      requireRefused(check("call", args(k, a.data(), b.data(), 1, kUint8, op), 0, 4),
                     {("op " + std::to_string(op) + " is not a reduction").c_str(),
                      "0..7: sum, prod, max, min, avg, band, bor, bxor"});
    }
  }
  // Collectives without a reduction ignore op.
  CHECK(check("allGather", args(CallKind::kAllGather, a.data(), b.data(), 1, kUint8, -1), 0, 4).isOk());
}

TEST_CASE("the bitwise reductions are refused on floating-point types, naming op, rank and the valid types") {
  std::vector<double> a(4), b(4);
  for (int type = 0; type < ferry::kNumDataTypes; ++type) {
    const auto t = static_cast<ferry::DataType>(type);
    for (ferry::RedOp op : {ferry::RedOp::kBand, ferry::RedOp::kBor, ferry::RedOp::kBxor}) {
      for (CallKind k : {CallKind::kAllReduce, CallKind::kReduce, CallKind::kReduceScatter}) {
        const Status st = check("reduce", args(k, a.data(), b.data(), 1, type, static_cast<int>(op)), 2, 4);
        INFO(ferry::dataTypeName(t) << " " << ferry::redOpName(op));
        if (!ferry::isFloatingPoint(t)) {
          CHECK(st.isOk());
          continue;
        }
        const std::string text = std::string("op ") + ferry::redOpName(op) +
                                 " needs an integer type (int8, uint8, int32, uint32, int64, uint64), got " +
                                 ferry::dataTypeName(t);
        requireRefused(st, {"reduce on rank 2: ", text.c_str()});
      }
    }
  }
  // The other ops stay defined on every type.
  for (int op = 0; op <= static_cast<int>(ferry::RedOp::kAvg); ++op) {
    const int kFloat32 = static_cast<int>(ferry::DataType::kFloat32);
    CHECK(check("allReduce", args(CallKind::kAllReduce, a.data(), b.data(), 1, kFloat32, op), 0, 4).isOk());
  }
}

TEST_CASE("roots and peers outside the communicator are refused, INT_MIN included") {
  std::vector<int32_t> a(8), b(8);
  for (int root : {INT_MIN, -1, 4, INT_MAX}) {
    for (CallKind k : {CallKind::kBroadcast, CallKind::kReduce}) {
      requireRefused(check("rooted", args(k, a.data(), b.data(), 8, 2, 0, root), 2, 4),
                     {"on rank 2", ("root " + std::to_string(root) + " is out of range").c_str(),
                      "expected 0 <= root < 4"});
    }
    requireRefused(check("send", args(CallKind::kSend, a.data(), nullptr, 8, 2, 0, root), 2, 4),
                   {("peer " + std::to_string(root)).c_str(), "expected 0 <= peer < 4, peer != 2"});
  }
  CHECK(check("reduce", args(CallKind::kReduce, a.data(), b.data(), 8, 2, 0, 3), 2, 4).isOk());
}

TEST_CASE("byte sizes that overflow or leave the address space are refused for every element size") {
  std::vector<uint8_t> a(64), b(64 * 4);
  for (int type = 0; type < ferry::kNumDataTypes; ++type) {
    for (size_t count : {size_t{1} << 62, SIZE_MAX, SIZE_MAX / 2 + 1, size_t{1} << 48}) {
      for (CallKind k : {CallKind::kAllReduce, CallKind::kBroadcast, CallKind::kAllGather, CallKind::kReduceScatter,
                         CallKind::kAllToAll, CallKind::kReduce}) {
        INFO("type " << type << " count " << count << " kind " << ferry::callKindName(k));
        requireRefused(check("call", args(k, a.data(), b.data(), count, type, 0, 0), 0, 4),
                       {("count " + std::to_string(count)).c_str(), "larger than the address space"});
      }
    }
  }
  // A pointer near the top with a small count: the range itself ends beyond the address space.
  const void* top = reinterpret_cast<const void*>(UINTPTR_MAX - 15);
  requireRefused(check("allReduce", args(CallKind::kAllReduce, top, b.data(), 64, 1), 0, 2),
                 {"send buffer", "ends beyond the address space"});
}

TEST_CASE("a large host buffer whose end is not mapped is refused before anything is copied") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = size_t{4} << 20;
  void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  REQUIRE(munmap(static_cast<char*>(region) + bytes / 2, bytes / 2) == 0);  // the second half is gone
  std::vector<uint8_t> out(bytes);
  requireRefused(check("broadcast", args(CallKind::kBroadcast, region, out.data(), bytes, 1, 0, 0), 0, 2),
                 {"send buffer", "is not mapped memory"});
  CHECK(check("broadcast", args(CallKind::kBroadcast, region, out.data(), bytes / 2, 1, 0, 0), 0, 2).isOk());
  // Device buffers are not probed (the flag says so); the address-space bound still holds.
  Args dev = args(CallKind::kBroadcast, region, out.data(), bytes, 1, 0, 0);
  dev.options.hostBuffers = false;
  CHECK(check("broadcast", dev, 0, 2).isOk());
  munmap(region, bytes / 2);
  (void)page;
}

TEST_CASE("overlapping buffers pass only exactly in place, per collective as NCCL defines it") {
  constexpr int n = 4, rank = 2;
  constexpr size_t count = 1024;
  std::vector<float> buf(count * n * 2);
  float* p = buf.data();
  const int f32 = static_cast<int>(ferry::DataType::kFloat32);
  auto sameBuffer = [&](CallKind k, const float* s, const float* r) {
    return check("call", args(k, s, r, count, f32, 0, rank), rank, n);
  };
  for (CallKind k : {CallKind::kAllReduce, CallKind::kBroadcast, CallKind::kReduce, CallKind::kAllToAll}) {
    INFO(ferry::callKindName(k));
    CHECK(sameBuffer(k, p, p).isOk());
    CHECK(sameBuffer(k, p, p + count * n).isOk());  // disjoint
    requireRefused(sameBuffer(k, p, p + 1), {"overlap without being in place", "send == recv"});
    requireRefused(sameBuffer(k, p + 1, p), {"overlap"});
  }
  // allGather: the input is this rank's block of the output.
  CHECK(check("allGather", args(CallKind::kAllGather, p + rank * count, p, count, f32), rank, n).isOk());
  requireRefused(check("allGather", args(CallKind::kAllGather, p, p, count, f32), rank, n),
                 {"send == recv + rank * count elements"});
  // reduceScatter: the output is this rank's block of the input.
  CHECK(check("reduceScatter", args(CallKind::kReduceScatter, p, p + rank * count, count, f32), rank, n).isOk());
  requireRefused(check("reduceScatter", args(CallKind::kReduceScatter, p, p + 1, count, f32), rank, n),
                 {"recv == send + rank * count elements"});
  // Buffers a rank does not use are not compared: a broadcast's send buffer off the root.
  CHECK(check("broadcast", args(CallKind::kBroadcast, p + 1, p, count, f32, 0, 0), rank, n).isOk());
}

TEST_CASE("null buffers a rank needs are refused; zero counts need none") {
  std::vector<int64_t> a(8);
  requireRefused(check("allReduce", args(CallKind::kAllReduce, nullptr, a.data(), 8, 4), 0, 2),
                 {"send buffer is null with count 8"});
  requireRefused(check("reduce", args(CallKind::kReduce, a.data(), nullptr, 8, 4, 0, 1), 1, 2),
                 {"receive buffer is null"});
  CHECK(check("reduce", args(CallKind::kReduce, a.data(), nullptr, 8, 4, 0, 1), 0, 2).isOk());
  CHECK(check("allReduce", args(CallKind::kAllReduce, nullptr, nullptr, 0, 4), 0, 2).isOk());
}

namespace {

std::vector<Status> onThreads(int n, const std::function<Status(int)>& body) {
  return ferry::test::onRankThreads<Status>(n, body);
}

}  // namespace

TEST_CASE("the C++ API refuses each bad argument on every rank and stays usable") {
  constexpr int n = 2;
  auto comms = ferry::Comm::initAll(std::vector<int>(n, -1));
  REQUIRE(comms.isOk());
  using ferry::DataType;
  using ferry::RedOp;
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(4096, 1)), out(n, std::vector<uint8_t>(4096 * n));
  using Call = std::function<Status(ferry::Comm&, uint8_t*, uint8_t*)>;
  using C = ferry::Comm;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"allReduce count 2^62",
       [](C& c, uint8_t* s, uint8_t* r) { return c.allReduce(s, r, size_t{1} << 62, DataType::kUint8, RedOp::kSum); }},
      {"allReduce count SIZE_MAX",
       [](C& c, uint8_t* s, uint8_t* r) { return c.allReduce(s, r, SIZE_MAX, DataType::kUint8, RedOp::kSum); }},
      {"broadcast count 2^62",
       [](C& c, uint8_t* s, uint8_t* r) { return c.broadcast(s, r, size_t{1} << 62, DataType::kInt8, 0); }},
      {"allGather count 2^62",
       [](C& c, uint8_t* s, uint8_t* r) { return c.allGather(s, r, size_t{1} << 62, DataType::kUint8); }},
      {"broadcast root INT_MIN",
       [](C& c, uint8_t* s, uint8_t* r) { return c.broadcast(s, r, 16, DataType::kUint8, INT_MIN); }},
      {"reduce root INT_MIN",
       [](C& c, uint8_t* s, uint8_t* r) { return c.reduce(s, r, 16, DataType::kUint8, RedOp::kSum, INT_MIN); }},
      {"allReduce op -1",
       [](C& c, uint8_t* s, uint8_t* r) { return c.allReduce(s, r, 16, DataType::kUint8, static_cast<RedOp>(-1)); }},
      {"allReduce op INT_MIN",
       [](C& c, uint8_t* s, uint8_t* r) {
         return c.allReduce(s, r, 16, DataType::kUint8, static_cast<RedOp>(INT_MIN));
       }},
      {"allReduce band float32",
       [](C& c, uint8_t* s, uint8_t* r) { return c.allReduce(s, r, 16, DataType::kFloat32, RedOp::kBand); }},
      {"reduce bxor bfloat16",
       [](C& c, uint8_t* s, uint8_t* r) { return c.reduce(s, r, 16, DataType::kBfloat16, RedOp::kBxor, 0); }},
      {"allReduce shifted by one element",
       [](C& c, uint8_t* s, uint8_t*) { return c.allReduce(s, s + 4, 1024, DataType::kFloat32, RedOp::kSum); }},
  };
  for (const auto& entry : calls) {
    const Call& call = entry.second;  // clang 14 cannot capture a structured binding
    INFO(entry.first);
    auto st = onThreads(n, [&](int r) { return call(*(*comms)[r], in[r].data(), out[r].data()); });
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r << ": " << st[r].message());
      CHECK(st[r].code() == ErrorCode::kInvalidArgument);
      CHECK(contains(st[r].message(), "on rank " + std::to_string(r)));
    }
  }
  // Nothing was sent: the communicator still works and gives exact results.
  auto st = onThreads(n, [&](int r) {
    return (*comms)[r]->allReduce(in[r].data(), out[r].data(), 4096, DataType::kUint8, RedOp::kSum);
  });
  for (int r = 0; r < n; ++r) {
    INFO(st[r].message());
    REQUIRE(st[r].isOk());
    for (size_t i = 0; i < 4096; ++i) REQUIRE(out[r][i] == n);
  }
}

TEST_CASE("a call that repeats a valid one in all but one field is checked again") {
  // Comm::collective skips the check for a call equal to the last valid one in every field the
  // check reads: each field below, changed alone after that call, must still be refused.
  constexpr int n = 2;
  auto comms = ferry::Comm::initAll(std::vector<int>(n, -1));
  REQUIRE(comms.isOk());
  using ferry::DataType;
  using ferry::RedOp;
  std::vector<std::vector<float>> in(n, std::vector<float>(1024, 1.0f)), out(n, std::vector<float>(1024));
  using Call = std::function<Status(ferry::Comm&, float*, float*)>;
  using C = ferry::Comm;
  const Call bcast = [](C& c, float* s, float* r) { return c.broadcast(s, r, 16, DataType::kFloat32, 1); };
  const Call sum = [](C& c, float* s, float* r) { return c.allReduce(s, r, 16, DataType::kFloat32, RedOp::kSum); };
  const std::vector<std::tuple<const char*, Call, Call>> cases = {
      {"root", bcast, [](C& c, float* s, float* r) { return c.broadcast(s, r, 16, DataType::kFloat32, n); }},
      {"count", bcast,
       [](C& c, float* s, float* r) { return c.broadcast(s, r, size_t{1} << 62, DataType::kFloat32, 1); }},
      {"type", bcast, [](C& c, float* s, float* r) { return c.broadcast(s, r, 16, static_cast<DataType>(99), 1); }},
      {"recv", bcast, [](C& c, float* s, float*) { return c.broadcast(s, nullptr, 16, DataType::kFloat32, 1); }},
      {"op", sum, [](C& c, float* s, float* r) { return c.allReduce(s, r, 16, DataType::kFloat32, RedOp::kBand); }},
      {"send", sum, [](C& c, float*, float* r) { return c.allReduce(r + 1, r, 16, DataType::kFloat32, RedOp::kSum); }},
  };
  for (const auto& entry : cases) {
    INFO("changed field: " << std::get<0>(entry));
    const Call& valid = std::get<1>(entry);
    const Call& bad = std::get<2>(entry);
    auto st = onThreads(n, [&](int r) -> Status {
      for (int i = 0; i < 2; ++i) FERRY_TRY(valid(*(*comms)[r], in[r].data(), out[r].data()));
      return bad(*(*comms)[r], in[r].data(), out[r].data());
    });
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r << ": " << st[r].message());
      CHECK(st[r].code() == ErrorCode::kInvalidArgument);
    }
  }
}
