// GPU test of the reproducible mode on device buffers (suite 'gpu'; exit 77 without a CUDA device).
// On the kernel path the mode's calls are staged through host memory and run the host code, so
// their bits must be the host mode's.
//
//   (no argument)  2 ranks of one process (initAll on device 0): a reproducible all-reduce on device
//                  buffers is refused, naming the rank, the call and the remedy, with nothing
//                  enqueued; calls the mode leaves alone, and every call once the mode is off, still
//                  run the kernels. Then jobs of 2 and 3 processes on device 0, one rank each (the
//                  kernel path: run under FERRY_GPU_CORESIDENT=1; children: child), run all-reduce
//                  (sum, avg, in place; 1 Mi elements: the pipelined form in several chunk steps),
//                  reduce-scatter and reduce of float32 and bfloat16 over adversarial bits
//                  (magnitudes across the range, cancellations, subnormals, NaN, infinities of one
//                  and of both signs), a group of an all-gather and an all-reduce on one stream, and
//                  three replays of a captured all-reduce. Each output must equal the same call's on
//                  host buffers in the mode bit for bit (docs/RELIABILITY.md, "Reproducible
//                  reductions": host against GPU).
// Every failure prints the case, the rank and the first differing element with both bit patterns.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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
using gputest::TypeCase;
using gputest::waitStream;

