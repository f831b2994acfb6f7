// ferry-perf: nccl-tests for ferry. Measures time, algorithm and bus bandwidth of every collective
// over a sweep of sizes, checks every result exactly, and prints nccl-tests' table (plus JSON with
// -J). This file is only the ferry side: the command line, the sweep, the check and the output
// live in bench/perf/ and are shared with mpi-perf (bench/mpi_perf.cpp).
//
//   build/tools/ferryrun -n 4 build/bench/ferry-perf all_reduce -b 8 -e 64M -f 4
//   build/bench/ferry-perf all_reduce --gpu-ranks 4 -b 8 -e 1G -f 2 -d bfloat16   (CUDA builds)
//   build/tools/ferryrun -n 4 build/bench/ferry-perf all_reduce -b 16M -e 256M --reproducible
//
// --reproducible (ferry-perf's own flag, taken out before the shared ones are parsed) runs the same
// sweep with the communicator in the reproducible mode (Comm::setReproducible).
// docs/BENCHMARKS.md describes the flags, the table, the JSON schema and the charts.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "bench/perf/backend.hpp"
#include "bench/perf/host_info.hpp"
#include "bench/perf/options.hpp"
#include "bench/perf/sweep.hpp"
#if FERRY_PERF_GPU
#include "bench/gpu/gpu_sweep.hpp"
#endif

namespace {

using ferry::perf::Call;
using ferry::perf::Coll;

#ifndef FERRY_PERF_VERSION
#define FERRY_PERF_VERSION "0.0.0"
#endif

// ferry's statuses carry the code ("timeout: ..."); keep it in the message the sweep prints.
ferry::Status withCode(const ferry::Status& s) { return s.isOk() ? s : ferry::Status(s.code(), s.toString()); }

class FerryBackend final : public ferry::perf::Backend {
 public:
  explicit FerryBackend(std::unique_ptr<ferry::Comm> comm) : comm_(std::move(comm)) {}

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  std::string library() const override { return std::string("ferry ") + FERRY_PERF_VERSION; }
  bool supports(Coll, ferry::DataType, ferry::RedOp) const override { return true; }

  ferry::Status run(const Call& c) override {
    ferry::Comm& comm = *comm_;
    if (c.coll == Coll::kSend) {
      // Every rank sends to the next and receives from the previous, both in one batch.
      const int n = comm.size(), r = comm.rank();
      return withCode(comm.sendRecv({ferry::P2pOp::send(c.send, c.count, c.type, (r + 1) % n),
                                     ferry::P2pOp::recv(c.recv, c.count, c.type, (r + n - 1) % n)}));
    }
    return withCode(comm.collective(ferry::Call{c.coll, c.send, c.recv, c.count, c.type, c.op, c.root, {}, nullptr}));
  }

  ferry::Status barrier() override { return withCode(comm_->barrier()); }

  ferry::Status allReduceDoubles(double* values, size_t count, ferry::RedOp op) override {
    return withCode(comm_->allReduce(values, values, count, ferry::DataType::kFloat64, op));
  }

  ferry::Status allGatherBytes(const void* in, void* out, size_t bytes) override {
    return withCode(comm_->allGather(in, out, bytes, ferry::DataType::kUint8));
  }

  void abort(const std::string& reason) override { comm_->abort(reason); }
  uint64_t measuredCalls() const override { return comm_->measuredCalls(); }
  void* allocRegistered(size_t bytes) override {
    auto p = ferry::hostAlloc(bytes);
    if (!p.isOk()) std::fprintf(stderr, "ferry-perf: %s\n", p.status().message().c_str());
    return p.isOk() ? *p : nullptr;
  }
  void freeRegistered(void* p) override { (void)ferry::hostFree(p); }
  void* registerBuffer(void* p, size_t bytes) override {
    auto h = comm_->registerBuffer(p, bytes);
    if (!h.isOk()) std::fprintf(stderr, "ferry-perf: %s\n", h.status().message().c_str());
    return h.isOk() ? *h : nullptr;
  }
  void deregisterBuffer(void* handle) override { (void)comm_->deregisterBuffer(handle); }

 private:
  std::unique_ptr<ferry::Comm> comm_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  const auto flag = std::find(args.begin() + 1, args.end(), "--reproducible");
  const bool reproducible = flag != args.end();
  if (reproducible) args.erase(flag);
  auto options = ferry::perf::parseOptions(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!options.isOk()) {
    std::fprintf(stderr, "ferry-perf: %s\n%s", options.status().message().c_str(),
                 ferry::perf::usage("ferry-perf").c_str());
    return 2;
  }
  if (options->help) {
    std::printf("%s", ferry::perf::usage("ferry-perf").c_str());
    std::printf("  --reproducible  run the sweep in the reproducible mode (docs/RELIABILITY.md)\n");
    return 0;
  }
  if (options->gpuRanks > 0) {
    if (reproducible) {
      // --gpu-ranks drives every rank from this process, where the mode cannot stage device buffers.
      std::fprintf(stderr,
                   "ferry-perf: --reproducible runs on host buffers only (not with --gpu-ranks, whose ranks share "
                   "one process: docs/RELIABILITY.md, \"Device buffers\")\n");
      return 2;
    }
#if FERRY_PERF_GPU
    return ferry::perf::runGpuSweep(*options, args, "ferry-perf");
#else
    std::fprintf(stderr, "ferry-perf: --gpu-ranks: this build has no CUDA (meson setup -Dcuda=enabled)\n");
    return 1;
#endif
  }
  const int64_t residentBeforeInit = ferry::perf::residentBytes();
  auto comm = ferry::Comm::fromEnv();
  if (!comm.isOk()) {
    std::fprintf(stderr, "ferry-perf: %s\n", comm.status().toString().c_str());
    return 1;
  }
  (*comm)->setReproducible(reproducible || (*comm)->reproducible());
  if ((*comm)->reproducible() && (*comm)->rank() == 0) std::printf("# ferry reproducible mode: on\n");
  FerryBackend backend(std::move(*comm));
  return ferry::perf::runSweep(*options, backend, args, residentBeforeInit, "ferry-perf");
}
