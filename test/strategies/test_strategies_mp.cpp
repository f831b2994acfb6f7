// Each strategy on 2 and 4 real processes over UCX: after K steps every rank's parameters equal
// those of one process trained on the same global batches (relative difference under 1e-5), and
// the bytes each rank sent and received per step equal the strategy's formula (strategies/cost.hpp),
// as do the bytes of all ranks together. Each rank prints its numbers; the test prints them all.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

#include "strategies/cost.hpp"
#include "strategies/ddp.hpp"
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
                           (config.loss == LossKind::kCrossEntropy ? ", cross-entropy" : ", mse") +
                           ", " + std::to_string(config.shape.blocks) + " block(s)" +
                           (name == "ddp" ? ", bucket " + std::to_string(config.bucketBytes) + " B" : "") + ")";
  std::printf("%s n=%d rank %d: %zu params, %d steps, relative difference %.3g; bytes/step sent %" PRIu64
              " (formula %" PRIu64 "), received %" PRIu64 " (formula %" PRIu64 "), all ranks %" PRIu64
              " (formula %" PRIu64 ")\n",
              what.c_str(), n, rank, P, config.steps, diff, steps->back().bytesSent, sent,
              steps->back().bytesReceived, received, allSent, total);
  std::fflush(stdout);
  if (!(diff < kTolerance)) return name + ": parameters differ from one process by " + std::to_string(diff);
  if (steps->size() != static_cast<size_t>(config.steps)) return name + ": wrong number of step reports";
  for (const StepStats& st : *steps) {
    if (st.bytesSent != sent || st.bytesReceived != received)
      return name + ": step " + std::to_string(st.step) + " moved " + std::to_string(st.bytesSent) + "/" +
             std::to_string(st.bytesReceived) + " bytes, formula " + std::to_string(sent) + "/" +
             std::to_string(received);
  }
  if (allSent != total) return name + ": all ranks sent " + std::to_string(allSent) + ", formula " + std::to_string(total);
  return "";
}

void runEverywhere(const std::string& name, const std::vector<TrainConfig>& configs, const Strategy& strategy,
                   const Formula& formula) {
  for (int n : kWorlds) {
    INFO(name << " on " << n << " ranks");
    auto outcomes = runRanks(n, [&](Comm& c) -> std::string {
      for (const TrainConfig& config : configs) {
        std::string err = runStrategy(c, name, config, strategy, formula);
        if (!err.empty()) return err;
      }
      return "";
    }, 60);
    for (const RankOutcome& o : outcomes) std::cout << o.output;
    CHECK(summarize(outcomes) == "");
  }
}

TrainConfig baseConfig() {
  TrainConfig c;
  c.shape = {16, 30, 5};  // 725 parameters: ring segments of unequal size on 2 and 4 ranks
  c.globalBatch = 24;  // divisible by 1, 2, 3 and 4 shards
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
  runEverywhere("ps", {adam, sgd},
                [](Comm& c, const TrainConfig& cfg, Mlp& m) { return trainParameterServer(c, cfg, m); },
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
  runEverywhere("ddp", configs, [](Comm& c, const TrainConfig& cfg, Mlp& m) { return trainDdp(c, cfg, m); },
                [](const TrainConfig& cfg, size_t P, int n, int rank, uint64_t& sent, uint64_t& received,
                   uint64_t& total) {
                  Mlp shape(cfg.shape, cfg.seed);
                  sent = received = 0;
                  for (const Bucket& b : planBuckets(shape.params(), cfg.bucketBytes)) {
                    sent += ringAllReduceBytesSent(b.count, n, rank);
                    received += ringAllReduceBytesReceived(b.count, n, rank);
                  }
                  total = ringAllReduceBytesTotal(P, n);
                });
}
