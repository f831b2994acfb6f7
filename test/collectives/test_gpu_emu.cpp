// The CUDA collective kernels under the SIMT emulation: n = 1..4 ranks as host threads, each with
// its rank resources in host memory, each launching its work list concurrently. Results are
// compared bit for bit with the host kernels applied in the order the algorithm reduces in (ring:
// ring_math.hpp's order, v = in[g+1] op .. op in[g]; chain reduce: in[root+1] op .. op in[root];
// direct: rank order), avg divided once at the last step. Small channels, slots and LL slots so
// that FIFO wrap-around and flow control run; one communicator per world size serves every test,
// so the persistent step counters carry over from launch to launch.
//
// Built a second time with FERRY_TEST_ON_GPU=1 against the nvcc build (test_gpu_cuda, suite gpu):
// the same cases on a real GPU, every rank a stream of one device, every buffer managed memory.
// It exits 77 (skip) where there is no GPU.
#include <catch2/catch.hpp>

#include "test/common/catch_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectives/cuda/dev_comm.hpp"
#include "collectives/ring_math.hpp"
#include "kernels/host/reduce.hpp"

#if FERRY_TEST_ON_GPU
#include <cuda_runtime.h>
#endif

using namespace ferry;
using namespace ferry::coll;
using namespace ferry::gpu;

namespace {

#if FERRY_TEST_ON_GPU
/// Managed memory: the host fills and checks, the device kernels read and write.
template <typename T>
struct Alloc {
  using value_type = T;
  Alloc() = default;
  template <typename U>
  Alloc(const Alloc<U>&) {}
  T* allocate(size_t n) {
    void* p = nullptr;
    if (cudaMallocManaged(&p, n * sizeof(T) + 1) != cudaSuccess) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { cudaFree(p); }
  bool operator==(const Alloc&) const { return true; }
};
constexpr int kChannels = 4, kThreads = 128;
#else
template <typename T>
using Alloc = std::allocator<T>;
constexpr int kChannels = 2, kThreads = 8;
#endif
using Bytes = std::vector<uint8_t, Alloc<uint8_t>>;

const DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,      DataType::kUint32,
                           DataType::kInt64,   DataType::kUint64,   DataType::kFloat16,    DataType::kFloat32,
                           DataType::kFloat64, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2};
const RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                      RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};
struct Variant {
  DevAlgo algo;
  DevProto proto;
  const char* name;
};
const Variant kVariants[] = {{DevAlgo::kRing, DevProto::kSimple, "ring/simple"},
                             {DevAlgo::kRing, DevProto::kLL, "ring/LL"},
                             {DevAlgo::kDirect, DevProto::kSimple, "direct"}};

