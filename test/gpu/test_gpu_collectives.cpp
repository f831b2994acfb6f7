// GPU tests of the runtime's CUDA half (suite 'gpu'; exit 77 without a CUDA device).
//
//   collectives   initAll over {0}, {0,0}, {0,0,0,0}: every collective on device buffers, float32,
//                 bfloat16, int32 and fp8 e4m3 (when ferry has it), 1 element to a few MiB, each
//                 rank's calls issued in one group from this thread. Run under FERRY_GPU_ALGO /
//                 FERRY_GPU_PROTO to force ring, direct, LL or simple (see meson.build).
//   graph         capture an all-reduce of 2 ranks into CUDA graphs, replay 10 times with new input.
//   group         many collectives of 2 ranks in one group (more than one launch's worth of works).
//   staged        2 processes, each on device 0: the staged path (children: staged-child).
//   ipc           2 processes on devices 0 and 1: the kernel path through CUDA IPC (skipped with
//                 fewer than 2 GPUs; children: ipc-child).
// Every failure prints the case (collective, algorithm, protocol, type, count, ranks), the rank and
// the first mismatching index with the value found and the one expected. A stream that does not
// finish within 20 s is reported as a hang of that case and the test exits.
#include <cuda_runtime.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ferry/comm.hpp"
#include "gpu_values.hpp"

extern char** environ;

using ferry::Comm;
using ferry::DataType;
using ferry::RedOp;
using ferry::Status;
using gputest::TypeCase;

namespace {

constexpr int kSkip = 77;

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

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("FAIL: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    std::fflush(stdout);
    std::_Exit(1);
  }
}

// Waits for `stream` with a deadline, so a hung kernel names its case instead of timing out blind.
void waitStream(cudaStream_t s, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cudaCheck(e, ("stream of " + what).c_str());
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("FAIL (hang): %s did not complete within 20 s\n", what.c_str());
      std::fflush(stdout);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

size_t sendElems(Coll c, size_t count, int n) {
  return c == Coll::kReduceScatter || c == Coll::kAllToAll ? count * n : count;
}
size_t recvElems(Coll c, size_t count, int n) { return c == Coll::kAllGather || c == Coll::kAllToAll ? count * n : count; }

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
    for (size_t i = 0; i < sendElems(c, count, n); ++i) gputest::encode(t, gputest::value(r, i) + shift, &host[i * t.size]);
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
    if (!st.isOk()) std::printf("FAIL %s rank %d: the call failed: %s\n", what.c_str(), L.comm->rank(), st.message().c_str());
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

// Capture one all-reduce per rank into a graph, replay it with fresh inputs.
int graph() {
  auto comms = makeComms({0, 0});
  auto ranks = localRanks(comms, 1 << 22);
  const TypeCase t{DataType::kFloat32, 4, "float32"};
  for (size_t count : {size_t{1000}, size_t{1} << 20}) {
    std::vector<cudaGraphExec_t> execs;
    fill(ranks, Coll::kAllReduceSum, t, count, 2);
    for (LocalRank& L : ranks) {
      cudaCheck(cudaSetDevice(L.device), "cudaSetDevice");
      // Global mode, as PyTorch uses: ferry must make no call that capture forbids.
      cudaCheck(cudaStreamBeginCapture(L.stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    }
    (void)ferry::groupStart();
    for (LocalRank& L : ranks) {
      Status st = L.comm->allReduce(L.send, L.recv, count, t.type, RedOp::kSum, reinterpret_cast<ferry::Stream>(L.stream));
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
      fill(ranks, Coll::kAllReduceSum, t, count, 2, k);
      for (size_t i = 0; i < ranks.size(); ++i) {
        cudaCheck(cudaSetDevice(ranks[i].device), "cudaSetDevice");
        cudaCheck(cudaGraphLaunch(execs[i], ranks[i].stream), "cudaGraphLaunch");
      }
      std::string what = "graph replay " + std::to_string(k) + " of " + caseName(Coll::kAllReduceSum, t, count, 2);
      for (LocalRank& L : ranks) waitStream(L.stream, what);
      check(ranks, Coll::kAllReduceSum, t, count, 2, what, k);
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
int child(int rank, int size, const std::string& hex, bool ipc) {
  auto id = ferry::UniqueId::fromHex(hex);
  if (!id.isOk()) return std::printf("FAIL child: %s\n", id.status().message().c_str()), 1;
  auto c = Comm::create(*id, rank, size, ipc ? rank : 0);
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

// Start 2 copies of this program as the ranks of one job, rendezvous hosted here.
int parent(const char* self, bool ipc) {
  auto id = ferry::UniqueId::create();
  if (!id.isOk()) return std::printf("FAIL: %s\n", id.status().message().c_str()), 1;
  std::string hex = id->toHex();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    std::string rank = std::to_string(r);
    const char* argv[] = {self, ipc ? "ipc-child" : "staged-child", rank.c_str(), "2", hex.c_str(), nullptr};
    pid_t pid;
    if (posix_spawn(&pid, self, nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      return std::printf("FAIL: cannot start rank %d\n", r), 1;
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (size_t r = 0; r < pids.size(); ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::printf("FAIL: process rank %zu ended with status %d\n", r, st);
      rc = 1;
    }
  }
  return rc;
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
  if (mode == "staged") return parent("/proc/self/exe", false);
  if (mode == "ipc") {
    if (devices < 2) {
      std::printf("SKIP: the CUDA IPC test needs 2 GPUs (found %d)\n", devices);
      return kSkip;
    }
    return parent("/proc/self/exe", true);
  }
  std::printf("unknown mode %s (collectives, graph, group, staged, ipc)\n", mode.c_str());
  return 2;
}
