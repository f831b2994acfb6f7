// Each strategy on 2 and 4 real processes on one host (shared memory, FERRY_TRANSPORT=auto): after
// K steps every rank's parameters equal those of one process trained on the same global batches
// (relative difference under 1e-5), and the bytes each rank sent and received per step equal the
// strategy's formula (strategies/cost.hpp), as do the bytes of all ranks together. Each rank prints
// its numbers; the test prints them all.
#include <catch2/catch.hpp>

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

#include "strategies/cost.hpp"
#include "strategies/ddp.hpp"
#include "strategies/fsdp.hpp"
#include "strategies/grid3d.hpp"
#include "strategies/moe.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/tensor_parallel.hpp"
#include "strategies/param_server.hpp"
#include "test/common/mp_harness.hpp"

using namespace ferry;
using namespace ferry::train;
using namespace ferry::test;

namespace {

constexpr double kTolerance = 1e-5;
const int kWorlds[] = {2, 4};

using Strategy = std::function<Result<std::vector<StepStats>>(Comm&, const TrainConfig&, Mlp&)>;
// This rank's expected bytes sent and received per step, and all ranks' sent per step.
using Formula = std::function<void(const TrainConfig&, size_t params, int n, int rank, uint64_t& sent,
                                   uint64_t& received, uint64_t& total)>;

std::string runStrategy(Comm& comm, const std::string& name, const TrainConfig& config, const Strategy& strategy,
                        const Formula& formula) {
  Mlp model(config.shape, config.seed);
  auto steps = strategy(comm, config, model);
  if (!steps.isOk()) return name + " failed: " + steps.status().toString();
  const int n = comm.size(), rank = comm.rank();
  const size_t P = model.paramCount();
  std::vector<float> ref = trainSingle(config);
  const double diff = relativeDifference(model.paramData(), ref.data(), P);
  uint64_t sent = 0, received = 0, total = 0;
  formula(config, P, n, rank, sent, received, total);
  uint64_t allSent = steps->empty() ? 0 : steps->back().bytesSent;
  if (Status s = comm.allReduce(&allSent, &allSent, 1, DataType::kUint64, RedOp::kSum); !s.isOk())
    return "allReduce of byte counts failed: " + s.toString();
  const std::string what = name + " (" + config.optimizer +
                           (config.loss == LossKind::kCrossEntropy ? ", cross-entropy" : ", mse") + ", " +
                           std::to_string(config.shape.blocks) + " block(s)" +
                           (name == "ddp" ? ", bucket " + std::to_string(config.bucketBytes) + " B" : "") + ")";
  std::printf("%s n=%d rank %d: %zu params, %d steps, relative difference %.3g; bytes/step sent %" PRIu64
              " (formula %" PRIu64 "), received %" PRIu64 " (formula %" PRIu64 "), all ranks %" PRIu64
              " (formula %" PRIu64 ")\n",
              what.c_str(), n, rank, P, config.steps, diff, steps->back().bytesSent, sent, steps->back().bytesReceived,
              received, allSent, total);
  std::fflush(stdout);
  if (!(diff < kTolerance)) return name + ": parameters differ from one process by " + std::to_string(diff);
  if (steps->size() != static_cast<size_t>(config.steps)) return name + ": wrong number of step reports";
  for (const StepStats& st : *steps) {
    if (st.bytesSent != sent || st.bytesReceived != received)
      return name + ": step " + std::to_string(st.step) + " moved " + std::to_string(st.bytesSent) + "/" +
             std::to_string(st.bytesReceived) + " bytes, formula " + std::to_string(sent) + "/" +
             std::to_string(received);
  }
  if (allSent != total)
    return name + ": all ranks sent " + std::to_string(allSent) + ", formula " + std::to_string(total);
  return "";
}

void runEverywhere(const std::string& name, const std::vector<TrainConfig>& configs, const Strategy& strategy,
                   const Formula& formula) {
  for (int n : kWorlds) {
    INFO(name << " on " << n << " ranks");
    auto outcomes = runRanks(
        n,
        [&](Comm& c) -> std::string {
          for (const TrainConfig& config : configs) {
            std::string err = runStrategy(c, name, config, strategy, formula);
            if (!err.empty()) return err;
          }
          return "";
        },
        60);
    for (const RankOutcome& o : outcomes) std::cout << o.output;
    CHECK(summarize(outcomes) == "");
  }
}

TrainConfig baseConfig() {
  TrainConfig c;
  c.shape = {16, 30, 5};  // 725 parameters: ring segments of unequal size on 2 and 4 ranks
  c.globalBatch = 24;     // divisible by 1, 2, 3 and 4 shards
  c.steps = 5;
  return c;
}

}  // namespace