/// One communicator of n emulated ranks: resources, DevComms.
struct EmuComm {
  DevConfig cfg;
  std::vector<Bytes> res;
  std::vector<DevComm, Alloc<DevComm>> comms;
  std::vector<DevError, Alloc<DevError>> errors;
  int threads = kThreads;
  int blocks = kChannels;
#if FERRY_TEST_ON_GPU
  std::vector<cudaStream_t> streams;
#endif
  /// n ranks; blocks of `threadsPerBlock`; every device wait ends after `timeoutNs`.
  explicit EmuComm(int n, int threadsPerBlock = kThreads, uint64_t timeoutNs = 120'000'000'000ull,
                   size_t slotBytes = 256, size_t llSlotBytes = 128)
      : threads(threadsPerBlock) {
    cfg.timeoutNs = timeoutNs;
    cfg.nRanks = n;
    cfg.nChannels = kChannels;
    cfg.slots = 4;
    cfg.slotBytes = slotBytes;
    cfg.llSlots = 4;
    cfg.llSlotBytes = llSlotBytes;
    const size_t bytes = rankResourceBytes(cfg);
    std::vector<void*> bases;
    res.resize(n);
    for (int r = 0; r < n; ++r) {
      res[r].assign(bytes + 256, 0);
      bases.push_back(res[r].data() + (256 - reinterpret_cast<uintptr_t>(res[r].data()) % 256) % 256);
    }
    comms.resize(n);
    errors.resize(n);
    for (int r = 0; r < n; ++r) {
      std::memset(&errors[r], 0, sizeof(DevError));
      buildDevComm(cfg, r, bases, &errors[r], &comms[r]);
    }
#if FERRY_TEST_ON_GPU
    streams.resize(n);
    for (auto& st : streams) REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
#endif
  }
  int size() const { return cfg.nRanks; }
  /// Every rank of `ranks` (default: all) launches its list from its own thread; the launches' errors.
  std::vector<int> launch(const std::vector<DevWorkList>& lists, std::vector<int> ranks = {}) {
    if (ranks.empty()) {
      for (int r = 0; r < size(); ++r) ranks.push_back(r);
    }
    std::vector<std::thread> th;
    std::vector<int> errs(size(), 0);
    for (int r : ranks) {
#if FERRY_TEST_ON_GPU
      th.emplace_back([&, r] {
        errs[r] = launchWorkList(&comms[r], lists[r], blocks, threads, streams[r]);
        if (errs[r] == 0) errs[r] = cudaStreamSynchronize(streams[r]);
      });
#else
      th.emplace_back([&, r] { errs[r] = launchWorkList(&comms[r], lists[r], blocks, threads, nullptr); });
#endif
    }
    for (auto& t : th) t.join();
    return errs;
  }
  void run(const std::vector<DevWorkList>& lists) {
    const std::vector<int> errs = launch(lists);
    for (int r = 0; r < size(); ++r) REQUIRE(errs[r] == 0);
    checkCounters();
  }
  /// After a launch every step sent was received: sendStep(r -> p) == recvStep(p <- r), and the
  /// published head and tail agree with them.
  void checkCounters() const {
    for (int c = 0; c < kChannels; ++c) {
      for (int r = 0; r < size(); ++r) {
        for (int p = 0; p < size(); ++p) {
          const ConnCtrl* s = comms[r].ctrl(r, c, p);
          const ConnCtrl* d = comms[r].ctrl(p, c, r);
          INFO("channel " << c << " " << r << " -> " << p);
          REQUIRE(s->sendStep == d->recvStep);
          REQUIRE(s->llSendStep == d->llRecvStep);
          REQUIRE(d->head == s->sendStep);
          REQUIRE(s->tail == s->sendStep);
          REQUIRE(s->llTail == s->llSendStep);
        }
      }
    }
  }
};

EmuComm& commOf(int n) {
  static std::vector<std::unique_ptr<EmuComm>> comms(5);
  if (!comms[n]) comms[n] = std::make_unique<EmuComm>(n);
  return *comms[n];
}

std::mt19937_64& rng() {
  static std::mt19937_64 g(20261129);
  return g;
}

/// Values that round (random mantissas) but stay far from overflow: magnitudes in [1/8, 4) for
/// sums, [1/2, 2) for products (at most 4 factors, so float16 and float8 stay finite).
void fill(DataType t, RedOp op, void* dst, size_t count) {
  auto& g = rng();
  const bool prod = op == RedOp::kProd;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = g();
    const uint32_t sign = prod ? 0 : static_cast<uint32_t>(x & 1);
    const int e = prod ? static_cast<int>((x >> 1) % 2) - 1 : static_cast<int>((x >> 1) % 5) - 3;
    switch (t) {
      case DataType::kFloat16: {
        const uint16_t v = static_cast<uint16_t>(sign << 15 | (15 + e) << 10 | ((x >> 8) & 0x3FF));
        std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &v, 2);
        break;
      }
      case DataType::kBfloat16: {
        const uint16_t v = static_cast<uint16_t>(sign << 15 | (127 + e) << 7 | ((x >> 8) & 0x7F));
        std::memcpy(static_cast<uint8_t*>(dst) + 2 * i, &v, 2);
        break;
      }
      case DataType::kFloat8e4m3: {  // bias 7, 3 mantissa bits
        const uint8_t v = static_cast<uint8_t>(sign << 7 | (7 + e) << 3 | ((x >> 8) & 0x7));
        static_cast<uint8_t*>(dst)[i] = v;
        break;
      }
      case DataType::kFloat8e5m2: {  // bias 15, 2 mantissa bits
        const uint8_t v = static_cast<uint8_t>(sign << 7 | (15 + e) << 2 | ((x >> 8) & 0x3));
        static_cast<uint8_t*>(dst)[i] = v;
        break;
      }
      case DataType::kFloat32: {
        const uint32_t v = sign << 31 | static_cast<uint32_t>(127 + e) << 23 | ((x >> 8) & 0x7FFFFF);
        std::memcpy(static_cast<uint8_t*>(dst) + 4 * i, &v, 4);
        break;
      }
      case DataType::kFloat64: {
        const uint64_t v = static_cast<uint64_t>(sign) << 63 | static_cast<uint64_t>(1023 + e) << 52 | (x >> 12);
        std::memcpy(static_cast<uint8_t*>(dst) + 8 * i, &v, 8);
        break;
      }
      default: {
        // Integers: small signed values (wrap-around is defined anyway), any bytes for the rest.
        const int64_t v = static_cast<int64_t>(x % 2001) - 1000;
        std::memcpy(static_cast<uint8_t*>(dst) + dataTypeSize(t) * i, &v, dataTypeSize(t));  // little endian
      }
    }
  }
}