namespace {

int failures = 0;

// One rank driven by this process, with its stream and device buffers of `bytes` each.
struct LocalRank {
  Comm* comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

LocalRank makeRank(Comm& comm, size_t bytes) {
  LocalRank L;
  L.comm = &comm;
  cudaCheck(cudaSetDevice(comm.device()), "cudaSetDevice");
  cudaCheck(cudaStreamCreateWithFlags(&L.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaCheck(cudaMalloc(&L.send, bytes), "cudaMalloc send");
  cudaCheck(cudaMalloc(&L.recv, bytes), "cudaMalloc recv");
  return L;
}

void freeRank(LocalRank& L) {
  cudaSetDevice(L.comm->device());
  cudaFree(L.send);
  cudaFree(L.recv);
  cudaStreamDestroy(L.stream);
}

// Element i of rank r's input for case `seed`, as float32 bits (bfloat16 keeps the top half). The
// element's kind comes from (seed, i) alone, so that every rank agrees on it: magnitudes across the
// whole range, magnitudes within 2^20 of each other, one value with alternating signs over the ranks
// (cancels at an even rank count), subnormals, NaN, +-infinity of one or of both signs.
uint32_t adversarialBits(uint64_t seed, int r, size_t i) {
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  const uint64_t element = mix(seed * 0x100000001b3ull ^ i);
  const uint64_t own = mix(element ^ (static_cast<uint64_t>(r) + 1) * 0xd6e8feb86659fd93ull);
  const uint32_t sign = static_cast<uint32_t>(own >> 63) << 31, mantissa = static_cast<uint32_t>(own) & 0x7fffff;
  switch (element % 100) {
    case 0: return 0x7fc00000u | (static_cast<uint32_t>(own) & 0x3fffff);  // NaN, any payload
    case 1: return 0x7f800000u | (r == 0 ? 0x80000000u : 0);               // -inf on rank 0 only
    case 2: return 0x7f800000u;                                            // +inf on every rank
    case 3: return (r % 2 == 0 ? 0 : 0x80000000u) | 0x7f800000u;           // both signs (n > 1)
    case 4:
    case 5:
    case 6: return sign | mantissa;  // subnormal
    default: break;
  }
  if (element % 100 < 30) {  // the same value, its sign alternating over the ranks
    const uint32_t e = 1 + static_cast<uint32_t>(element >> 8) % 250;
    return (r % 2 == 0 ? 0 : 0x80000000u) | e << 23 | (static_cast<uint32_t>(element >> 32) & 0x7fffff);
  }
  if (element % 100 < 60) {  // within 2^20 of each other, around a per-element binade
    const uint32_t base = 40 + static_cast<uint32_t>(element >> 8) % 170;
    return sign | (base + static_cast<uint32_t>(own >> 40) % 21) << 23 | mantissa;
  }
  return sign | (1 + static_cast<uint32_t>(own >> 40) % 254) << 23 | mantissa;  // the whole range
}

void fillAdversarial(const TypeCase& t, uint64_t seed, int r, size_t elems, std::vector<uint8_t>& out) {
  out.resize(elems * t.size);
  for (size_t i = 0; i < elems; ++i) {
    const uint32_t bits = adversarialBits(seed, r, i);
    if (t.size == 4) {
      std::memcpy(&out[i * 4], &bits, 4);
    } else {
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&out[i * 2], &top, 2);
    }
  }
}

// The first element where `a` and `b` differ, printed with both values' bits; true when none does.
bool sameBits(const TypeCase& t, const uint8_t* a, const uint8_t* b, size_t elems, const std::string& what, int r,
              const char* left, const char* right) {
  for (size_t i = 0; i < elems; ++i) {
    if (std::memcmp(a + i * t.size, b + i * t.size, t.size) == 0) continue;
    uint32_t x = 0, y = 0;
    std::memcpy(&x, a + i * t.size, t.size);
    std::memcpy(&y, b + i * t.size, t.size);
    std::printf("FAIL %s rank %d: element %zu of %zu is 0x%x %s but 0x%x %s\n", what.c_str(), r, i, elems, x, left, y,
                right);
    ++failures;
    return false;
  }
  return true;
}

enum class ReproColl { kAllReduceSum, kAllReduceAvg, kAllReduceInPlace, kReduceScatter, kReduce };

const char* reproName(ReproColl c) {
  switch (c) {
    case ReproColl::kAllReduceSum: return "allReduce(sum)";
    case ReproColl::kAllReduceAvg: return "allReduce(avg)";
    case ReproColl::kAllReduceInPlace: return "allReduce(sum, in place)";
    case ReproColl::kReduceScatter: return "reduceScatter(sum)";
    case ReproColl::kReduce: return "reduce(sum, root 0)";
  }
  return "?";
}

// One call on `send`/`recv`: stream-ordered on `stream`, or (null) the host API on host buffers.
Status reproIssue(Comm& comm, ReproColl c, const void* send, void* recv, size_t count, DataType type,
                  ferry::Stream stream) {
  const RedOp op = c == ReproColl::kAllReduceAvg ? RedOp::kAvg : RedOp::kSum;
  if (c == ReproColl::kReduceScatter) {
    return stream ? comm.reduceScatter(send, recv, count, type, op, stream)
                  : comm.reduceScatter(send, recv, count, type, op);
  }
  if (c == ReproColl::kReduce) {
    return stream ? comm.reduce(send, recv, count, type, op, 0, stream) : comm.reduce(send, recv, count, type, op, 0);
  }
  return stream ? comm.allReduce(send, recv, count, type, op, stream) : comm.allReduce(send, recv, count, type, op);
}

// The same call on device buffers (staged on the kernel path) and on host buffers, both in the mode:
// the outputs must agree bit for bit.
void reproCase(LocalRank& L, ReproColl c, const TypeCase& t, size_t count, uint64_t seed) {
  Comm& comm = *L.comm;
  const int n = comm.size(), r = comm.rank();
  const std::string what = std::string("reproducible ") + reproName(c) + " type=" + t.name +
                           " count=" + std::to_string(count) + " ranks=" + std::to_string(n);
  const size_t inElems = c == ReproColl::kReduceScatter ? count * n : count;
  std::vector<uint8_t> input, onHost(count * t.size, 0), fromDevice(count * t.size, 0xee);
  fillAdversarial(t, seed, r, inElems, input);
  void* devIn = c == ReproColl::kAllReduceInPlace ? L.recv : L.send;
  cudaCheck(cudaMemcpy(devIn, input.data(), input.size(), cudaMemcpyHostToDevice), "fill send");
  if (c != ReproColl::kAllReduceInPlace) cudaCheck(cudaMemset(L.recv, 0xee, count * t.size), "poison recv");
  cudaCheck(cudaDeviceSynchronize(), "sync after fill");
  Status st = reproIssue(comm, c, devIn, L.recv, count, t.type, reinterpret_cast<ferry::Stream>(L.stream));
  if (!st.isOk()) {
    std::printf("FAIL %s rank %d (device buffers): %s\n", what.c_str(), r, st.message().c_str());
    ++failures;
    return;
  }
  waitStream(L.stream, what);
  // The stream is drained (its host functions too): the host call cannot overlap the staged one.
  st = reproIssue(comm, c, input.data(), onHost.data(), count, t.type, nullptr);
  if (!st.isOk()) {
    std::printf("FAIL %s rank %d (host buffers): %s\n", what.c_str(), r, st.message().c_str());
    ++failures;
    return;
  }
  if (c == ReproColl::kReduce && r != 0) return;
  cudaCheck(cudaMemcpy(fromDevice.data(), L.recv, fromDevice.size(), cudaMemcpyDeviceToHost), "read recv");
  sameBits(t, fromDevice.data(), onHost.data(), count, what, r, "from device buffers", "from host buffers");
}

// A group of an all-gather and an all-reduce on one stream: the sum stages the whole group.
void reproGroup(LocalRank& L, const TypeCase& t) {
  Comm& comm = *L.comm;
  const int n = comm.size(), r = comm.rank();
  const size_t gathered = 1000, summed = 4099, offset = size_t{1} << 20;  // bytes into each buffer
  const std::string what =
      std::string("reproducible group of allGather and allReduce(sum) type=") + t.name + " ranks=" + std::to_string(n);
  std::vector<uint8_t> gin, sin, expectGather, part, onHost(summed * t.size);
  fillAdversarial(t, 7, r, gathered, gin);
  fillAdversarial(t, 8, r, summed, sin);
  for (int q = 0; q < n; ++q) {
    fillAdversarial(t, 7, q, gathered, part);
    expectGather.insert(expectGather.end(), part.begin(), part.end());
  }
  auto* send = static_cast<uint8_t*>(L.send);
  auto* recv = static_cast<uint8_t*>(L.recv);
  cudaCheck(cudaMemcpy(send, gin.data(), gin.size(), cudaMemcpyHostToDevice), "fill send");
  cudaCheck(cudaMemcpy(send + offset, sin.data(), sin.size(), cudaMemcpyHostToDevice), "fill send");
  cudaCheck(cudaDeviceSynchronize(), "sync after fill");
  const auto s = reinterpret_cast<ferry::Stream>(L.stream);
  (void)ferry::groupStart();
  Status a = comm.allGather(send, recv, gathered, t.type, s);
  Status b = comm.allReduce(send + offset, recv + offset, summed, t.type, RedOp::kSum, s);
  Status end = ferry::groupEnd();
  if (!a.isOk() || !b.isOk() || !end.isOk()) {
    std::printf("FAIL %s rank %d: %s\n", what.c_str(), r, (!a.isOk() ? a : !b.isOk() ? b : end).message().c_str());
    ++failures;
    return;
  }
  waitStream(L.stream, what);
  Status h = comm.allReduce(sin.data(), onHost.data(), summed, t.type, RedOp::kSum);
  if (!h.isOk()) {
    std::printf("FAIL %s rank %d (host buffers): %s\n", what.c_str(), r, h.message().c_str());
    ++failures;
    return;
  }
  std::vector<uint8_t> got(expectGather.size()), sum(onHost.size());
  cudaCheck(cudaMemcpy(got.data(), recv, got.size(), cudaMemcpyDeviceToHost), "read recv");
  cudaCheck(cudaMemcpy(sum.data(), recv + offset, sum.size(), cudaMemcpyDeviceToHost), "read recv");
  sameBits(t, got.data(), expectGather.data(), gathered * n, what + " (allGather)", r, "gathered", "expected");
  sameBits(t, sum.data(), onHost.data(), summed, what + " (allReduce)", r, "from device buffers", "from host buffers");
}

// A reproducible all-reduce captured in a graph (staged: host functions in the graph), replayed with
// new inputs. The stream's staging buffers are already large enough (the cases before).
void reproGraph(LocalRank& L, const TypeCase& t) {
  Comm& comm = *L.comm;
  const int r = comm.rank();
  const size_t count = 1000;
  cudaCheck(cudaStreamBeginCapture(L.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  Status st = comm.allReduce(L.send, L.recv, count, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
  cudaGraph_t g;
  cudaCheck(cudaStreamEndCapture(L.stream, &g), "cudaStreamEndCapture");
  if (!st.isOk()) {
    std::printf("FAIL reproducible graph capture type=%s rank %d: %s\n", t.name, r, st.message().c_str());
    ++failures;
    return;
  }
  cudaGraphExec_t e;
  cudaCheck(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
  for (uint64_t k = 0; k < 3; ++k) {
    const std::string what = std::string("reproducible graph replay ") + std::to_string(k) + " type=" + t.name;
    std::vector<uint8_t> input, onHost(count * t.size), got(count * t.size);
    fillAdversarial(t, 100 + k, r, count, input);
    cudaCheck(cudaMemcpy(L.send, input.data(), input.size(), cudaMemcpyHostToDevice), "fill send");
    cudaCheck(cudaDeviceSynchronize(), "sync after fill");
    cudaCheck(cudaGraphLaunch(e, L.stream), "cudaGraphLaunch");
    waitStream(L.stream, what);
    Status h = comm.allReduce(input.data(), onHost.data(), count, t.type, RedOp::kSum);
    if (!h.isOk()) {
      std::printf("FAIL %s rank %d (host buffers): %s\n", what.c_str(), r, h.message().c_str());
      ++failures;
      break;
    }
    cudaCheck(cudaMemcpy(got.data(), L.recv, got.size(), cudaMemcpyDeviceToHost), "read recv");
    sameBits(t, got.data(), onHost.data(), count, what, r, "from the graph", "from host buffers");
  }
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
}

// One process of the job: its rank on device 0, the kernel path (FERRY_GPU_CORESIDENT=1), the mode on.
int child(int rank, int size, const std::string& hex) {
  auto id = ferry::UniqueId::fromHex(hex);
  if (!id.isOk()) return std::printf("FAIL child: %s\n", id.status().message().c_str()), 1;
  auto c = Comm::create(*id, rank, size, 0);
  if (!c.isOk()) return std::printf("FAIL child rank %d: Comm::create: %s\n", rank, c.status().message().c_str()), 1;
  Comm& comm = **c;
  if (comm.deviceMemoryBytes() == 0) {
    return std::printf("FAIL child rank %d: expected the kernel path (is FERRY_GPU_CORESIDENT=1 set?)\n", rank), 1;
  }
  comm.setReproducible(true);
  LocalRank L = makeRank(comm, (size_t{4} << 20) + 4096);
  const TypeCase kTypes[] = {{DataType::kFloat32, 4, "float32"}, {DataType::kBfloat16, 2, "bfloat16"}};
  uint64_t seed = 1;
  for (const TypeCase& t : kTypes) {
    // 1 Mi elements: the pipelined form in several chunk steps; 4099: also its tail in the integer form.
    for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}, size_t{1} << 20}) {
      reproCase(L, ReproColl::kAllReduceSum, t, count, seed++);
    }
    reproCase(L, ReproColl::kAllReduceAvg, t, 4099, seed++);
    reproCase(L, ReproColl::kAllReduceInPlace, t, 4099, seed++);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
      reproCase(L, ReproColl::kReduceScatter, t, count, seed++);
      reproCase(L, ReproColl::kReduce, t, count, seed++);
    }
    reproGroup(L, t);
    reproGraph(L, t);
  }
  std::printf("rank %d of %d: %d failures\n", rank, size, failures);
  freeRank(L);
  return failures == 0 ? 0 : 1;
}

// A float32 or int32 all-reduce of small integers on every rank, in one group, checked exactly.
void kernelSum(std::vector<LocalRank>& ranks, DataType type, const char* what) {
  const size_t count = 1000;
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> v(count, r + 1);
    std::vector<float> f(count, static_cast<float>(r + 1));
    const void* src = type == DataType::kInt32 ? static_cast<const void*>(v.data()) : f.data();
    cudaCheck(cudaMemcpy(ranks[r].send, src, count * 4, cudaMemcpyHostToDevice), "fill send");
  }
  cudaCheck(cudaDeviceSynchronize(), "sync after fill");
  (void)ferry::groupStart();
  for (LocalRank& L : ranks) {
    (void)L.comm->allReduce(L.send, L.recv, count, type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
  }
  Status end = ferry::groupEnd();
  if (!end.isOk()) {
    std::printf("FAIL %s: %s\n", what, end.message().c_str());
    ++failures;
    return;
  }
  const int want = n * (n + 1) / 2;
  for (LocalRank& L : ranks) {
    waitStream(L.stream, what);
    std::vector<uint8_t> got(count * 4);
    cudaCheck(cudaMemcpy(got.data(), L.recv, got.size(), cudaMemcpyDeviceToHost), "read recv");
    int32_t i0 = 0;
    float f0 = 0;
    std::memcpy(&i0, got.data(), 4);
    std::memcpy(&f0, got.data(), 4);
    const double v = type == DataType::kInt32 ? i0 : f0;
    if (v != want) {
      std::printf("FAIL %s rank %d: element 0 is %g, expected %d\n", what, L.comm->rank(), v, want);
      ++failures;
    }
  }
}

// 2 ranks of one process cannot stage (their host functions would share CUDA's one thread).
void refusedInOneProcess() {
  auto made = Comm::initAll({0, 0});
  if (!made.isOk()) {
    std::printf("FAIL: Comm::initAll({0, 0}): %s\n", made.status().message().c_str());
    ++failures;
    return;
  }
  std::vector<std::unique_ptr<Comm>>& comms = *made;
  if (comms[0]->deviceMemoryBytes() == 0) {
    std::printf("FAIL: initAll({0, 0}) did not take the kernel path\n");
    ++failures;
    return;
  }
  std::vector<LocalRank> ranks;
  for (auto& c : comms) {
    ranks.push_back(makeRank(*c, 1 << 16));
    c->setReproducible(true);
  }
  (void)ferry::groupStart();
  for (LocalRank& L : ranks) {
    (void)L.comm->allReduce(L.send, L.recv, 1000, DataType::kFloat32, RedOp::kSum,
                            reinterpret_cast<ferry::Stream>(L.stream));
  }
  Status end = ferry::groupEnd();
  const std::string m = end.message();
  const bool named = m.find("allReduce of 1000 float32 on rank 0") != std::string::npos &&
                     m.find("2 ranks of this communicator in one process") != std::string::npos &&
                     m.find("one rank per process") != std::string::npos;
  if (end.isOk() || end.code() != ferry::ErrorCode::kInvalidUsage || !named) {
    std::printf("FAIL 2 ranks in one process: expected a refusal naming rank 0, the call and the remedy, got: %s\n",
                end.isOk() ? "success" : m.c_str());
    ++failures;
  } else {
    std::printf("ok 2 ranks in one process: %s\n", m.c_str());
  }
  cudaCheck(cudaDeviceSynchronize(), "nothing was enqueued");
  kernelSum(ranks, DataType::kInt32, "int32 all-reduce in the mode (the kernels)");
  for (auto& c : comms) c->setReproducible(false);
  kernelSum(ranks, DataType::kFloat32, "float32 all-reduce with the mode off (the kernels)");
  for (LocalRank& L : ranks) freeRank(L);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "child") {
    if (argc < 5) return 2;
    return child(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return gputest::kSkip;
  }
  refusedInOneProcess();
  if (failures != 0) return 1;
  for (int n : {2, 3}) {
    if (gputest::runRanks("/proc/self/exe", "child", n) != 0) return 1;
    std::printf("%d processes: ok\n", n);
  }
  return 0;
}