TEST_CASE("parameter server", "[mp]") {
  TrainConfig adam = baseConfig();
  TrainConfig sgd = baseConfig();
  sgd.optimizer = "momentum";
  sgd.loss = LossKind::kMeanSquaredError;
  sgd.lr = 0.05f;
  runEverywhere(
      "ps", {adam, sgd}, [](Comm& c, const TrainConfig& cfg, Mlp& m) { return trainParameterServer(c, cfg, m); },
      [](const TrainConfig&, size_t P, int n, int rank, uint64_t& sent, uint64_t& received, uint64_t& total) {
        sent = received = rank == 0 ? psServerBytesSent(P, n - 1) : psWorkerBytesSent(P);
        total = psBytesTotal(P, n - 1);
      });
}

TEST_CASE("ddp", "[mp]") {
  std::vector<TrainConfig> configs;
  for (size_t bucketBytes : {size_t{1}, size_t{600}, size_t{1} << 20}) {
    TrainConfig c = baseConfig();
    c.bucketBytes = bucketBytes;  // one bucket per parameter, a few, and one for everything
    configs.push_back(c);
  }
  configs[0].shape.blocks = 2;  // 10 buckets
  configs[1].loss = LossKind::kMeanSquaredError;
  configs[1].optimizer = "sgd";
  configs[1].lr = 0.1f;
  runEverywhere(
      "ddp", configs, [](Comm& c, const TrainConfig& cfg, Mlp& m) { return trainDdp(c, cfg, m); },
      [](const TrainConfig& cfg, size_t P, int n, int rank, uint64_t& sent, uint64_t& received, uint64_t& total) {
        Mlp shape(cfg.shape, cfg.seed);
        sent = received = 0;
        for (const Bucket& b : planBuckets(shape.params(), cfg.bucketBytes)) {
          sent += ringAllReduceBytesSent(b.count, n, rank);
          received += ringAllReduceBytesReceived(b.count, n, rank);
        }
        total = ringAllReduceBytesTotal(P, n);
      });
}

