// ferry-perf's GPU mode. See gpu_sweep.hpp.
#include "bench/gpu/gpu_sweep.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>

#include "ferry/ferry.hpp"
#include "bench/perf/check_values.hpp"
#include "bench/perf/dtypes.hpp"
#include "bench/perf/host_info.hpp"
#include "bench/perf/progress.hpp"
#include "bench/perf/report.hpp"

#ifndef FERRY_PERF_VERSION
#define FERRY_PERF_VERSION "0.0.0"
#endif

namespace ferry::perf {
namespace {

Status cudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status(ErrorCode::kUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(e));
}
#define FERRY_PERF_CUDA(call) FERRY_TRY(cudaStatus((call), #call))

const char* opText(RedOp op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return kNames[static_cast<int>(op)];
}

// One rank: its communicator, stream, device buffers and (for -c) host staging buffers.
struct GpuRank {
  std::unique_ptr<Comm> comm;
  cudaStream_t stream = nullptr;
  cudaEvent_t joined = nullptr;  // recorded on this stream, waited for by rank 0's
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  std::unique_ptr<uint8_t[]> hostSend;
  std::unique_ptr<uint8_t[]> hostRecv;
};

// What one table cell runs.
struct Spec {
  Coll coll;
  DataType type;
  RedOp op;
  int root;
  CollCounts counts;
  bool inPlace;
};

class GpuRunner {
 public:
  GpuRunner(const Options& o, Report& report, Progress& progress) : o_(o), report_(report), progress_(progress) {}
  ~GpuRunner();

  Status init(std::vector<std::unique_ptr<Comm>> comms);
  Status runAll();

 private:
  struct Pointers {
    const void* send;
    void* recv;
    uint8_t* base;  // start of the receive region
  };
  Pointers pointers(const GpuRank& g, int rank, const Spec& s, size_t iter) const;
  Status issueOne(int rank, const Spec& s, size_t iter);
  Status issue(const Spec& s, size_t iter);                   // every rank, inside one group
  Status perRank(const std::function<Status(int)>& fn);       // fn(rank) on one thread per rank
  Status issueRange(const Spec& s, size_t first, int count);  // as --rank-threads says
  Status syncAll();
  Status forkFrom(cudaEvent_t start);  // other streams wait for `start` on rank 0's
  Status joinInto();                   // rank 0's stream waits for the others
  Status measure(const Spec& s, Measurement& m);
  Status measureGraph(const Spec& s, int ops, Measurement& m, double& seconds);
  Status check(const Spec& s, Measurement& m);

