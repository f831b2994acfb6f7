// ferry-train: trains a small model with one parallel strategy on ranks started by ferryrun,
// printing per step the loss, step time, communication time and bytes moved, and at the end a
// summary: the loss curve, this rank's and the whole job's bytes per step against the strategy's
// formula, memory, and overlap (DDP, FSDP) or bubble (pipeline). --json FILE writes it all (rank 0).
//
//   build/tools/ferryrun -n 4 build/strategies/ferry-train --strategy ddp --steps 10 --bucket-bytes 4096
//   build/tools/ferryrun -n 4 build/strategies/ferry-train --strategy pp-1f1b --blocks 4 --micro-batches 8
//
// ps, ddp and fsdp train the MLP of model.hpp; tp, sp and the pipelines the FFN model of ffn.hpp;
// moe the MoE model of moe.hpp. --check also trains the same global batches in this process alone
// and fails unless the final parameters agree (relative difference under 1e-5) and the bytes equal
// the formula.
#include <cinttypes>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "ferry/comm.hpp"
#include "strategies/cost.hpp"
#include "strategies/ddp.hpp"
#include "strategies/fsdp.hpp"
#include "strategies/grid3d.hpp"
#include "strategies/moe.hpp"
#include "strategies/param_server.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/tensor_parallel.hpp"
#include "strategies/train_report.hpp"

using namespace ferry;
using namespace ferry::train;

