// ferry-train: trains the substrate's MLP with one parallel strategy on ranks started by ferryrun,
// printing per step the loss, step time, communication time and bytes moved, and at the end this
// rank's and the whole job's bytes per step against the strategy's formula (strategies/cost.hpp).
//
//   build/tools/ferryrun -n 4 build/strategies/ferry-train --strategy ddp --steps 10 --bucket-bytes 4096
//
// --check also trains the same global batches in this process alone and fails unless the final
// parameters agree (relative difference under 1e-5) and the bytes equal the formula.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ferry/comm.hpp"
#include "strategies/cost.hpp"
#include "strategies/ddp.hpp"
#include "strategies/param_server.hpp"

using namespace ferry;
using namespace ferry::train;

namespace {

struct Options {
  std::string strategy = "ddp";
  TrainConfig config;
  bool check = false;
};

void usage() {
  std::fprintf(stderr,
               "usage: ferry-train --strategy ps|ddp [--steps N] [--batch G] [--in N] [--hidden N] [--out N]\n"
               "                   [--blocks N]\n"
               "                   [--loss ce|mse] [--optimizer sgd|momentum|adam] [--lr X] [--seed N]\n"
               "                   [--bucket-bytes N] [--check]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check") {
      o.check = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    auto num = [&]() { return std::strtoull(v, &end, 10); };
    if (a == "--strategy") o.strategy = v;
    else if (a == "--steps") o.config.steps = static_cast<int>(num());
    else if (a == "--batch") o.config.globalBatch = num();
    else if (a == "--in") o.config.shape.in = num();
    else if (a == "--hidden") o.config.shape.hidden = num();
    else if (a == "--out") o.config.shape.out = num();
    else if (a == "--blocks") o.config.shape.blocks = num();
    else if (a == "--seed") o.config.seed = num();
    else if (a == "--bucket-bytes") o.config.bucketBytes = num();
    else if (a == "--optimizer") o.config.optimizer = v;
    else if (a == "--lr") o.config.lr = std::strtof(v, &end);
    else if (a == "--loss" && (std::strcmp(v, "ce") == 0 || std::strcmp(v, "mse") == 0)) {
      o.config.loss = std::strcmp(v, "ce") == 0 ? LossKind::kCrossEntropy : LossKind::kMeanSquaredError;
      continue;
    } else return false;
    if (end && *end != '\0') return false;
  }
  if (o.strategy != "ps" && o.strategy != "ddp") return false;
  if (o.config.shape.in == 0 || o.config.shape.hidden == 0 || o.config.shape.out == 0 ||
      o.config.shape.blocks == 0)
    return false;
  return makeOptimizer(o.config.optimizer, o.config.lr) != nullptr;
}

void printStep(const StepStats& s) {
  if (std::isnan(s.loss))
    std::printf("step %3d  loss        -", s.step);  // the parameter server trains no shard
  else
    std::printf("step %3d  loss %8.5f", s.step, static_cast<double>(s.loss));
  std::printf("  step %8.3f ms  comm %8.3f ms  exposed %8.3f ms", s.stepSeconds * 1e3, s.commSeconds * 1e3,
              s.exposedSeconds * 1e3);
  if (s.buckets > 0) std::printf("  overlap %5.1f%%  buckets %d", s.overlapFraction * 100, s.buckets);
  std::printf("  sent %" PRIu64 " B  received %" PRIu64 " B\n", s.bytesSent, s.bytesReceived);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
  auto created = Comm::fromEnv();
  if (!created.isOk()) {
    std::fprintf(stderr, "ferry-train: %s\n", created.status().toString().c_str());
    return 1;
  }
  Comm& comm = **created;
  const int n = comm.size(), rank = comm.rank();
  Mlp model(o.config.shape, o.config.seed);
  const size_t P = model.paramCount();
  if (rank == 0)
    std::printf("ferry-train: %s on %d ranks, MLP in %zu, %zu x hidden %zu, out %zu (%zu parameters), "
                "global batch %zu, %d steps, %s\n",
                o.strategy.c_str(), n, o.config.shape.in, o.config.shape.blocks, o.config.shape.hidden,
                o.config.shape.out, P,
                o.config.globalBatch, o.config.steps, o.config.optimizer.c_str());
  auto trained = o.strategy == "ps" ? trainParameterServer(comm, o.config, model, printStep)
                                    : trainDdp(comm, o.config, model, printStep);
  if (!trained.isOk()) {
    std::fprintf(stderr, "ferry-train: %s\n", trained.status().toString().c_str());
    return 1;
  }
  const std::vector<StepStats>& steps = *trained;
  double stepTime = 0, commTime = 0, exposed = 0, overlap = 0;
  for (const StepStats& s : steps) {
    stepTime += s.stepSeconds;
    commTime += s.commSeconds;
    exposed += s.exposedSeconds;
    overlap += s.overlapFraction;
  }
  const double k = steps.empty() ? 1 : static_cast<double>(steps.size());
  const uint64_t sent = steps.empty() ? 0 : steps.back().bytesSent;
  uint64_t total = sent;
  if (Status s = comm.allReduce(&total, &total, 1, DataType::kUint64, RedOp::kSum); !s.isOk()) {
    std::fprintf(stderr, "ferry-train: %s\n", s.toString().c_str());
    return 1;
  }
  uint64_t formulaRank = 0, formulaTotal = 0;
  if (o.strategy == "ps") {
    formulaRank = rank == 0 ? psServerBytesSent(P, n - 1) : psWorkerBytesSent(P);
    formulaTotal = psBytesTotal(P, n - 1);
  } else {
    for (const Bucket& b : planBuckets(model.params(), o.config.bucketBytes))
      formulaRank += ringAllReduceBytesSent(b.count, n, rank);
    formulaTotal = ringAllReduceBytesTotal(P, n);
  }
  std::printf("summary: mean step %.3f ms, comm %.3f ms, exposed %.3f ms", stepTime / k * 1e3, commTime / k * 1e3,
              exposed / k * 1e3);
  if (o.strategy == "ddp") std::printf(", overlap %.1f%%", overlap / k * 100);
  std::printf("; bytes sent per step: this rank %" PRIu64 " (formula %" PRIu64 "), all ranks %" PRIu64
              " (formula %" PRIu64 ")\n",
              sent, formulaRank, total, formulaTotal);
  int rc = 0;
  if (o.check) {
    std::vector<float> ref = trainSingle(o.config);
    double diff = relativeDifference(model.paramData(), ref.data(), P);
    bool ok = diff < 1e-5 && sent == formulaRank && total == formulaTotal;
    std::printf("check: relative difference from one process %.3g; bytes %s the formula: %s\n", diff,
                sent == formulaRank && total == formulaTotal ? "equal" : "differ from", ok ? "PASS" : "FAIL");
    rc = ok ? 0 : 1;
  }
  return rc;
}