size_t sendElems(CallKind k, size_t count, int n) {
  return (k == CallKind::kReduceScatter || k == CallKind::kAllToAll) ? count * n : count;
}
size_t recvElems(CallKind k, size_t count, int n) {
  return (k == CallKind::kAllGather || k == CallKind::kAllToAll) ? count * n : count;
}

/// dst = ins[order[0]] op ins[order[1]] op ... over [off, off+len) elements (avg: sumDivide last).
void reduceInOrder(DataType t, RedOp op, const std::vector<std::vector<uint8_t>>& ins, const std::vector<int>& order,
                   size_t off, size_t len, uint8_t* dst) {
  const size_t es = dataTypeSize(t);
  const int n = static_cast<int>(order.size());
  std::memcpy(dst, ins[order[0]].data() + off * es, len * es);
  const RedOp combine = op == RedOp::kAvg ? RedOp::kSum : op;
  for (int j = 1; j < n; ++j) {
    const uint8_t* b = ins[order[j]].data() + off * es;
    if (j == n - 1 && op == RedOp::kAvg) {
      kernels::sumDivide(t, dst, dst, b, len, static_cast<uint32_t>(n));
    } else {
      kernels::reduce(t, combine, dst, dst, b, len);
    }
  }
}
std::vector<int> ringOrder(int n, int last) {  // last+1, last+2, ..., last
  std::vector<int> o;
  for (int j = 1; j <= n; ++j) o.push_back(ringMod(last + j, n));
  return o;
}

/// One collective on every rank, with its buffers and expected results.
struct Case {
  DevWork work;  // rank 0's; send/recv set per rank
  bool inPlace = false;
  std::vector<std::vector<uint8_t>> input, expect;
  std::vector<Bytes> buf, sendBuf;
  std::vector<size_t> checkOff;  // byte offset in buf[r] where expect[r] starts
  std::string name;