namespace {

const char* const kStrategies[] = {"ps", "ddp", "fsdp", "tp", "sp", "pp-gpipe", "pp-1f1b", "moe", "3d"};

struct Options {
  std::string strategy = "ddp";
  TrainConfig config;
  bool check = false;
  std::string json;
  Grid3d grid{2, 2, 2};              // 3d: data × tensor × pipeline
  bool elastic = false;              // ddp: survive dead ranks (shrink and go on)
  int killRank = -1, killStep = -1;  // fault injection: that rank SIGKILLs itself inside that step
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;  // 3d
};

void usage() {
  std::fprintf(stderr,
               "usage: ferry-train --strategy ps|ddp|fsdp|tp|sp|pp-gpipe|pp-1f1b|moe|3d [--steps N] [--batch G]\n"
               "                   [--in N] [--hidden N] [--out N] [--blocks N] [--ffn N]\n"
               "                   [--loss ce|mse] [--optimizer sgd|momentum|adam] [--lr X] [--seed N]\n"
               "                   [--bucket-bytes N] [--offload] [--no-prefetch] [--micro-batches M]\n"
               "                   [--experts E] [--top-k 1|2] [--capacity-factor X] [--grid D,T,P]\n"
               "                   [--schedule gpipe|1f1b] [--json FILE] [--check]\n"
               "                   [--elastic] [--kill-rank R --kill-step S]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check" || a == "--offload" || a == "--no-prefetch" || a == "--elastic") {
      if (a == "--check") o.check = true;
      if (a == "--elastic") o.elastic = true;
      if (a == "--offload") o.config.offload = true;
      if (a == "--no-prefetch") o.config.prefetch = false;
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
    else if (a == "--ffn") o.config.ffn = num();
    else if (a == "--seed") o.config.seed = num();
    else if (a == "--bucket-bytes") o.config.bucketBytes = num();
    else if (a == "--micro-batches") o.config.microBatches = num();
    else if (a == "--experts") o.config.experts = num();
    else if (a == "--top-k") o.config.topK = num();
    else if (a == "--capacity-factor") o.config.capacityFactor = std::strtof(v, &end);
    else if (a == "--optimizer") o.config.optimizer = v;
    else if (a == "--lr") o.config.lr = std::strtof(v, &end);
    else if (a == "--grid") {
      if (std::sscanf(v, "%d,%d,%d", &o.grid.data, &o.grid.tensor, &o.grid.pipeline) != 3) return false;
      continue;
    } else if (a == "--schedule" && (std::strcmp(v, "gpipe") == 0 || std::strcmp(v, "1f1b") == 0)) {
      o.schedule = std::strcmp(v, "gpipe") == 0 ? PipelineSchedule::kGPipe : PipelineSchedule::kOneFOneB;
      continue;
    } else if (a == "--kill-rank" || a == "--kill-step") {
      (a == "--kill-rank" ? o.killRank : o.killStep) = static_cast<int>(std::strtol(v, &end, 10));
      if (*end != '\0') return false;
      continue;
    } else if (a == "--json") {
      o.json = v;
      continue;
    } else if (a == "--loss" && (std::strcmp(v, "ce") == 0 || std::strcmp(v, "mse") == 0)) {
      o.config.loss = std::strcmp(v, "ce") == 0 ? LossKind::kCrossEntropy : LossKind::kMeanSquaredError;
      continue;
    } else return false;
    if (end && *end != '\0') return false;
  }
  bool known = false;
  for (const char* s : kStrategies) known = known || o.strategy == s;
  if (!known || o.config.steps <= 0) return false;
  if (o.elastic && o.strategy != "ddp") return false;  // only DDP's replicas can lose a rank
  if ((o.killRank >= 0) != (o.killStep >= 0)) return false;
  if (o.config.shape.in == 0 || o.config.shape.hidden == 0 || o.config.shape.out == 0 || o.config.shape.blocks == 0)
    return false;
  return makeOptimizer(o.config.optimizer, o.config.lr) != nullptr;
}

void printStep(const StepStats& s) {
  if (std::isnan(s.loss)) std::printf("step %3d  loss        -", s.step);  // a rank that computes no loss
  else std::printf("step %3d  loss %8.5f", s.step, static_cast<double>(s.loss));
  std::printf("  step %8.3f ms  comm %8.3f ms  exposed %8.3f ms", s.stepSeconds * 1e3, s.commSeconds * 1e3,
              s.exposedSeconds * 1e3);
  if (s.buckets > 0) std::printf("  overlap %5.1f%%  buckets %d", s.overlapFraction * 100, s.buckets);
  if (s.offloadBytes > 0 || (s.peakStateBytes > s.stateBytes))
    std::printf("  overlap %5.1f%%  state %" PRIu64 " B  peak %" PRIu64 " B", s.overlapFraction * 100, s.stateBytes,
                s.peakStateBytes);
  if (s.peakActivationBytes > 0 && s.bubbleFraction > 0)
    std::printf("  bubble %5.1f%%  activations %" PRIu64 " B", s.bubbleFraction * 100, s.peakActivationBytes);
  std::printf("  sent %" PRIu64 " B  received %" PRIu64 " B\n", s.bytesSent, s.bytesReceived);
  std::fflush(stdout);
}

// What one strategy run produced beyond the step reports: the formula for this rank's bytes, and
// the relative difference from one process (computed only with --check).
struct Outcome {
  std::vector<StepStats> steps;
  uint64_t formulaSent = 0;
  std::function<uint64_t(int rank)> formulaOf;  // every rank's formula, for the job total
  std::function<double()> check;
  uint64_t ddpStateBytes = 0;           // FSDP: what DDP would hold
  std::vector<PipelineEvent> timeline;  // pipeline: this stage's last step
  bool shrunk = false;                  // elastic: ranks died and the run went on without them
  double bubbleTheory = -1;             // pipeline: (p-1)/(m+p-1)
};

Status take(Outcome& out, Result<std::vector<StepStats>> r) {
  FERRY_TRY(r);
  out.steps = std::move(*r);
  return Status();
}

// ddp, elastic or not: the run, with the fault injection of --kill-rank, and the formula on the
// communicator it ended with.
Status runDdp(std::unique_ptr<Comm>& commPtr, const Options& o, Mlp& model, Outcome& out) {
  const int n = commPtr->size(), rank = commPtr->rank();
  const TrainConfig& cfg = o.config;
  std::function<void(int)> kill;
  if (o.killRank == rank) {
    kill = [&o](int step) {
      if (step != o.killStep) return;
      std::printf("rank %d: killing itself (SIGKILL) in step %d, while its all-reduces start\n", o.killRank, step);
      std::fflush(stdout);
      raise(SIGKILL);
    };
  }
  if (o.elastic) {
    ElasticOptions eo;
    eo.midStep = kill;
    eo.onShrink = [rank](int step, const Status& why, const Comm& now) {
      std::printf("rank %d: step %d failed: %s\nrank %d: shrunk to %d ranks (now rank %d); training goes on\n", rank,
                  step, why.message().c_str(), rank, now.size(), now.rank());
      std::fflush(stdout);
    };
    FERRY_TRY(take(out, trainDdpElastic(commPtr, cfg, model, printStep, eo)));
    out.shrunk = commPtr->size() != n;
  } else {
    if (kill) return makeError(ErrorCode::kInvalidArgument, "--kill-rank without --elastic would only fail the job");
    FERRY_TRY(take(out, trainDdp(*commPtr, cfg, model, printStep)));
  }
  const std::vector<Bucket> buckets = planBuckets(model.params(), cfg.bucketBytes);
  out.formulaOf = [buckets, n = commPtr->size()](int r) {
    uint64_t b = 0;
    for (const Bucket& k : buckets) b += ringAllReduceBytesSent(k.count, n, r);
    return b;
  };
  return Status();
}

// ps, ddp and fsdp: the MLP of model.hpp.
Status runMlp(std::unique_ptr<Comm>& commPtr, const Options& o, Outcome& out) {
  Comm& comm = *commPtr;  // elastic DDP replaces commPtr; nothing below uses this one after it
  const int n = comm.size(), rank = comm.rank();
  const TrainConfig& cfg = o.config;
  auto model = std::make_shared<Mlp>(cfg.shape, cfg.seed);
  const size_t P = model->paramCount();
  if (rank == 0)
    std::printf(
        "ferry-train: %s on %d ranks, MLP in %zu, %zu x hidden %zu, out %zu (%zu parameters), global batch "
        "%zu, %d steps, %s\n",
        o.strategy.c_str(), n, cfg.shape.in, cfg.shape.blocks, cfg.shape.hidden, cfg.shape.out, P, cfg.globalBatch,
        cfg.steps, cfg.optimizer.c_str());
  if (o.strategy == "ps") {
    FERRY_TRY(take(out, trainParameterServer(comm, cfg, *model, printStep)));
    out.formulaOf = [P, n](int r) { return r == 0 ? psServerBytesSent(P, n - 1) : psWorkerBytesSent(P); };
  } else if (o.strategy == "ddp") {
    FERRY_TRY(runDdp(commPtr, o, *model, out));
  } else {
    FERRY_TRY(take(out, trainFsdp(comm, cfg, *model, printStep)));
    uint64_t perRank = 0;
    for (const FsdpUnit& u : planFsdpUnits(*model)) perRank += 3 * ringGatherBytesSent(fsdpShard(u.count, n), n);
    out.formulaOf = [perRank](int) { return perRank; };
    out.ddpStateBytes = ddpStateBytes(P, configOptimizer(cfg)->stateBytesPerParam());
  }
  out.check = [model, cfg]() {
    std::vector<float> ref = trainSingle(cfg);
    return relativeDifference(model->paramData(), ref.data(), model->paramCount());
  };
  return Status();
}

// moe: the MoE model of moe.hpp.
Status runMoe(Comm& comm, const Options& o, Outcome& out) {
  const int n = comm.size(), rank = comm.rank();
  const TrainConfig& cfg = o.config;
  auto model = std::make_shared<MoeModel>(cfg, rank, n);
  if (rank == 0)
    std::printf(
        "ferry-train: moe on %d ranks, in %zu, hidden %zu, %zu experts of ffn %zu (%zu per rank), top-%zu, "
        "capacity factor %.2f, out %zu, global batch %zu, %d steps, %s\n",
        n, cfg.shape.in, cfg.shape.hidden, model->experts(), model->ffn(), model->localExperts(), cfg.topK,
        static_cast<double>(cfg.capacityFactor), cfg.shape.out, cfg.globalBatch, cfg.steps, cfg.optimizer.c_str());
  MoeRouting routing;
  FERRY_TRY(take(out, trainMoe(comm, cfg, *model, printStep, &routing)));
  // Every group's last-step counts, for the formula.
  auto counts = std::make_shared<std::vector<uint64_t>>(routing.counts.size() * static_cast<size_t>(n));
  FERRY_TRY(comm.allGather(routing.counts.data(), counts->data(), routing.counts.size(), DataType::kUint64));
  const size_t shared = model->shared().size();
  out.formulaOf = [counts, cfg, shared, n](int r) {
    return moeBytes(*counts, cfg.experts, cfg.shape.hidden, shared, n, r, false);
  };
  out.check = [model, cfg, n]() {
    std::vector<float> ref = model->extract(trainMoeSingle(cfg, n));
    std::vector<float> got = model->flat();
    return relativeDifference(got.data(), ref.data(), got.size());
  };
  return Status();
}

// 3d: the FFN model of ffn.hpp over a data × tensor × pipeline grid.
Status run3d(Comm& comm, const Options& o, Outcome& out) {
  const int n = comm.size(), rank = comm.rank();
  const TrainConfig& cfg = o.config;
  const FfnShape shape = ffnShape(cfg);
  const Grid3d grid = o.grid;
  auto split = splitGrid(comm, grid);
  FERRY_TRY(split);
  auto comms = std::make_shared<GridComms>(std::move(*split));
  auto model = std::make_shared<FfnModel>(shape, gridPart(shape, grid, comms->t, comms->s), cfg.seed);
  if (rank == 0)
    std::printf(
        "ferry-train: 3d on %d ranks as %d data x %d tensor x %d pipeline (%s), FFN in %zu, %zu blocks of "
        "hidden %zu and ffn %zu, out %zu (%zu parameters, %zu on rank 0), global batch %zu in %zu "
        "micro-batches per replica, %d steps, %s\n",
        n, grid.data, grid.tensor, grid.pipeline, o.schedule == PipelineSchedule::kGPipe ? "GPipe" : "1F1B", shape.in,
        shape.blocks, shape.hidden, shape.ffn, shape.out, model->fullCount(), model->paramCount(), cfg.globalBatch,
        cfg.microBatches, cfg.steps, cfg.optimizer.c_str());
  FERRY_TRY(take(out, train3d(*comms, cfg, o.schedule, *model, printStep)));
  out.formulaOf = [cfg, shape, grid](int r) {
    const int P = grid.pipeline, T = grid.tensor;
    FfnModel part(shape, gridPart(shape, grid, (r / P) % T, r % P), cfg.seed);
    return grid3dBytes(cfg, grid, part, r / (P * T), (r / P) % T, r % P, false);
  };
  out.bubbleTheory = static_cast<double>(grid.pipeline - 1) /
                     static_cast<double>(cfg.microBatches + static_cast<size_t>(grid.pipeline) - 1);
  out.check = [model, cfg, comms]() {
    std::vector<float> ref = model->extract(trainFfnSingle(cfg));
    return relativeDifference(model->paramData(), ref.data(), model->paramCount());
  };
  return Status();
}

// tp, sp, pp-gpipe and pp-1f1b: the FFN model of ffn.hpp.
Status runFfn(Comm& comm, const Options& o, Outcome& out) {
  const int n = comm.size(), rank = comm.rank();
  const TrainConfig& cfg = o.config;
  const FfnShape shape = ffnShape(cfg);
  const bool pipeline = o.strategy.rfind("pp-", 0) == 0;
  auto partOf = [&](int r) {
    if (pipeline) return pipelinePart(shape, r, n);
    FfnPart p;
    p.tpRank = r;
    p.tpSize = n;
    return p;
  };
  auto model = std::make_shared<FfnModel>(shape, partOf(rank), cfg.seed);
  if (rank == 0)
    std::printf(
        "ferry-train: %s on %d ranks, FFN in %zu, %zu blocks of hidden %zu and ffn %zu, out %zu (%zu "
        "parameters, %zu on rank 0), global batch %zu%s, %d steps, %s\n",
        o.strategy.c_str(), n, shape.in, shape.blocks, shape.hidden, shape.ffn, shape.out, model->fullCount(),
        model->paramCount(), cfg.globalBatch,
        pipeline ? (" in " + std::to_string(cfg.microBatches) + " micro-batches").c_str() : "", cfg.steps,
        cfg.optimizer.c_str());
  if (pipeline) {
    const auto schedule = o.strategy == "pp-gpipe" ? PipelineSchedule::kGPipe : PipelineSchedule::kOneFOneB;
    FERRY_TRY(take(out, trainPipeline(comm, cfg, schedule, *model, printStep, &out.timeline)));
    out.formulaOf = [cfg, shape, n](int r) { return pipelineBytesSent(cfg.globalBatch, shape.hidden, r, n); };
    out.bubbleTheory = static_cast<double>(n - 1) / static_cast<double>(cfg.microBatches + static_cast<size_t>(n) - 1);
  } else {
    const bool sequence = o.strategy == "sp";
    FERRY_TRY(take(out, trainTensorParallel(comm, cfg, sequence, *model, printStep)));
    auto whole = std::make_shared<FfnModel>(shape, partOf(0), cfg.seed);  // the byte formula's shapes
    out.formulaOf = [whole, cfg, sequence, n](int r) {
      return tensorParallelBytesSent(*whole, cfg.globalBatch, sequence, n, r);
    };
  }
  out.check = [model, cfg]() {
    std::vector<float> ref = model->extract(trainFfnSingle(cfg));
    return relativeDifference(model->paramData(), ref.data(), model->paramCount());
  };
  return Status();
}

Result<Outcome> run(std::unique_ptr<Comm>& commPtr, const Options& o) {
  const int rank = commPtr->rank();  // the formula is this rank's before any shrink
  Outcome out;
  if (o.strategy == "ps" || o.strategy == "ddp" || o.strategy == "fsdp") {
    FERRY_TRY(runMlp(commPtr, o, out));
  } else if (o.strategy == "moe") {
    FERRY_TRY(runMoe(*commPtr, o, out));
  } else if (o.strategy == "3d") {
    FERRY_TRY(run3d(*commPtr, o, out));
  } else {
    FERRY_TRY(runFfn(*commPtr, o, out));
  }
  out.formulaSent = out.formulaOf(rank);
  return out;
}

// Every stage's timeline of the last step as JSON: per stage a list of [forward, micro, start_ms,
// end_ms], times from that stage's own start of the step (ranks start a step within a message's
// latency of each other, since the previous step ended in their exchanges). A collective call.
Result<std::string> timelineJson(Comm& comm, const std::vector<PipelineEvent>& events) {
  const size_t n = static_cast<size_t>(comm.size()), k = events.size() * 4;
  std::vector<double> mine, all(k * n);
  for (const PipelineEvent& e : events)
    mine.insert(mine.end(),
                {e.action.forward ? 1.0 : 0.0, static_cast<double>(e.action.micro), e.start * 1e3, e.end * 1e3});
  FERRY_TRY(comm.allGather(mine.data(), all.data(), k, DataType::kFloat64));
  std::string json = "\"timeline\": [";
  char buf[96];
  for (size_t r = 0; r < n; ++r) {
    json += r ? ",\n    [" : "\n    [";
    for (size_t i = 0; i < events.size(); ++i) {
      const double* e = all.data() + r * k + i * 4;
      std::snprintf(buf, sizeof buf, "%s[%d, %d, %.4f, %.4f]", i ? ", " : "", static_cast<int>(e[0]),
                    static_cast<int>(e[1]), e[2], e[3]);
      json += buf;
    }
    json += "]";
  }
  return json + "]";
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
  std::unique_ptr<Comm> commPtr = std::move(*created);
  auto outcome = run(commPtr, o);
  Comm& comm = *commPtr;  // elastic DDP may have shrunk it
  const int n = comm.size(), rank = comm.rank();
  if (!outcome.isOk()) {
    std::fprintf(stderr, "ferry-train: %s\n", outcome.status().toString().c_str());
    return 1;
  }
  uint64_t formulaTotal = 0;
  for (int r = 0; r < n; ++r) formulaTotal += outcome->formulaOf(r);
  double diff = -1;
  if (o.check) diff = outcome->check();

  // MoE's bytes follow the routing, which changes every step: its formula is for the last step.
  RankSummary mine = summarizeRank(outcome->steps, outcome->formulaSent, diff, outcome->ddpStateBytes,
                                   outcome->bubbleTheory, /*lastStepOnly=*/o.strategy == "moe");
  mine.rank = rank;
  auto everyone = gatherSummaries(comm, mine, outcome->steps);
  if (!everyone.isOk()) {
    std::fprintf(stderr, "ferry-train: %s\n", everyone.status().toString().c_str());
    return 1;
  }
  printSummary(o.strategy, mine, *everyone, formulaTotal);
  std::string extra;
  if (!outcome->timeline.empty()) {
    auto t = timelineJson(comm, outcome->timeline);
    if (!t.isOk()) {
      std::fprintf(stderr, "ferry-train: %s\n", t.status().toString().c_str());
      return 1;
    }
    extra = *t;
  }
  if (rank == 0 && !o.json.empty()) {
    Status s = writeJson(o.json, o.strategy, o.config, n, *everyone, formulaTotal, extra);
    if (!s.isOk()) {
      std::fprintf(stderr, "ferry-train: %s\n", s.toString().c_str());
      return 1;
    }
  }
  int rc = 0;
  if (o.check) {
    // After a shrink the steps ran on different rank counts: only the parameters are compared.
    const bool bytesOk =
        outcome->shrunk || (mine.sent == mine.formulaSent && everyone->totalSent == formulaTotal && mine.bytesSteady);
    const bool ok = diff < 1e-5 && bytesOk;
    std::printf("check: relative difference from one process %.3g; bytes %s: %s\n", diff,
                outcome->shrunk ? "not compared with the formula (the communicator shrank)"
                : bytesOk       ? "equal the formula"
                                : "differ from the formula",
                ok ? "PASS" : "FAIL");
    rc = ok ? 0 : 1;
  }
  return rc;
}