  const Options& o_;
  Report& report_;
  Progress& progress_;
  std::vector<GpuRank> ranks_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  uint64_t checkSeed_ = 0;
};

GpuRunner::~GpuRunner() {
  cudaSetDevice(o_.device);
  for (GpuRank& g : ranks_) {
    if (g.stream) cudaStreamSynchronize(g.stream);
  }
  // Communicators go before the buffers they may have registered, each on its own thread, so that
  // a destructor that waits for its peers cannot wait for one this thread has yet to destroy.
  std::vector<std::thread> closers;
  for (GpuRank& g : ranks_) closers.emplace_back([&g] { g.comm.reset(); });
  for (std::thread& t : closers) t.join();
  for (GpuRank& g : ranks_) {
    cudaFree(g.send);
    cudaFree(g.recv);
    if (g.joined) cudaEventDestroy(g.joined);
    if (g.stream) cudaStreamDestroy(g.stream);
  }
  for (cudaEvent_t e : {start_, stop_, fork_}) {
    if (e) cudaEventDestroy(e);
  }
}

Status GpuRunner::init(std::vector<std::unique_ptr<Comm>> comms) {
  FERRY_PERF_CUDA(cudaSetDevice(o_.device));
  const size_t bytes = o_.maxBytes < 64 ? 64 : o_.maxBytes;
  ranks_.resize(comms.size());
  for (size_t r = 0; r < comms.size(); ++r) {
    GpuRank& g = ranks_[r];
    g.comm = std::move(comms[r]);
    FERRY_PERF_CUDA(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    FERRY_PERF_CUDA(cudaEventCreateWithFlags(&g.joined, cudaEventDisableTiming));
    FERRY_PERF_CUDA(cudaMalloc(reinterpret_cast<void**>(&g.send), bytes));
    FERRY_PERF_CUDA(cudaMalloc(reinterpret_cast<void**>(&g.recv), bytes));
    FERRY_PERF_CUDA(cudaMemset(g.send, 0, bytes));
    FERRY_PERF_CUDA(cudaMemset(g.recv, 0, bytes));
    if (o_.check > 0) {
      g.hostSend.reset(new uint8_t[bytes]);
      g.hostRecv.reset(new uint8_t[bytes]);
    }
  }
  FERRY_PERF_CUDA(cudaEventCreate(&start_));
  FERRY_PERF_CUDA(cudaEventCreate(&stop_));
  FERRY_PERF_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  return syncAll();
}

GpuRunner::Pointers GpuRunner::pointers(const GpuRank& g, int rank, const Spec& s, size_t iter) const {
  // The CPU mode's shift (sweep.cpp): consecutive operations walk through the buffers.
  const size_t elt = typeInfo(s.type).size;
  const size_t total = s.counts.bytes(elt);
  const size_t steps = total ? o_.maxBytes / total : 1;
  const size_t shift = steps ? total * (iter % steps) : 0;
  uint8_t* recv = g.recv + shift;
  if (!s.inPlace) return {g.send + shift, recv, recv};
  return {recv + s.counts.sendInplaceOffset * rank * elt, recv + s.counts.recvInplaceOffset * rank * elt, recv};
}

Status GpuRunner::issueOne(int rank, const Spec& s, size_t iter) {
  GpuRank& g = ranks_[static_cast<size_t>(rank)];
  Comm& c = *g.comm;
  const Pointers p = pointers(g, rank, s, iter);
  const size_t n = s.counts.paramCount;
  const int size = static_cast<int>(ranks_.size());
  if (s.coll == Coll::kSend) {
    FERRY_TRY(c.send(p.send, n, s.type, (rank + 1) % size, g.stream));
    return c.recv(p.recv, n, s.type, (rank + size - 1) % size, g.stream);
  }
  return c.collective(Call{s.coll, p.send, p.recv, n, s.type, s.op, s.root, {}, nullptr}.on(g.stream));
}

Status GpuRunner::issue(const Spec& s, size_t iter) {
  FERRY_TRY(groupStart());
  Status first = Status::ok();
  for (int r = 0; r < static_cast<int>(ranks_.size()) && first.isOk(); ++r) first = issueOne(r, s, iter);
  const Status end = groupEnd();  // always closes the group, even after a failed call
  FERRY_TRY(first);
  return end;
}

Status GpuRunner::perRank(const std::function<Status(int)>& fn) {
  std::vector<Status> results(ranks_.size(), Status::ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    threads.emplace_back([&, r] {
      const cudaError_t e = cudaSetDevice(o_.device);  // the current device is per thread
      results[static_cast<size_t>(r)] = e != cudaSuccess ? cudaStatus(e, "cudaSetDevice") : fn(r);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& st : results) FERRY_TRY(st);
  return Status::ok();
}

Status GpuRunner::issueRange(const Spec& s, size_t first, int count) {
  if (!o_.rankThreads) {
    for (int i = 0; i < count; ++i) FERRY_TRY(issue(s, first + static_cast<size_t>(i)));
    return Status::ok();
  }
  // One thread per rank, each issuing its own operations in order; sendrecv's send and recv form a
  // group on their thread, so neither waits for the other.
  return perRank([&](int r) {
    for (int i = 0; i < count; ++i) {
      const bool pair = s.coll == Coll::kSend;
      if (pair) FERRY_TRY(groupStart());
      const Status st = issueOne(r, s, first + static_cast<size_t>(i));
      if (pair) FERRY_TRY(groupEnd());
      FERRY_TRY(st);
    }
    return Status::ok();
  });
}

Status GpuRunner::syncAll() {
  for (GpuRank& g : ranks_) FERRY_PERF_CUDA(cudaStreamSynchronize(g.stream));
  return Status::ok();
}

Status GpuRunner::forkFrom(cudaEvent_t start) {
  for (size_t r = 1; r < ranks_.size(); ++r) FERRY_PERF_CUDA(cudaStreamWaitEvent(ranks_[r].stream, start, 0));
  return Status::ok();
}

Status GpuRunner::joinInto() {
  for (size_t r = 1; r < ranks_.size(); ++r) {
    FERRY_PERF_CUDA(cudaEventRecord(ranks_[r].joined, ranks_[r].stream));
    FERRY_PERF_CUDA(cudaStreamWaitEvent(ranks_[0].stream, ranks_[r].joined, 0));
  }
  return Status::ok();
}

Status GpuRunner::measureGraph(const Spec& s, int ops, Measurement& m, double& seconds) {
  cudaStream_t s0 = ranks_[0].stream;
  FERRY_PERF_CUDA(cudaStreamBeginCapture(s0, cudaStreamCaptureModeRelaxed));
  Status captured = cudaStatus(cudaEventRecord(fork_, s0), "cudaEventRecord");
  if (captured.isOk()) captured = forkFrom(fork_);
  for (int i = 0; i < ops && captured.isOk(); ++i) captured = issue(s, static_cast<size_t>(i));
  if (captured.isOk()) captured = joinInto();
  cudaGraph_t graph = nullptr;
  const Status ended = cudaStatus(cudaStreamEndCapture(s0, &graph), "cudaStreamEndCapture");
  std::unique_ptr<CUgraph_st, cudaError_t (*)(cudaGraph_t)> graphOwner(graph, cudaGraphDestroy);
  FERRY_TRY(captured);
  FERRY_TRY(ended);
  cudaGraphExec_t exec = nullptr;
  FERRY_PERF_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::unique_ptr<CUgraphExec_st, cudaError_t (*)(cudaGraphExec_t)> execOwner(exec, cudaGraphExecDestroy);
  if (m.warmupIters > 0) FERRY_PERF_CUDA(cudaGraphLaunch(exec, s0));
  FERRY_PERF_CUDA(cudaStreamSynchronize(s0));
  FERRY_PERF_CUDA(cudaEventRecord(start_, s0));
  FERRY_PERF_CUDA(cudaGraphLaunch(exec, s0));
  FERRY_PERF_CUDA(cudaEventRecord(stop_, s0));
  FERRY_PERF_CUDA(cudaEventSynchronize(stop_));
  float ms = 0;
  FERRY_PERF_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  seconds = ms * 1e-3 / ops;
  return Status::ok();
}

Status GpuRunner::measure(const Spec& s, Measurement& m) {
  const size_t elt = typeInfo(s.type).size;
  const int n = static_cast<int>(ranks_.size());
  m.iters = o_.itersFor(s.counts.bytes(elt));
  m.warmupIters = o_.warmupFor(s.counts.bytes(elt));
  const int ops = m.iters * o_.aggIters;
  double seconds = 0;
  if (o_.graph) {
    FERRY_TRY(measureGraph(s, ops, m, seconds));
  } else {
    FERRY_TRY(issueRange(s, 0, m.warmupIters * o_.aggIters));
    FERRY_TRY(syncAll());
    FERRY_PERF_CUDA(cudaEventRecord(start_, ranks_[0].stream));
    FERRY_TRY(forkFrom(start_));
    FERRY_TRY(issueRange(s, 0, ops));
    FERRY_TRY(joinInto());
    FERRY_PERF_CUDA(cudaEventRecord(stop_, ranks_[0].stream));
    FERRY_PERF_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    FERRY_PERF_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    seconds = ms * 1e-3 / ops;
  }
  FERRY_TRY(syncAll());
  m.seconds = seconds;
  m.algBw = algBandwidth(s.coll, s.counts.paramCount, elt, seconds, n);
  m.busBw = m.algBw * busFactor(s.coll, n);
  return check(s, m);
}

Status GpuRunner::check(const Spec& s, Measurement& m) {
  m.checked = o_.check > 0 && (!s.inPlace || collInfo(s.coll).checkInPlace);
  if (!m.checked) return Status::ok();
  const int n = static_cast<int>(ranks_.size());
  const size_t elt = typeInfo(s.type).size;
  const size_t sendBytes = s.counts.sendCount * elt, recvBytes = s.counts.recvCount * elt;
  m.wrongPerRank.assign(static_cast<size_t>(n), 0);
  for (int i = 0; i < o_.check; ++i) {
    const uint64_t seed = ++checkSeed_;
    // Host staging mirrors the device layout at shift 0: hostRecv is the receive region.
    auto offsetIn = [](const void* p, const uint8_t* base) {
      return static_cast<size_t>(static_cast<const uint8_t*>(p) - base);
    };
    // The receive region a rank's check moves between host and device: the receive buffer, and in
    // place also the input inside it (reduce_scatter's whole input starts at the region, and is
    // longer than its output).
    auto regionBytes = [&](int r) {
      const Pointers p = pointers(ranks_[static_cast<size_t>(r)], r, s, 0);
      if (!s.inPlace) return recvBytes;
      return std::max(offsetIn(p.send, p.base) + sendBytes, offsetIn(p.recv, p.base) + recvBytes);
    };
    std::vector<std::thread> workers;
    for (int r = 0; r < n; ++r) {
      workers.emplace_back([&, r] {
        GpuRank& g = ranks_[static_cast<size_t>(r)];
        const Pointers p = pointers(g, r, s, 0);
        const CheckPlan plan(s.coll, s.type, s.op, n, r, s.root, seed);
        CheckPlan::fillSentinel(g.hostRecv.get(), regionBytes(r));
        uint8_t* input = s.inPlace ? g.hostRecv.get() + offsetIn(p.send, p.base) : g.hostSend.get();
        plan.fillInput(input, s.counts.sendCount);
      });
    }
    for (std::thread& w : workers) w.join();
    for (int r = 0; r < n; ++r) {
      GpuRank& g = ranks_[static_cast<size_t>(r)];
      const Pointers p = pointers(g, r, s, 0);
      FERRY_PERF_CUDA(cudaMemcpy(p.base, g.hostRecv.get(), regionBytes(r), cudaMemcpyHostToDevice));
      if (!s.inPlace)
        FERRY_PERF_CUDA(cudaMemcpy(const_cast<void*>(p.send), g.hostSend.get(), sendBytes, cudaMemcpyHostToDevice));
    }
    FERRY_TRY(issueRange(s, 0, 1));
    FERRY_TRY(syncAll());
    for (int r = 0; r < n; ++r) {
      GpuRank& g = ranks_[static_cast<size_t>(r)];
      FERRY_PERF_CUDA(cudaMemcpy(g.hostRecv.get(), pointers(g, r, s, 0).base, regionBytes(r), cudaMemcpyDeviceToHost));
    }
    workers.clear();
    for (int r = 0; r < n; ++r) {
      workers.emplace_back([&, r] {
        GpuRank& g = ranks_[static_cast<size_t>(r)];
        const Pointers p = pointers(g, r, s, 0);
        const CheckPlan plan(s.coll, s.type, s.op, n, r, s.root, seed);
        m.wrongPerRank[static_cast<size_t>(r)] =
            plan.countWrong(g.hostRecv.get() + offsetIn(p.recv, p.base), s.counts, s.inPlace);
      });
    }
    for (std::thread& w : workers) w.join();
    m.wrong = 0;
    for (uint64_t w : m.wrongPerRank) m.wrong += w;
    if (m.wrong > 0) break;  // the first wrong run is the one reported
  }
  return Status::ok();
}

Status GpuRunner::runAll() {
  const std::vector<size_t> sizes = o_.sizes();
  const int n = static_cast<int>(ranks_.size());
  for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
    for (Coll coll : o_.colls) {
      const CollInfo& info = collInfo(coll);
      progress_.clear();
      report_.beginCollective(coll);
      std::vector<DataType> types;
      if (o_.type) types.push_back(*o_.type);
      else types.assign(allTypes().begin(), allTypes().end());
      std::vector<RedOp> ops;
      if (!info.listsOp) ops.push_back(RedOp::kSum);
      else if (o_.op) ops.push_back(*o_.op);
      else ops = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
      std::vector<int> roots;
      if (!info.rooted) roots.push_back(-1);
      else if (o_.root >= 0) roots.push_back(o_.root);
      else
        for (int r = 0; r < n; ++r) roots.push_back(r);
      for (DataType type : types) {
        for (RedOp op : ops) {
          for (int root : roots) {
            for (size_t i = 0; i < sizes.size(); ++i) {
              const size_t elt = typeInfo(type).size;
              const CollCounts c = collCounts(coll, sizes[i] / elt, elt, n);
              Row row{coll, c.bytes(elt), c.paramCount, type, op, root, {}, {}};
              for (bool inPlace : {false, true}) {
                progress_.set(std::string(info.name) + " " + typeInfo(type).ncclName +
                              (info.reduces ? std::string(" ") + opText(op) : "") + " " + formatBytes(row.bytes) +
                              (inPlace ? " in-place" : " out-of-place") + " (" + std::to_string(i + 1) + "/" +
                              std::to_string(sizes.size()) + ")");
                FERRY_TRY(measure({coll, type, op, root, c, inPlace}, inPlace ? row.inPlace : row.outOfPlace));
              }
              progress_.clear();
              report_.row(row);
            }
          }
        }
      }
      progress_.clear();
      report_.endCollective();
    }
  }
  return Status::ok();
}

}  // namespace

int runGpuSweep(const Options& o, const std::vector<std::string>& args, const std::string& tool) {
  // Rows reach a redirected stdout as they are measured: a run stopped by a timeout keeps them.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "%s: no CUDA device: %s\n", tool.c_str(),
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
    return 1;
  }
  if (o.device >= devices) {
    std::fprintf(stderr, "%s: no CUDA device %d: this machine has %d\n", tool.c_str(), o.device, devices);
    return 1;
  }
  if (o.root >= o.gpuRanks) {
    std::fprintf(stderr, "%s: -r %d is not a rank: --gpu-ranks is %d\n", tool.c_str(), o.root, o.gpuRanks);
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, o.device);
  auto comms = Comm::initAll(std::vector<int>(static_cast<size_t>(o.gpuRanks), o.device));
  if (!comms.isOk()) {
    std::fprintf(stderr, "%s: Comm::initAll: %s\n", tool.c_str(), comms.status().toString().c_str());
    return 1;
  }
  Report report(o, tool, std::string("ferry ") + FERRY_PERF_VERSION + " (cuda)", o.gpuRanks, true, args);
  Progress progress(tool, true);
  std::vector<RankInfo> infos(static_cast<size_t>(o.gpuRanks));
  for (int r = 0; r < o.gpuRanks; ++r) {
    RankInfo& info = infos[static_cast<size_t>(r)];
    info.rank = r;
    info.pid = static_cast<int>(::getpid());
    std::snprintf(info.host, sizeof(info.host), "%s", hostName().c_str());
    std::snprintf(info.device, sizeof(info.device), "cuda:%d %.80s", o.device, prop.name);
  }
  report.header(infos);
  // The results are out (table flushed, JSON written) before the communicators are destroyed, so
  // that a teardown that hangs loses nothing.
  GpuRunner runner(o, report, progress);
  Status s = runner.init(std::move(*comms));
  if (s.isOk()) s = runner.runAll();
  progress.clear();
  if (!s.isOk()) {
    std::fprintf(stderr, "%s: %s\n", tool.c_str(), s.toString().c_str());
    report.error(s.toString());
  }
  const bool written = report.finish();
  std::fflush(stdout);
  return (!s.isOk() || report.outOfBounds() > 0 || !written) ? 1 : 0;
}

}  // namespace ferry::perf