TEST_CASE("fsdp", "[mp]") {
  std::vector<TrainConfig> configs(3, baseConfig());
  configs[0].shape.blocks = 2;  // three units: the head and two blocks
  configs[1].optimizer = "momentum";
  configs[1].loss = LossKind::kMeanSquaredError;
  configs[1].lr = 0.05f;
  configs[1].offload = true;
  configs[2].prefetch = false;
  configs[2].offload = true;
  runEverywhere(
      "fsdp", configs,
      [](Comm& c, const TrainConfig& cfg, Mlp& m) -> Result<std::vector<StepStats>> {
        auto steps = trainFsdp(c, cfg, m);
        if (!steps.isOk() || steps->empty()) return steps;
        // Memory: the shards of parameters, gradients and (unless offloaded) optimizer state, about
        // 1/n of DDP's, plus at most a few units' full copies at the peak.
        const int n = c.size();
        size_t S = 0, largest = 0;
        for (const FsdpUnit& u : planFsdpUnits(m)) {
          S += fsdpShard(u.count, n);
          largest = std::max(largest, fsdpShard(u.count, n) * static_cast<size_t>(n));
        }
        const size_t bpp = configOptimizer(cfg)->stateBytesPerParam();
        const StepStats& last = steps->back();
        const uint64_t expected = S * (2 * sizeof(float) + (cfg.offload ? 0 : bpp));
        const uint64_t ddp = ddpStateBytes(m.paramCount(), bpp);
        std::printf("fsdp n=%d rank %d memory: state %" PRIu64 " B (expected %" PRIu64 "), peak %" PRIu64
                    " B, offloaded %" PRIu64 " B; DDP holds %" PRIu64 " B\n",
                    n, c.rank(), last.stateBytes, expected, last.peakStateBytes, last.offloadBytes, ddp);
        if (last.stateBytes != expected || last.offloadBytes != (cfg.offload ? S * bpp : 0))
          return makeError(ErrorCode::kInternalError, "fsdp memory accounting is off");
        // At most two full parameter copies (this unit, the prefetched one) and every unit's gradient copy.
        if (last.peakStateBytes > expected + (2 * largest + S * static_cast<size_t>(n)) * sizeof(float))
          return makeError(ErrorCode::kInternalError, "fsdp transient memory above its bound");
        return steps;
      },
      [](const TrainConfig& cfg, size_t, int n, int, uint64_t& sent, uint64_t& received, uint64_t& total) {
        Mlp shape(cfg.shape, cfg.seed);
        sent = 0;
        for (const FsdpUnit& u : planFsdpUnits(shape)) sent += 3 * ringGatherBytesSent(fsdpShard(u.count, n), n);
        received = sent;
        total = sent * static_cast<uint64_t>(n);
      });
}

