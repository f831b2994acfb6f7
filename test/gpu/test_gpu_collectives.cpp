// GPU tests of the runtime's CUDA half (suite 'gpu'; exit 77 without a CUDA device).
//
//   collectives   initAll over {0}, {0,0}, {0,0,0,0}: every collective on device buffers, float32,
//                 bfloat16, int32 and fp8 e4m3 (when ferry has it), 1 element to a few MiB, each
//                 rank's calls issued in one group from this thread. Run under FERRY_GPU_ALGO /
//                 FERRY_GPU_PROTO to force ring, direct, LL or simple (see meson.build).
//   graph         capture an all-reduce of 2 and of 4 ranks into CUDA graphs, replay 10 times with
//                 new input (run once per algorithm and protocol: see meson.build).
//   special       NaN, +-Inf, subnormals, -0 through every collective in float32, float16, bfloat16
//                 and fp8 e4m3, 2 and 4 ranks, against the same calls on host buffers (ferry's host
//                 kernels, the reference): bit for bit, any NaN matching any NaN.
//   big           a uint8 all-reduce of 2^31 + 4099 elements (byte offsets past 32 bits), 2 ranks.
//   async         buffers from cudaMallocAsync (the stream-ordered pool) beside cudaMalloc ones.
//   streams       two ranks of one GPU on one stream, then on the legacy default stream: refused.
//   group         many collectives of 2 ranks in one group (more than one launch's worth of works).
//   staged        2 processes, each on device 0: the staged path (children: staged-child).
//   ipc           2 processes on devices 0 and 1: the kernel path through CUDA IPC (skipped with
//                 fewer than 2 GPUs; children: ipc-child). Under FERRY_GPU_CORESIDENT=1 both
//                 processes use device 0 (the kernel path on one GPU, as under MPS).
// Every failure prints the case (collective, algorithm, protocol, type, count, ranks), the rank and
// the first mismatching index with the value found and the one expected. A stream that does not
// finish within 20 s is reported as a hang of that case and the test exits.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/comm.hpp"
#include "gpu_harness.hpp"
#include "gpu_values.hpp"

using ferry::Comm;
using ferry::DataType;
using ferry::RedOp;
using ferry::Status;
using gputest::cudaCheck;
using gputest::kSkip;
using gputest::TypeCase;
using gputest::waitStream;

namespace {

enum class Coll { kAllReduceSum, kAllReduceMax, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kReduce, kSendRecv };
constexpr Coll kColls[] = {Coll::kAllReduceSum, Coll::kAllReduceMax, Coll::kReduceScatter, Coll::kAllGather,
                           Coll::kAllToAll,     Coll::kBroadcast,    Coll::kReduce,        Coll::kSendRecv};

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduceSum: return "allReduce(sum)";
    case Coll::kAllReduceMax: return "allReduce(max)";
    case Coll::kReduceScatter: return "reduceScatter(sum)";
    case Coll::kAllGather: return "allGather";
    case Coll::kAllToAll: return "allToAll";
    case Coll::kBroadcast: return "broadcast(root n-1)";
    case Coll::kReduce: return "reduce(sum, root 0)";
    case Coll::kSendRecv: return "send/recv ring";
  }
  return "?";
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : "auto";
}

// One rank driven by this process.
struct LocalRank {
  Comm* comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  size_t bufferBytes = 0;
};

int failures = 0;

size_t sendElems(Coll c, size_t count, int n) {
  return c == Coll::kReduceScatter || c == Coll::kAllToAll ? count * n : count;
}
size_t recvElems(Coll c, size_t count, int n) {
  return c == Coll::kAllGather || c == Coll::kAllToAll ? count * n : count;
}

// The expected recv element i of rank r (NaN: not checked).
double expected(Coll c, int r, int n, size_t count, size_t i) {
  using gputest::value;
  switch (c) {
    case Coll::kAllReduceSum:
    case Coll::kReduce: {
      if (c == Coll::kReduce && r != 0) return NAN;
      double s = 0;
      for (int q = 0; q < n; ++q) s += value(q, i);
      return s;
    }
    case Coll::kAllReduceMax: {
      double m = 0;
      for (int q = 0; q < n; ++q) m = std::max(m, value(q, i));
      return m;
    }
    case Coll::kReduceScatter: {
      double s = 0;
      for (int q = 0; q < n; ++q) s += value(q, r * count + i);
      return s;
    }
    case Coll::kAllGather: return value(static_cast<int>(i / count), i % count);
    case Coll::kAllToAll: return value(static_cast<int>(i / count), r * count + i % count);
    case Coll::kBroadcast: return value(n - 1, i);
    case Coll::kSendRecv: return value((r + n - 1) % n, i);
  }
  return NAN;
}