  Case(int n, CallKind kind, Variant v, DataType t, RedOp op, size_t count, bool inPlace_, int root)
      : inPlace(inPlace_) {
    work.kind = kind, work.algo = v.algo, work.proto = v.proto, work.type = t, work.op = op, work.root = root;
    work.count = count;
    name = std::string("n=") + std::to_string(n) + " kind=" + std::to_string(static_cast<int>(kind)) + " " + v.name +
           " " + dataTypeName(t) + " " + redOpName(op) + " count=" + std::to_string(count) +
           (inPlace ? " in-place" : "") + " root=" + std::to_string(root);
    const size_t es = dataTypeSize(t), se = sendElems(kind, count, n), re = recvElems(kind, count, n);
    input.resize(n), buf.resize(n), sendBuf.resize(n), expect.resize(n), checkOff.assign(n, 0);
    for (int r = 0; r < n; ++r) {
      input[r].resize(se * es + 1);
      fill(t, op, input[r].data(), se);
      if (!inPlace) {
        sendBuf[r].assign(input[r].begin(), input[r].end());
        buf[r].assign(re * es + 1, 0xCD);
      } else if (kind == CallKind::kAllGather) {
        buf[r].assign(re * es + 1, 0xCD);
        std::memcpy(buf[r].data() + r * count * es, input[r].data(), count * es);
      } else {
        buf[r].assign(input[r].begin(), input[r].end());  // send == recv, or recv = send + r * count (reduce-scatter)
      }
    }
    // Expected results.
    const size_t total = kind == CallKind::kReduceScatter ? count * n : count;
    std::vector<uint8_t> red(total * es + 1);
    const bool reduction =
        kind == CallKind::kAllReduce || kind == CallKind::kReduceScatter || kind == CallKind::kReduce;
    if (reduction && n == 1) {
      std::memcpy(red.data(), input[0].data(), total * es);
    } else if (reduction && v.algo == DevAlgo::kDirect) {
      std::vector<int> order;
      for (int j = 0; j < n; ++j) order.push_back(j);
      reduceInOrder(t, op, input, order, 0, total, red.data());
    } else if (kind == CallKind::kReduce) {
      reduceInOrder(t, op, input, ringOrder(n, root), 0, total, red.data());
    } else if (reduction) {
      for (int g = 0; g < n; ++g) {
        const size_t off = kind == CallKind::kReduceScatter ? g * count : segmentBegin(count, n, g);
        const size_t len = kind == CallKind::kReduceScatter ? count : segmentCount(count, n, g);
        reduceInOrder(t, op, input, ringOrder(n, g), off, len, red.data() + off * es);
      }
    }
    for (int r = 0; r < n; ++r) {
      auto& e = expect[r];
      switch (kind) {
        case CallKind::kAllReduce: e.assign(red.begin(), red.begin() + count * es); break;
        case CallKind::kReduceScatter:
          e.assign(red.begin() + r * count * es, red.begin() + (r + 1) * count * es);
          checkOff[r] = inPlace ? r * count * es : 0;
          break;
        case CallKind::kReduce:
          if (r == root) e.assign(red.begin(), red.begin() + count * es);
          break;
        case CallKind::kAllGather:
          for (int j = 0; j < n; ++j) e.insert(e.end(), input[j].begin(), input[j].begin() + count * es);
          break;
        case CallKind::kAllToAll:
          for (int j = 0; j < n; ++j) {
            e.insert(e.end(), input[j].begin() + r * count * es, input[j].begin() + (r + 1) * count * es);
          }
          break;
        case CallKind::kBroadcast: e.assign(input[root].begin(), input[root].begin() + count * es); break;
        default: break;
      }
    }
  }
  DevWork workFor(int r) {
    DevWork w = work;
    const size_t es = dataTypeSize(w.type);
    if (!inPlace) {
      w.send = sendBuf[r].data();
      w.recv = buf[r].data();
    } else if (w.kind == CallKind::kAllGather) {
      w.send = buf[r].data() + r * w.count * es;
      w.recv = buf[r].data();
    } else if (w.kind == CallKind::kReduceScatter) {
      w.send = buf[r].data();
      w.recv = buf[r].data() + r * w.count * es;
    } else {
      w.send = w.recv = buf[r].data();
    }
    return w;
  }
  void check(int n) {
    for (int r = 0; r < n; ++r) {
      INFO(name << " rank " << r);
      const auto& e = expect[r];
      if (e.empty()) continue;
      const uint8_t* got = buf[r].data() + checkOff[r];
      size_t bad = 0;
      while (bad < e.size() && got[bad] == e[bad]) ++bad;
      INFO("first differing byte " << bad << " of " << e.size());
      CHECK(bad == e.size());
    }
  }
};

/// Runs the cases in launches of at most kMaxWorksPerLaunch works on `comm`, then checks them.
void runCases(EmuComm& comm, std::vector<std::unique_ptr<Case>>& cases) {
  const int n = comm.size();
  const size_t per = std::getenv("FERRY_TEST_SINGLE") != nullptr ? 1 : kMaxWorksPerLaunch;
  for (size_t i = 0; i < cases.size(); i += per) {
    std::vector<DevWorkList> lists(n);
    const size_t e = std::min(cases.size(), i + per);
    for (int r = 0; r < n; ++r) {
      for (size_t j = i; j < e; ++j) lists[r].works[lists[r].nWorks++] = cases[j]->workFor(r);
    }
    if (std::getenv("FERRY_TEST_VERBOSE") != nullptr) {
      for (size_t j = i; j < e; ++j) std::fprintf(stderr, "%s\n", cases[j]->name.c_str());
    }
    comm.run(lists);
    for (size_t j = i; j < e; ++j) cases[j]->check(n);
  }
}
void runCases(int n, std::vector<std::unique_ptr<Case>>& cases) { runCases(commOf(n), cases); }

}  // namespace

TEST_CASE("gpu emu: reductions, every type x op x algorithm", "[gpu-emu]") {
  for (int n = 1; n <= 4; ++n) {
    for (const Variant& v : kVariants) {
      for (DataType t : kTypes) {
        std::vector<std::unique_ptr<Case>> cases;
        for (RedOp op : kOps) {
          if (!redOpDefinedFor(op, t)) continue;  // the bitwise ops: integer types only
          const bool inPlace = (static_cast<int>(op) + n) % 2 == 1;
          cases.push_back(std::make_unique<Case>(n, CallKind::kAllReduce, v, t, op, 37, inPlace, 0));
          cases.push_back(std::make_unique<Case>(n, CallKind::kReduceScatter, v, t, op, 13, !inPlace, 0));
          cases.push_back(
              std::make_unique<Case>(n, CallKind::kReduce, v, t, op, 21, inPlace, static_cast<int>(op) % n));
        }
        runCases(n, cases);
      }
    }
  }
}