namespace {

// The model-parallel strategies over the FFN model: each rank's part against the same slices of the
// single-process result, and each rank's bytes per step against `bytesSent(rank)` (a rank receives
// what the formula gives its ring predecessor, or for the pipeline, its own count mirrored).
using FfnStrategy = std::function<Result<std::vector<StepStats>>(Comm&, const TrainConfig&, FfnModel&)>;
using FfnFormula = std::function<uint64_t(const TrainConfig&, const FfnModel&, int n, int rank)>;

std::string runFfn(Comm& comm, const std::string& name, const TrainConfig& config,
                   const std::function<FfnPart(const FfnShape&, int rank, int n)>& partOf, const FfnStrategy& strategy,
                   const FfnFormula& sentBy, const FfnFormula& receivedBy) {
  const int n = comm.size(), rank = comm.rank();
  const FfnShape shape = ffnShape(config);
  FfnModel model(shape, partOf(shape, rank, n), config.seed);
  auto steps = strategy(comm, config, model);
  if (!steps.isOk()) return name + " failed: " + steps.status().toString();
  const std::vector<float> ref = model.extract(trainFfnSingle(config));
  const double diff = relativeDifference(model.paramData(), ref.data(), model.paramCount());
  const uint64_t sent = sentBy(config, model, n, rank), received = receivedBy(config, model, n, rank);
  uint64_t total = 0;
  for (int r = 0; r < n; ++r) {
    FfnModel other(shape, partOf(shape, r, n), config.seed);
    total += sentBy(config, other, n, r);
  }
  uint64_t allSent = steps->empty() ? 0 : steps->back().bytesSent;
  if (Status s = comm.allReduce(&allSent, &allSent, 1, DataType::kUint64, RedOp::kSum); !s.isOk())
    return "allReduce of byte counts failed: " + s.toString();
  const StepStats& last = steps->back();
  std::printf(
      "%s (%s, %s, %zu blocks, ffn %zu, %zu micro-batches) n=%d rank %d: %zu of %zu params, relative "
      "difference %.3g; bytes/step sent %" PRIu64 " (formula %" PRIu64 "), received %" PRIu64 " (formula %" PRIu64
      "), all ranks %" PRIu64 " (formula %" PRIu64 "); activations %" PRIu64 " B, bubble %.2f\n",
      name.c_str(), config.optimizer.c_str(), config.loss == LossKind::kCrossEntropy ? "cross-entropy" : "mse",
      shape.blocks, shape.ffn, config.microBatches, n, rank, model.paramCount(), model.fullCount(), diff,
      last.bytesSent, sent, last.bytesReceived, received, allSent, total, last.peakActivationBytes,
      last.bubbleFraction);
  std::fflush(stdout);
  if (!(diff < kTolerance)) return name + ": parameters differ from one process by " + std::to_string(diff);
  if (steps->size() != static_cast<size_t>(config.steps)) return name + ": wrong number of step reports";
  for (const StepStats& st : *steps)
    if (st.bytesSent != sent || st.bytesReceived != received)
      return name + ": step " + std::to_string(st.step) + " moved " + std::to_string(st.bytesSent) + "/" +
             std::to_string(st.bytesReceived) + " bytes, formula " + std::to_string(sent) + "/" +
             std::to_string(received);
  if (allSent != total)
    return name + ": all ranks sent " + std::to_string(allSent) + ", formula " + std::to_string(total);
  return "";
}

void runFfnEverywhere(const std::string& name, const std::vector<TrainConfig>& configs,
                      const std::function<FfnPart(const FfnShape&, int, int)>& partOf, const FfnStrategy& strategy,
                      const FfnFormula& sentBy, const FfnFormula& receivedBy) {
  for (int n : kWorlds) {
    INFO(name << " on " << n << " ranks");
    auto outcomes = runRanks(
        n,
        [&](Comm& c) -> std::string {
          for (const TrainConfig& config : configs) {
            std::string err = runFfn(c, name, config, partOf, strategy, sentBy, receivedBy);
            if (!err.empty()) return err;
          }
          return "";
        },
        60);
    for (const RankOutcome& o : outcomes) std::cout << o.output;
    CHECK(summarize(outcomes) == "");
  }
}

std::vector<TrainConfig> ffnConfigs() {
  std::vector<TrainConfig> configs(2, baseConfig());
  configs[0].shape.blocks = 2;
  configs[0].shape.hidden = 12;  // ffn 48: 24 or 12 columns per rank
  configs[1].shape.blocks = 4;   // a block per stage on 4 ranks
  configs[1].shape.hidden = 8;
  configs[1].ffn = 16;
  configs[1].optimizer = "momentum";
  configs[1].loss = LossKind::kMeanSquaredError;
  configs[1].lr = 0.05f;
  return configs;
}

FfnPart tensorPart(const FfnShape&, int rank, int n) {
  FfnPart p;
  p.tpRank = rank;
  p.tpSize = n;
  return p;
}

void runTensorParallel(bool sequence) {
  runFfnEverywhere(
      sequence ? "sp" : "tp", ffnConfigs(), tensorPart,
      [sequence](Comm& c, const TrainConfig& cfg, FfnModel& m) { return trainTensorParallel(c, cfg, sequence, m); },
      [sequence](const TrainConfig& cfg, const FfnModel& m, int n, int rank) {
        return tensorParallelBytesSent(m, cfg.globalBatch, sequence, n, rank);
      },
      [sequence](const TrainConfig& cfg, const FfnModel& m, int n, int rank) {
        return tensorParallelBytesSent(m, cfg.globalBatch, sequence, n, (rank + n - 1) % n);
      });
}

void runPipeline(PipelineSchedule schedule) {
  std::vector<TrainConfig> configs = ffnConfigs();
  configs[1].microBatches = 8;
  runFfnEverywhere(
      schedule == PipelineSchedule::kGPipe ? "pp-gpipe" : "pp-1f1b", configs, pipelinePart,
      [schedule](Comm& c, const TrainConfig& cfg, FfnModel& m) -> Result<std::vector<StepStats>> {
        auto steps = trainPipeline(c, cfg, schedule, m);
        if (!steps.isOk()) return steps;
        // Activations held at the peak: every micro-batch under GPipe, at most p - s under 1F1B.
        const int p = c.size(), s = c.rank();
        const size_t micro = cfg.microBatches, rows = cfg.globalBatch / micro;
        std::vector<float> grads(m.paramCount());
        FfnPass probe(m, grads.data());
        (void)probe.forward(Tensor(rows, s == 0 ? m.shape().in : m.shape().hidden));
        const size_t live = schedule == PipelineSchedule::kGPipe ? micro : std::min(micro, static_cast<size_t>(p - s));
        for (const StepStats& st : *steps)
          if (st.peakActivationBytes != live * probe.savedBytes())
            return makeError(ErrorCode::kInternalError, "stage %d held %llu B of activations, expected %zu x %zu B", s,
                             static_cast<unsigned long long>(st.peakActivationBytes), live, probe.savedBytes());
        return steps;
      },
      [](const TrainConfig& cfg, const FfnModel& m, int n, int rank) {
        return pipelineBytesSent(cfg.globalBatch, m.shape().hidden, rank, n);
      },
      [](const TrainConfig& cfg, const FfnModel& m, int n, int rank) {
        return pipelineBytesSent(cfg.globalBatch, m.shape().hidden, rank, n);
      });
}

}  // namespace