Status issue(Coll c, LocalRank& L, const TypeCase& t, size_t count) {
  Comm& comm = *L.comm;
  const int n = comm.size(), r = comm.rank();
  auto s = reinterpret_cast<ferry::Stream>(L.stream);
  switch (c) {
    case Coll::kAllReduceSum: return comm.allReduce(L.send, L.recv, count, t.type, RedOp::kSum, s);
    case Coll::kAllReduceMax: return comm.allReduce(L.send, L.recv, count, t.type, RedOp::kMax, s);
    case Coll::kReduceScatter: return comm.reduceScatter(L.send, L.recv, count, t.type, RedOp::kSum, s);
    case Coll::kAllGather: return comm.allGather(L.send, L.recv, count, t.type, s);
    case Coll::kAllToAll: return comm.allToAll(L.send, L.recv, count, t.type, s);
    case Coll::kBroadcast: return comm.broadcast(L.send, L.recv, count, t.type, n - 1, s);
    case Coll::kReduce: return comm.reduce(L.send, L.recv, count, t.type, RedOp::kSum, 0, s);
    case Coll::kSendRecv: {
      Status st = comm.send(L.send, count, t.type, (r + 1) % n, s);
      if (!st.isOk()) return st;
      return comm.recv(L.recv, count, t.type, (r + n - 1) % n, s);
    }
  }
  return Status::ok();
}

// Fill the inputs of every local rank with `shift` added to the closed form.
void fill(std::vector<LocalRank>& ranks, Coll c, const TypeCase& t, size_t count, int n, double shift = 0) {
  for (LocalRank& L : ranks) {
    const int r = L.comm->rank();
    std::vector<uint8_t> host(sendElems(c, count, n) * t.size);
    for (size_t i = 0; i < sendElems(c, count, n); ++i)
      gputest::encode(t, gputest::value(r, i) + shift, &host[i * t.size]);
    cudaCheck(cudaSetDevice(L.device), "cudaSetDevice");
    cudaCheck(cudaMemcpy(L.send, host.data(), host.size(), cudaMemcpyHostToDevice), "fill send");
    cudaCheck(cudaMemset(L.recv, 0xff, recvElems(c, count, n) * t.size), "poison recv");
    // The copies and the memset run on the legacy stream, which the ranks' non-blocking streams do
    // not wait for.
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize after fill");
  }
}

// Compare every local rank's output; prints the first mismatch of each rank.
void check(std::vector<LocalRank>& ranks, Coll c, const TypeCase& t, size_t count, int n, const std::string& what,
           double shift = 0) {
  for (LocalRank& L : ranks) {
    const int r = L.comm->rank();
    std::vector<uint8_t> host(recvElems(c, count, n) * t.size);
    cudaCheck(cudaSetDevice(L.device), "cudaSetDevice");
    cudaCheck(cudaMemcpy(host.data(), L.recv, host.size(), cudaMemcpyDeviceToHost), "read recv");
    for (size_t i = 0; i < recvElems(c, count, n); ++i) {
      double want = expected(c, r, n, count, i);
      if (std::isnan(want)) break;
      // Shifted inputs: sums shift by n * shift, copies and max by shift.
      bool sums = c == Coll::kAllReduceSum || c == Coll::kReduce || c == Coll::kReduceScatter;
      want += sums ? n * shift : shift;
      double got = gputest::decode(t, &host[i * t.size]);
      if (got != want) {
        std::printf("FAIL %s rank %d: first mismatch at index %zu of %zu: got %g, expected %g\n", what.c_str(), r, i,
                    recvElems(c, count, n), got, want);
        ++failures;
        break;
      }
    }
  }
}

std::string caseName(Coll c, const TypeCase& t, size_t count, int n) {
  return std::string(collName(c)) + " algo=" + env("FERRY_GPU_ALGO") + " proto=" + env("FERRY_GPU_PROTO") +
         " type=" + t.name + " count=" + std::to_string(count) + " ranks=" + std::to_string(n);
}