TEST_CASE("gpu emu: every collective over sizes, in and out of place", "[gpu-emu]") {
  const DataType types[] = {DataType::kFloat32, DataType::kBfloat16, DataType::kInt32};
  const CallKind kinds[] = {CallKind::kAllReduce, CallKind::kReduceScatter, CallKind::kAllGather,
                            CallKind::kAllToAll,  CallKind::kBroadcast,     CallKind::kReduce};
  for (int n = 1; n <= 4; ++n) {
    const size_t counts[] = {0, 1, static_cast<size_t>(n - 1), 7, 333, 3001};
    for (const Variant& v : kVariants) {
      for (DataType t : types) {
        std::vector<std::unique_ptr<Case>> cases;
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            for (CallKind k : kinds) {
              const size_t c =
                  (k == CallKind::kAllToAll || k == CallKind::kReduceScatter) && count > 1000 ? count / n : count;
              const RedOp op = t == DataType::kInt32 ? RedOp::kSum : (count % 2 ? RedOp::kAvg : RedOp::kSum);
              cases.push_back(std::make_unique<Case>(n, k, v, t, op, c, inPlace, static_cast<int>(count % n)));
            }
          }
        }
        runCases(n, cases);
      }
    }
  }
}

TEST_CASE("gpu emu: copies of odd byte counts", "[gpu-emu]") {
  const CallKind kinds[] = {CallKind::kAllGather, CallKind::kAllToAll, CallKind::kBroadcast};
  for (int n = 2; n <= 4; ++n) {
    for (const Variant& v : kVariants) {
      std::vector<std::unique_ptr<Case>> cases;
      for (DataType t : {DataType::kInt8, DataType::kFloat16, DataType::kFloat64}) {
        for (CallKind k : kinds) {
          cases.push_back(std::make_unique<Case>(n, k, v, t, RedOp::kSum, 301, false, n - 1));
          cases.push_back(std::make_unique<Case>(n, k, v, t, RedOp::kSum, 5, true, 0));
        }
      }
      runCases(n, cases);
    }
  }
}

TEST_CASE("gpu emu: send/recv in any order, both protocols, self included", "[gpu-emu]") {
  for (int n = 1; n <= 4; ++n) {
    for (int round = 0; round < 3; ++round) {
      // Every rank sends to every rank (itself too); sizes differ per pair, beyond the FIFO depth.
      auto bytesOf = [&](int s, int d) { return static_cast<size_t>(4 * (1000 + 97 * s + 31 * d + 13 * round)); };
      auto protoOf = [&](int s, int d) { return (s + d + round) % 2 ? DevProto::kLL : DevProto::kSimple; };
      std::vector<std::vector<Bytes>> in(n, std::vector<Bytes>(n)), out = in;
      std::vector<DevWorkList> lists(n);
      for (int r = 0; r < n; ++r) {
        std::vector<DevWork> ws;
        for (int p = 0; p < n; ++p) {
          in[r][p].resize(bytesOf(r, p));
          fill(DataType::kUint8, RedOp::kSum, in[r][p].data(), in[r][p].size());
          out[r][p].assign(bytesOf(p, r), 0xCD);
          DevWork s;
          s.kind = CallKind::kSend, s.type = DataType::kFloat32, s.proto = protoOf(r, p), s.root = p;
          s.send = in[r][p].data(), s.count = in[r][p].size() / 4;
          DevWork q = s;
          q.kind = CallKind::kRecv, q.proto = protoOf(p, r), q.send = nullptr, q.recv = out[r][p].data();
          q.count = out[r][p].size() / 4;
          ws.push_back(s);
          ws.push_back(q);
        }
        std::shuffle(ws.begin(), ws.end(), rng());  // one send and one receive per pair: any order
        for (const DevWork& w : ws) lists[r].works[lists[r].nWorks++] = w;
      }
      commOf(n).run(lists);
      for (int r = 0; r < n; ++r) {
        for (int p = 0; p < n; ++p) {
          INFO("n=" << n << " round " << round << " " << p << " -> " << r);
          CHECK((out[r][p] == in[p][r]));
        }
      }
    }
  }
}