TEST_CASE("tp", "[mp]") { runTensorParallel(false); }

TEST_CASE("sp", "[mp]") { runTensorParallel(true); }

TEST_CASE("pp-gpipe", "[mp]") { runPipeline(PipelineSchedule::kGPipe); }

TEST_CASE("pp-1f1b", "[mp]") { runPipeline(PipelineSchedule::kOneFOneB); }

// MoE: each rank's replicated parameters and experts against the single-process layer holding all
// experts (routing the global batch in the same n groups); the same tokens dropped; the bytes
// against the formula evaluated on the reference's routing counts.
TEST_CASE("moe", "[mp]") {
  std::vector<TrainConfig> configs(3, baseConfig());
  for (TrainConfig& c : configs) {
    c.shape.hidden = 12;
    c.ffn = 24;
    c.experts = 4;
  }
  configs[0].capacityFactor = 1.0f;  // top-1, tight capacity: some tokens dropped
  configs[1].topK = 2;
  configs[1].capacityFactor = 1.25f;
  configs[2].topK = 2;
  configs[2].capacityFactor = 4.0f;  // nothing dropped
  configs[2].optimizer = "momentum";
  configs[2].loss = LossKind::kMeanSquaredError;
  configs[2].lr = 0.05f;
  for (int n : kWorlds) {
    INFO("moe on " << n << " ranks");
    auto outcomes = runRanks(
        n,
        [&](Comm& c) -> std::string {
          for (const TrainConfig& config : configs) {
            MoeModel model(config, c.rank(), n);
            MoeRouting mine;
            auto steps = trainMoe(c, config, model, nullptr, &mine);
            if (!steps.isOk()) return "moe failed: " + steps.status().toString();
            MoeRouting ref;
            const std::vector<float> full = trainMoeSingle(config, n, &ref);
            const std::vector<float> expected = model.extract(full), got = model.flat();
            const double diff = relativeDifference(got.data(), expected.data(), got.size());
            const uint64_t sent =
                moeBytes(ref.counts, config.experts, config.shape.hidden, model.shared().size(), n, c.rank(), false);
            const uint64_t received =
                moeBytes(ref.counts, config.experts, config.shape.hidden, model.shared().size(), n, c.rank(), true);
            const StepStats& last = steps->back();
            std::printf(
                "moe (top-%zu, capacity factor %.2f, %zu experts) n=%d rank %d: relative difference %.3g; "
                "dropped %" PRIu64 " (one process %" PRIu64 "); bytes/step sent %" PRIu64 " (formula %" PRIu64
                "), received %" PRIu64 " (formula %" PRIu64 ")\n",
                config.topK, static_cast<double>(config.capacityFactor), config.experts, n, c.rank(), diff,
                mine.dropped, ref.dropped, last.bytesSent, sent, last.bytesReceived, received);
            std::fflush(stdout);
            if (!(diff < kTolerance)) return "moe: parameters differ from one process by " + std::to_string(diff);
            if (mine.dropped != ref.dropped) return "moe: dropped tokens differ from one process";
            for (size_t e = 0; e < config.experts; ++e)
              if (mine.counts[e] != ref.counts[static_cast<size_t>(c.rank()) * config.experts + e])
                return "moe: routing differs from one process";
            if (last.bytesSent != sent || last.bytesReceived != received) return "moe: bytes differ from the formula";
          }
          return "";
        },
        60);
    for (const RankOutcome& o : outcomes) std::cout << o.output;
    CHECK(summarize(outcomes) == "");
  }
}