// Issue one collective on every local rank (in one group), wait, check.
void runCase(std::vector<LocalRank>& ranks, Coll c, const TypeCase& t, size_t count) {
  const int n = ranks[0].comm->size();
  const std::string what = caseName(c, t, count, n);
  fill(ranks, c, t, count, n);
  Status g = ferry::groupStart();
  for (LocalRank& L : ranks) {
    Status st = issue(c, L, t, count);
    if (!st.isOk())
      std::printf("FAIL %s rank %d: the call failed: %s\n", what.c_str(), L.comm->rank(), st.message().c_str());
  }
  Status end = ferry::groupEnd();
  if (!end.isOk()) {
    std::printf("FAIL %s: %s\n", what.c_str(), end.message().c_str());
    ++failures;
    return;
  }
  for (LocalRank& L : ranks) waitStream(L.stream, what + " rank " + std::to_string(L.comm->rank()));
  check(ranks, c, t, count, n, what);
}

std::vector<TypeCase> types() {
  std::vector<TypeCase> t = {{DataType::kFloat32, 4, "float32"},
                             {DataType::kBfloat16, 2, "bfloat16"},
                             {DataType::kInt32, 4, "int32"}};
  if (ferry::isValidDataType(gputest::kFloat8e4m3)) {
    t.push_back({static_cast<DataType>(gputest::kFloat8e4m3), 1, "fp8e4m3"});
  } else {
    std::printf("note: this ferry has no fp8 e4m3 type (ncclFloat8e4m3 = 10): fp8 not tested\n");
  }
  return t;
}