TEST_CASE("gpu emu: a mixed list, repeated launches", "[gpu-emu]") {
  for (int n = 2; n <= 4; ++n) {
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<std::unique_ptr<Case>> cases;
      for (const Variant& v : kVariants) {
        cases.push_back(
            std::make_unique<Case>(n, CallKind::kAllReduce, v, DataType::kFloat32, RedOp::kSum, 1000, false, 0));
        cases.push_back(
            std::make_unique<Case>(n, CallKind::kAllGather, v, DataType::kBfloat16, RedOp::kSum, 77, true, 0));
        cases.push_back(
            std::make_unique<Case>(n, CallKind::kBroadcast, v, DataType::kInt64, RedOp::kSum, 100, false, 1));
        cases.push_back(
            std::make_unique<Case>(n, CallKind::kAllToAll, v, DataType::kFloat16, RedOp::kSum, 50, rep == 1, 0));
        cases.push_back(
            std::make_unique<Case>(n, CallKind::kReduceScatter, v, DataType::kFloat64, RedOp::kAvg, 60, rep == 2, 0));
      }
      runCases(n, cases);
    }
  }
}

TEST_CASE("gpu emu: every collective at the GPU's block size, one channel and all", "[gpu-emu]") {
  // The launches the runtime makes: maxThreadsPerBlock() threads, one block for small lists
  // (kOneChannelMaxBytes) and every channel for the rest.
  const CallKind kinds[] = {CallKind::kAllReduce, CallKind::kReduceScatter, CallKind::kAllGather,
                            CallKind::kAllToAll,  CallKind::kBroadcast,     CallKind::kReduce};
  // Slots of 4 KiB (LL 2 KiB): a block of host threads per step costs the emulation dearly, and
  // these cases need only a few steps per connection, ragged ends and FIFO wrap-around included.
  // Four ranks on one channel, two ranks on one and on every channel (the emulation's cost grows
  // with the host threads of a launch: ranks x blocks x maxThreadsPerBlock()).
  for (int n : {2, 4}) {
    EmuComm comm(n, maxThreadsPerBlock(), 120'000'000'000ull, 4096, 2048);
    for (int blocks : {1, kChannels}) {
      if (n == 4 && blocks > 1) continue;
      comm.blocks = blocks;
      std::vector<std::unique_ptr<Case>> cases;
      for (const Variant& v : kVariants) {
        for (CallKind k : kinds) {
          const DataType t = k == CallKind::kAllReduce ? DataType::kBfloat16 : DataType::kFloat32;
          cases.push_back(std::make_unique<Case>(n, k, v, t, RedOp::kSum, blocks == 1 ? 5001 : 9001, k == kinds[0], 1));
        }
      }
      runCases(comm, cases);
    }
  }
}

TEST_CASE("gpu emu: a rank that never arrives ends in the timeout record, not a hang", "[gpu-emu]") {
  for (const Variant& v : kVariants) {
    EmuComm comm(2, kThreads, 300'000'000ull);  // 0.3 s
    Case c(2, CallKind::kAllReduce, v, DataType::kFloat32, RedOp::kSum, 1000, false, 0);
    std::vector<DevWorkList> lists(2);
    for (int r = 0; r < 2; ++r) lists[r].works[lists[r].nWorks++] = c.workFor(r);
    const std::vector<int> errs = comm.launch(lists, {0});  // rank 1 never launches
    INFO(v.name);
    CHECK(errs[0] == 719);  // cudaErrorLaunchFailure: the kernel trapped
    const DevError& e = comm.errors[0];
    CHECK(e.state == 1);
    CHECK(e.rank == 0);
    CHECK(e.peer == 1);
    CHECK(e.waitedNs >= 300'000'000ull);
    CHECK(e.seen < e.awaited);
    CHECK((e.channel >= 0 && e.channel < kChannels));
    if (v.algo == DevAlgo::kDirect) {
      CHECK(e.what == DevWait::kDirectSeq);
    } else {
      // The first step sends (the slot is free) and waits to receive from rank 1.
      CHECK((e.what == (v.proto == DevProto::kLL ? DevWait::kLLFlag : DevWait::kHead)));
    }
    CHECK(std::string(devWaitName(e.what)).find("(") != std::string::npos);
  }
}

int testMain(int argc, char** argv, RunCatch runCatch) {
#if FERRY_TEST_ON_GPU
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device: skipped\n");
    return 77;
  }
#endif
  return runCatch(argc, argv);
}