// 3D: 8 ranks as 2 data-parallel replicas × 2 tensor-parallel ranks × 2 pipeline stages (and 4 ranks
// as 1 × 2 × 2 and 2 × 1 × 2); each rank's slice of its stage against one process.
TEST_CASE("3d", "[mp]") {
  std::vector<TrainConfig> configs = ffnConfigs();
  const std::vector<Grid3d> grids = {{2, 2, 2}, {1, 2, 2}, {2, 1, 2}};
  for (const Grid3d& grid : grids) {
    INFO("3d grid " << grid.data << "x" << grid.tensor << "x" << grid.pipeline);
    auto outcomes = runRanks(
        grid.size(),
        [&](Comm& world) -> std::string {
          auto comms = splitGrid(world, grid);
          if (!comms.isOk()) return "split failed: " + comms.status().toString();
          for (size_t k = 0; k < configs.size(); ++k) {
            const TrainConfig& config = configs[k];
            const auto schedule = k == 0 ? PipelineSchedule::kGPipe : PipelineSchedule::kOneFOneB;
            const FfnShape shape = ffnShape(config);
            FfnModel model(shape, gridPart(shape, grid, comms->t, comms->s), config.seed);
            auto steps = train3d(*comms, config, schedule, model);
            if (!steps.isOk()) return "3d failed: " + steps.status().toString();
            const std::vector<float> ref = model.extract(trainFfnSingle(config));
            const double diff = relativeDifference(model.paramData(), ref.data(), model.paramCount());
            const uint64_t sent = grid3dBytes(config, grid, model, comms->d, comms->t, comms->s, false);
            const uint64_t received = grid3dBytes(config, grid, model, comms->d, comms->t, comms->s, true);
            std::printf(
                "3d %dx%dx%d (%s, %zu blocks) rank %d at (%d, %d, %d): %zu params, relative difference %.3g; "
                "bytes/step sent %" PRIu64 " (formula %" PRIu64 "), received %" PRIu64 " (formula %" PRIu64 ")\n",
                grid.data, grid.tensor, grid.pipeline, k == 0 ? "gpipe" : "1f1b", shape.blocks, world.rank(), comms->d,
                comms->t, comms->s, model.paramCount(), diff, steps->back().bytesSent, sent,
                steps->back().bytesReceived, received);
            std::fflush(stdout);
            if (!(diff < kTolerance)) return "3d: parameters differ from one process by " + std::to_string(diff);
            for (const StepStats& st : *steps)
              if (st.bytesSent != sent || st.bytesReceived != received) return "3d: bytes differ from the formula";
          }
          return "";
        },
        60);
    for (const RankOutcome& o : outcomes) std::cout << o.output;
    CHECK(summarize(outcomes) == "");
  }
}