std::vector<LocalRank> localRanks(const std::vector<std::unique_ptr<Comm>>& comms, size_t bytes) {
  std::vector<LocalRank> out;
  for (const auto& c : comms) {
    LocalRank L;
    L.comm = c.get();
    L.device = c->device();
    L.bufferBytes = bytes;
    cudaCheck(cudaSetDevice(L.device), "cudaSetDevice");
    cudaCheck(cudaStreamCreateWithFlags(&L.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaMalloc(&L.send, bytes), "cudaMalloc send");
    cudaCheck(cudaMalloc(&L.recv, bytes), "cudaMalloc recv");
    out.push_back(L);
  }
  return out;
}

void freeRanks(std::vector<LocalRank>& ranks) {
  for (LocalRank& L : ranks) {
    cudaSetDevice(L.device);
    cudaFree(L.send);
    cudaFree(L.recv);
    cudaStreamDestroy(L.stream);
  }
}

std::vector<std::unique_ptr<Comm>> makeComms(const std::vector<int>& devices) {
  auto r = Comm::initAll(devices);
  if (!r.isOk()) {
    std::printf("FAIL: Comm::initAll over %zu ranks: %s\n", devices.size(), r.status().message().c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  for (auto& c : *r) {
    std::printf("rank %d of %d on device %d: %zu bytes of device memory\n", c->rank(), c->size(), c->device(),
                c->deviceMemoryBytes());
  }
  return std::move(*r);
}

int collectives() {
  const size_t counts[] = {1, 3, 1000, 16384, 65537, 262144};
  for (int n : {1, 2, 4}) {
    auto comms = makeComms(std::vector<int>(n, 0));
    auto ranks = localRanks(comms, 4 * 262144 * static_cast<size_t>(n) + 4096);
    for (const TypeCase& t : types()) {
      for (size_t count : counts) {
        for (Coll c : kColls) runCase(ranks, c, t, count);
      }
    }
    freeRanks(ranks);
    std::printf("%d ranks done, %d failures so far\n", n, failures);
  }
  return failures == 0 ? 0 : 1;
}

int graphOf(int n);

// Capture one all-reduce per rank into a graph, replay it with fresh inputs.
int graph() {
  for (int n : {2, 4}) {
    if (graphOf(n) != 0) return 1;
  }
  return 0;
}

int graphOf(int n) {
  auto comms = makeComms(std::vector<int>(n, 0));
  auto ranks = localRanks(comms, 1 << 22);
  const TypeCase t{DataType::kFloat32, 4, "float32"};
  for (size_t count : {size_t{1000}, size_t{1} << 20}) {
    std::vector<cudaGraphExec_t> execs;
    fill(ranks, Coll::kAllReduceSum, t, count, n);
    for (LocalRank& L : ranks) {
      cudaCheck(cudaSetDevice(L.device), "cudaSetDevice");
      // Global mode, as PyTorch uses: ferry must make no call that capture forbids.
      cudaCheck(cudaStreamBeginCapture(L.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    }
    (void)ferry::groupStart();
    for (LocalRank& L : ranks) {
      Status st =
          L.comm->allReduce(L.send, L.recv, count, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
      if (!st.isOk()) std::printf("FAIL graph capture rank %d: %s\n", L.comm->rank(), st.message().c_str());
    }
    Status end = ferry::groupEnd();
    // End every capture before instantiating (instantiation is not allowed while this thread captures).
    std::vector<cudaGraph_t> graphs;
    for (LocalRank& L : ranks) {
      cudaGraph_t g;
      cudaCheck(cudaStreamEndCapture(L.stream, &g), "cudaStreamEndCapture");
      graphs.push_back(g);
    }
    for (cudaGraph_t g : graphs) {
      cudaGraphExec_t e;
      cudaCheck(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
      cudaGraphDestroy(g);
      execs.push_back(e);
    }
    if (!end.isOk()) {
      std::printf("FAIL graph capture of allReduce count=%zu: %s\n", count, end.message().c_str());
      return 1;
    }
    for (int k = 0; k < 10; ++k) {
      fill(ranks, Coll::kAllReduceSum, t, count, n, k);
      for (size_t i = 0; i < ranks.size(); ++i) {
        cudaCheck(cudaSetDevice(ranks[i].device), "cudaSetDevice");
        cudaCheck(cudaGraphLaunch(execs[i], ranks[i].stream), "cudaGraphLaunch");
      }
      std::string what = "graph replay " + std::to_string(k) + " of " + caseName(Coll::kAllReduceSum, t, count, n);
      for (LocalRank& L : ranks) waitStream(L.stream, what);
      check(ranks, Coll::kAllReduceSum, t, count, n, what, k);
    }
    for (auto e : execs) cudaGraphExecDestroy(e);
  }
  freeRanks(ranks);
  return failures == 0 ? 0 : 1;
}

// Many collectives in one group: 20 all-reduces on slices of the buffers plus an all-gather.
int group() {
  auto comms = makeComms({0, 0});
  auto ranks = localRanks(comms, 1 << 22);
  const TypeCase t{DataType::kFloat32, 4, "float32"};
  constexpr size_t count = 4096;
  constexpr int works = 20;  // more than kMaxWorksPerLaunch (16): two launches
  fill(ranks, Coll::kAllReduceSum, t, count * works, 2);
  (void)ferry::groupStart();
  for (LocalRank& L : ranks) {
    for (int k = 0; k < works; ++k) {
      auto* s = static_cast<float*>(L.send) + k * count;
      auto* r = static_cast<float*>(L.recv) + k * count;
      Status st = L.comm->allReduce(s, r, count, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
      if (!st.isOk()) std::printf("FAIL group rank %d work %d: %s\n", L.comm->rank(), k, st.message().c_str());
    }
  }
  Status end = ferry::groupEnd();
  if (!end.isOk()) {
    std::printf("FAIL group of %d allReduces: %s\n", works, end.message().c_str());
    return 1;
  }
  for (LocalRank& L : ranks) waitStream(L.stream, "group of 20 allReduces");
  check(ranks, Coll::kAllReduceSum, t, count * works, 2, "group of 20 allReduce(sum) float32 count=4096 ranks=2");
  freeRanks(ranks);
  return failures == 0 ? 0 : 1;
}

// One rank of a 2-process job (staged: both on device 0; ipc: device = rank).
// Special values of each type as bit patterns (little endian), chosen so that sums over up to 4
// ranks are exact in every order (magnitudes <= 1, no overflow): the device and host paths may
// reduce in different orders and must still agree bit for bit, NaN aside.
std::vector<uint32_t> specials(const TypeCase& t) {
  switch (t.size) {
    case 4:
      return {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x00000001,
              0x00000002, 0x007fffff, 0x3f800000, 0xbf800000, 0x80000001};
    case 2:
      if (t.type == DataType::kBfloat16) {
        return {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x0002, 0x007f, 0x3f80, 0xbf80, 0x8001};
      }
      return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x0002, 0x03ff, 0x3c00, 0xbc00, 0x8001};
    default:  // fp8 e4m3: no infinities; 0x7f is NaN
      return {0x00, 0x80, 0x7f, 0xff, 0x01, 0x02, 0x07, 0x38, 0xb8, 0x81};
  }
}
bool isNanBits(const TypeCase& t, const uint8_t* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, t.size);
  switch (t.size) {
    case 4: return (v & 0x7f800000) == 0x7f800000 && (v & 0x7fffff) != 0;
    case 2:
      if (t.type == DataType::kBfloat16) return (v & 0x7f80) == 0x7f80 && (v & 0x7f) != 0;
      return (v & 0x7c00) == 0x7c00 && (v & 0x3ff) != 0;
    default: return (v & 0x7f) == 0x7f;
  }
}

int special() {
  std::vector<TypeCase> ts = {{DataType::kFloat32, 4, "float32"},
                              {DataType::kFloat16, 2, "float16"},
                              {DataType::kBfloat16, 2, "bfloat16"}};
  if (ferry::isValidDataType(gputest::kFloat8e4m3)) {
    ts.push_back({static_cast<DataType>(gputest::kFloat8e4m3), 1, "fp8e4m3"});
  }
  const Coll colls[] = {Coll::kAllReduceSum, Coll::kAllReduceMax, Coll::kReduceScatter, Coll::kAllGather,
                        Coll::kAllToAll,     Coll::kBroadcast,    Coll::kReduce,        Coll::kSendRecv};
  for (int n : {2, 4}) {
    auto comms = makeComms(std::vector<int>(n, 0));
    const size_t count = 3001;  // LL-sized, and ragged
    const size_t bytes = count * 4 * n + 64;
    auto ranks = localRanks(comms, bytes);
    std::vector<std::vector<uint8_t>> hsend(n, std::vector<uint8_t>(bytes)), hrecv = hsend;
    for (const TypeCase& t : ts) {
      const std::vector<uint32_t> sp = specials(t);
      for (Coll c : colls) {
        const std::string what = "special values " + caseName(c, t, count, n);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < sendElems(c, count, n); ++i) {
            const uint32_t v = sp[(i * 7 + static_cast<size_t>(r) * 3 + i / sp.size()) % sp.size()];
            std::memcpy(&hsend[r][i * t.size], &v, t.size);
          }
          std::memset(hrecv[r].data(), 0, bytes);
          LocalRank& L = ranks[r];
          cudaCheck(cudaMemcpy(L.send, hsend[r].data(), bytes, cudaMemcpyHostToDevice), "fill send");
          cudaCheck(cudaMemset(L.recv, 0, bytes), "clear recv");
        }
        cudaCheck(cudaDeviceSynchronize(), "sync after fill");
        // Device buffers: the kernels. Host buffers, same calls: the host kernels (the reference).
        for (int pass = 0; pass < 2; ++pass) {
          (void)ferry::groupStart();
          for (int r = 0; r < n; ++r) {
            LocalRank L = ranks[r];
            if (pass == 1) L.send = hsend[r].data(), L.recv = hrecv[r].data();
            Status st = issue(c, L, t, count);
            if (!st.isOk()) {
              std::printf("FAIL %s rank %d (%s): %s\n", what.c_str(), r, pass ? "host" : "device",
                          st.message().c_str());
            }
          }
          Status end = ferry::groupEnd();
          if (!end.isOk()) {
            std::printf("FAIL %s (%s): %s\n", what.c_str(), pass ? "host" : "device", end.message().c_str());
            ++failures;
          }
          if (pass == 0)
            for (LocalRank& L : ranks) waitStream(L.stream, what);
        }
        for (int r = 0; r < n; ++r) {
          if (c == Coll::kReduce && r != 0) continue;
          std::vector<uint8_t> got(bytes);
          cudaCheck(cudaMemcpy(got.data(), ranks[r].recv, bytes, cudaMemcpyDeviceToHost), "read recv");
          for (size_t i = 0; i < recvElems(c, count, n); ++i) {
            const uint8_t* a = &got[i * t.size];
            const uint8_t* b = &hrecv[r][i * t.size];
            if ((isNanBits(t, a) && isNanBits(t, b)) || std::memcmp(a, b, t.size) == 0) continue;
            uint32_t x = 0, y = 0;
            std::memcpy(&x, a, t.size);
            std::memcpy(&y, b, t.size);
            std::printf("FAIL %s rank %d: element %zu is 0x%x on the GPU, 0x%x from the host kernels\n", what.c_str(),
                        r, i, x, y);
            ++failures;
            break;
          }
        }
      }
    }
    freeRanks(ranks);
    std::printf("special values, %d ranks: %d failures so far\n", n, failures);
  }
  return failures == 0 ? 0 : 1;
}

// uint8 all-reduce of more than 2^31 elements: every byte offset past 32 bits must be right.
int big() {
  const size_t count = (size_t{1} << 31) + 4099;
  auto comms = makeComms({0, 0});
  std::vector<LocalRank> ranks = localRanks(comms, count);
  std::vector<uint8_t> host(count);
  for (LocalRank& L : ranks) {
    const int r = L.comm->rank();
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(r) * 13 + (i >> 31));
    cudaCheck(cudaMemcpy(L.send, host.data(), count, cudaMemcpyHostToDevice), "fill send");
  }
  const TypeCase t{DataType::kUint8, 1, "uint8"};
  (void)ferry::groupStart();
  for (LocalRank& L : ranks) {
    Status st =
        L.comm->allReduce(L.send, L.recv, count, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
    if (!st.isOk()) std::printf("FAIL big all-reduce rank %d: %s\n", L.comm->rank(), st.message().c_str());
  }
  Status end = ferry::groupEnd();
  if (!end.isOk()) return std::printf("FAIL big all-reduce: %s\n", end.message().c_str()), 1;
  for (LocalRank& L : ranks) waitStream(L.stream, "uint8 all-reduce of 2^31 + 4099 elements");
  cudaCheck(cudaMemcpy(host.data(), ranks[1].recv, count, cudaMemcpyDeviceToHost), "read recv");
  for (size_t i = 0; i < count; ++i) {
    const uint8_t want = static_cast<uint8_t>(2 * (i * 7 + (i >> 31)) + 13);
    if (host[i] != want) {
      std::printf("FAIL uint8 all-reduce of %zu elements: element %zu is %u, expected %u\n", count, i, host[i], want);
      return 1;
    }
  }
  freeRanks(ranks);
  std::printf("uint8 all-reduce of %zu elements: ok\n", count);
  return 0;
}

// Buffers from the stream-ordered pool (cudaMallocAsync) mixed with cudaMalloc ones.
int async() {
  auto comms = makeComms({0, 0});
  auto ranks = localRanks(comms, 16);
  const TypeCase t{DataType::kFloat32, 4, "float32"};
  for (size_t count : {size_t{1000}, size_t{1} << 20}) {
    for (LocalRank& L : ranks) {
      cudaFree(L.send);
      cudaCheck(cudaMallocAsync(&L.send, count * 4 * 2, L.stream), "cudaMallocAsync");
      cudaFree(L.recv);
      cudaCheck(cudaMalloc(&L.recv, count * 4 * 2), "cudaMalloc");
      cudaCheck(cudaStreamSynchronize(L.stream), "sync after cudaMallocAsync");
    }
    for (Coll c : {Coll::kAllReduceSum, Coll::kAllGather, Coll::kSendRecv}) runCase(ranks, c, t, count);
    for (LocalRank& L : ranks) {
      cudaCheck(cudaFreeAsync(L.send, L.stream), "cudaFreeAsync");
      cudaCheck(cudaStreamSynchronize(L.stream), "sync after cudaFreeAsync");
      L.send = nullptr;
      cudaCheck(cudaMalloc(&L.send, 16), "cudaMalloc");
    }
  }
  freeRanks(ranks);
  return failures == 0 ? 0 : 1;
}

// Two ranks of one GPU on one stream, or on the legacy default stream: refused at the call, naming
// both ranks (or the stream), with nothing enqueued; the communicators stay usable.
int streams() {
  auto comms = makeComms({0, 0});
  auto ranks = localRanks(comms, 4096);
  auto expectRefusal = [&](const char* what, ferry::Stream s0, ferry::Stream s1, const char* needle) {
    (void)ferry::groupStart();
    (void)ranks[0].comm->allReduce(ranks[0].send, ranks[0].recv, 16, DataType::kFloat32, RedOp::kSum, s0);
    (void)ranks[1].comm->allReduce(ranks[1].send, ranks[1].recv, 16, DataType::kFloat32, RedOp::kSum, s1);
    Status end = ferry::groupEnd();
    if (end.isOk() || end.message().find(needle) == std::string::npos) {
      std::printf("FAIL %s: expected an error naming \"%s\", got: %s\n", what, needle,
                  end.isOk() ? "success" : end.message().c_str());
      ++failures;
    } else {
      std::printf("ok %s: %s\n", what, end.message().c_str());
    }
  };
  auto s0 = reinterpret_cast<ferry::Stream>(ranks[0].stream);
  expectRefusal("two ranks on one stream", s0, s0, "ranks 0 and 1");
  expectRefusal("the legacy default stream", nullptr, nullptr, "legacy default stream");
  cudaCheck(cudaDeviceSynchronize(), "nothing was enqueued");
  runCase(ranks, Coll::kAllReduceSum, {DataType::kFloat32, 4, "float32"}, 1000);  // still usable
  freeRanks(ranks);
  return failures == 0 ? 0 : 1;
}

int child(int rank, int size, const std::string& hex, bool ipc) {
  auto id = ferry::UniqueId::fromHex(hex);
  if (!id.isOk()) return std::printf("FAIL child: %s\n", id.status().message().c_str()), 1;
  const char* coresident = std::getenv("FERRY_GPU_CORESIDENT");
  const bool oneGpu = coresident != nullptr && std::string(coresident) == "1";
  auto c = Comm::create(*id, rank, size, ipc && !oneGpu ? rank : 0);
  if (!c.isOk()) return std::printf("FAIL child rank %d: Comm::create: %s\n", rank, c.status().message().c_str()), 1;
  std::printf("process rank %d on device %d: %zu bytes of device memory (%s path expected)\n", rank, (*c)->device(),
              (*c)->deviceMemoryBytes(), ipc ? "kernel" : "staged");
  if (ipc != ((*c)->deviceMemoryBytes() > 0)) {
    std::printf("FAIL child rank %d: expected the %s path\n", rank, ipc ? "kernel" : "staged");
    ++failures;
  }
  std::vector<std::unique_ptr<Comm>> one;
  one.push_back(std::move(*c));
  auto ranks = localRanks(one, 4 * 65537 * 2 + 4096);
  for (const TypeCase& t : types()) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
      for (Coll k : kColls) runCase(ranks, k, t, count);
    }
  }
  if (!ipc) {
    // Staged calls are capturable once the staging buffers are large enough (sized by the runs above).
    const TypeCase t{DataType::kFloat32, 4, "float32"};
    LocalRank& L = ranks[0];
    fill(ranks, Coll::kAllReduceSum, t, 1000, size);
    cudaCheck(cudaStreamBeginCapture(L.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    Status st = L.comm->allReduce(L.send, L.recv, 1000, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
    cudaGraph_t g;
    cudaCheck(cudaStreamEndCapture(L.stream, &g), "cudaStreamEndCapture");
    if (!st.isOk()) {
      std::printf("FAIL staged capture rank %d: %s\n", rank, st.message().c_str());
      return 1;
    }
    cudaGraphExec_t e;
    cudaCheck(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
    for (int k = 0; k < 10; ++k) {
      fill(ranks, Coll::kAllReduceSum, t, 1000, size, k);
      cudaCheck(cudaGraphLaunch(e, L.stream), "cudaGraphLaunch");
      waitStream(L.stream, "staged graph replay " + std::to_string(k));
      check(ranks, Coll::kAllReduceSum, t, 1000, size, "staged graph replay " + std::to_string(k), k);
    }
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
  }
  freeRanks(ranks);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  if (mode == "staged-child" || mode == "ipc-child") {
    if (argc < 5) return 2;
    return child(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], mode == "ipc-child");
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return kSkip;
  }
  if (mode == "collectives") return collectives();
  if (mode == "graph") return graph();
  if (mode == "group") return group();
  if (mode == "staged") return gputest::runRanks("/proc/self/exe", "staged-child", 2);
  if (mode == "special") return special();
  if (mode == "streams") return streams();
  if (mode == "big") return big();
  if (mode == "async") return async();
  if (mode == "ipc") {
    const char* co = std::getenv("FERRY_GPU_CORESIDENT");
    if (co != nullptr && std::string(co) == "1")
      return gputest::runRanks("/proc/self/exe", "ipc-child", 2);  // both on device 0
    if (devices < 2) {
      std::printf("SKIP: the CUDA IPC test needs 2 GPUs (found %d)\n", devices);
      return kSkip;
    }
    return gputest::runRanks("/proc/self/exe", "ipc-child", 2);
  }
  std::printf("unknown mode %s (collectives, graph, special, big, async, streams, group, staged, ipc)\n", mode.c_str());
  return 2;
}
