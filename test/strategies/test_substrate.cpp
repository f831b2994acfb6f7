// The training substrate on its own: every hand-written backward pass against finite differences,
// the optimizers against hand-computed updates, the data generator's determinism, DDP's bucket
// plan, and the identity data parallelism rests on (the mean of shard gradients is the gradient
// of the whole batch).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "strategies/data.hpp"
#include "strategies/ddp.hpp"
#include "strategies/ffn.hpp"
#include "strategies/moe.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/trainer.hpp"

using namespace ferry::train;

namespace {

const MlpShape kShape{5, 7, 3};

float lossOnly(Mlp& m, Batch& b, LossKind kind) {
  Tensor y = m.forward(b.x);
  return kind == LossKind::kCrossEntropy ? softmaxCrossEntropy(y, b.labels).loss : meanSquaredError(y, b.targets).loss;
}

}  // namespace

TEST_CASE("backward passes match finite differences", "[unit]") {
  for (LossKind kind : {LossKind::kCrossEntropy, LossKind::kMeanSquaredError}) {
    const size_t blocks = kind == LossKind::kCrossEntropy ? 1 : 2;
    Mlp m(MlpShape{kShape.in, kShape.hidden, kShape.out, blocks}, 7);
    SyntheticTask task(kShape.in, kShape.out, 3);
    Batch b = task.batch(0, 4);
    // Non-trivial γ and β so their gradients are exercised away from the initial values.
    for (size_t i = 0; i < m.paramCount(); ++i) m.paramData()[i] += 0.05f * std::sin(static_cast<float>(i));
    localGradients(m, b, kind);
    std::vector<float> analytic(m.gradData(), m.gradData() + m.paramCount());
    for (const ParamSlot& slot : m.params()) {
      for (size_t k = 0; k < slot.count; k += 3) {
        const size_t i = slot.offset + k;
        const float h = 1e-2f, saved = m.paramData()[i];
        m.paramData()[i] = saved + h;
        float up = lossOnly(m, b, kind);
        m.paramData()[i] = saved - h;
        float down = lossOnly(m, b, kind);
        m.paramData()[i] = saved;
        const double numeric = (static_cast<double>(up) - down) / (2.0 * h);
        INFO((kind == LossKind::kCrossEntropy ? "cross-entropy " : "mse ") << slot.name << "[" << k << "]");
        CHECK(std::abs(numeric - analytic[i]) <= 2e-3 + 2e-2 * std::abs(numeric));
      }
    }
  }
}

TEST_CASE("optimizers take the textbook steps", "[unit]") {
  float p = 1.0f;
  const float g = 0.5f;
  Sgd sgd(0.1f);
  sgd.step(&p, &g, 1);
  CHECK(p == Approx(0.95f));
  Sgd momentum(0.1f, 0.9f);
  p = 1.0f;
  momentum.step(&p, &g, 1);  // v = 0.5
  momentum.step(&p, &g, 1);  // v = 0.95
  CHECK(p == Approx(1.0f - 0.05f - 0.095f));
  Adam adam(0.1f);
  p = 1.0f;
  adam.step(&p, &g, 1);  // bias-corrected m̂ = g, v̂ = g²: the first step is lr·sign(g)
  CHECK(p == Approx(0.9f).epsilon(1e-6));
  CHECK(makeOptimizer("adagrad", 0.1f) == nullptr);
}

TEST_CASE("synthetic batches depend only on seed and step", "[unit]") {
  SyntheticTask a(kShape.in, kShape.out, 11), b(kShape.in, kShape.out, 11);
  Batch x = a.batch(4, 6), y = b.batch(4, 6), z = a.batch(5, 6);
  CHECK(relativeDifference(x.x.data(), y.x.data(), x.x.size()) == 0);
  CHECK(x.labels == y.labels);
  CHECK(relativeDifference(x.x.data(), z.x.data(), x.x.size()) > 0.1);
  Batch part = x.slice(2, 3);
  CHECK(part.rows() == 3);
  CHECK(part.x.at(0, 1) == x.x.at(2, 1));
  CHECK(part.labels[2] == x.labels[4]);
}

TEST_CASE("DDP buckets cover the gradients in order", "[unit]") {
  Mlp m(kShape, 1);
  for (size_t bytes : {size_t{1}, size_t{64}, size_t{200}, size_t{1} << 20}) {
    auto buckets = planBuckets(m.params(), bytes);
    INFO("bucket bytes " << bytes);
    size_t next = 0, param = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      CHECK(buckets[b].offset == next);
      CHECK(buckets[b].firstParam == param);
      CHECK(buckets[b].endParam > buckets[b].firstParam);
      if (b + 1 < buckets.size()) CHECK(buckets[b].count * sizeof(float) >= bytes);
      next += buckets[b].count;
      param = buckets[b].endParam;
    }
    CHECK(next == m.paramCount());
    CHECK(param == m.params().size());
    if (bytes == 1) CHECK(buckets.size() == m.params().size());
    if (bytes == (size_t{1} << 20)) CHECK(buckets.size() == 1);
  }
}

TEST_CASE("the mean of shard gradients is the whole batch's gradient", "[unit]") {
  for (LossKind kind : {LossKind::kCrossEntropy, LossKind::kMeanSquaredError}) {
    Mlp m(kShape, 5);
    SyntheticTask task(kShape.in, kShape.out, 9);
    Batch whole = task.batch(0, 12);
    localGradients(m, whole, kind);
    std::vector<float> full(m.gradData(), m.gradData() + m.paramCount());
    std::vector<double> mean(m.paramCount(), 0.0);
    for (size_t s = 0; s < 4; ++s) {
      Batch part = whole.slice(3 * s, 3);
      localGradients(m, part, kind);
      for (size_t i = 0; i < mean.size(); ++i) mean[i] += m.gradData()[i] / 4.0;
    }
    std::vector<float> meanF(mean.begin(), mean.end());
    CHECK(relativeDifference(meanF.data(), full.data(), full.size()) < 1e-6);
  }
}

namespace {

// Central differences of `loss` over every third float of `params` against `analytic`.
void checkGradients(const char* what, float* params, const std::vector<float>& analytic, size_t n,
                    const std::function<float()>& loss) {
  for (size_t i = 0; i < n; i += 3) {
    const float h = 1e-2f, saved = params[i];
    params[i] = saved + h;
    const float up = loss();
    params[i] = saved - h;
    const float down = loss();
    params[i] = saved;
    const double numeric = (static_cast<double>(up) - down) / (2.0 * h);
    INFO(what << " float " << i);
    CHECK(std::abs(numeric - analytic[i]) <= 2e-3 + 2e-2 * std::abs(numeric));
  }
}

}  // namespace

TEST_CASE("FFN model backward matches finite differences", "[unit]") {
  FfnShape shape{5, 6, 8, 3, 2};
  FfnModel m(shape, FfnPart{}, 5);
  for (size_t i = 0; i < m.paramCount(); ++i) m.paramData()[i] += 0.05f * std::sin(static_cast<float>(i));
  SyntheticTask task(shape.in, shape.out, 3);
  Batch b = task.batch(0, 4);
  auto loss = [&](bool backward) {
    FfnPass pass(m, m.gradData());
    LossResult r = softmaxCrossEntropy(*pass.forward(b.x), b.labels);
    if (backward) (void)pass.backward(r.grad);
    return r.loss;
  };
  loss(true);
  std::vector<float> analytic(m.gradData(), m.gradData() + m.paramCount());
  checkGradients("ffn", m.paramData(), analytic, m.paramCount(), [&] { return loss(false); });
}

TEST_CASE("MoE layer backward matches finite differences", "[unit]") {
  for (size_t k : {size_t{1}, size_t{2}}) {
    TrainConfig c;
    c.shape = {5, 6, 3};
    c.ffn = 8;
    c.experts = 4;
    c.topK = k;
    c.capacityFactor = 1.0f;  // some tokens dropped
    c.auxWeight = 0.1f;
    MoeModel m(c, 0, 1);
    SyntheticTask task(5, 3, 3);
    Batch b = task.batch(0, 16);
    MoeRouting routing;
    moeGradients(c, m, b, 2, &routing);
    CHECK(routing.dropped > 0);
    std::vector<float> shared = m.sharedGrad(), experts = m.expertGrads();
    auto loss = [&] { return moeGradients(c, m, b, 2); };
    checkGradients(k == 1 ? "moe top-1 shared" : "moe top-2 shared", m.shared().data(), shared, shared.size(), loss);
    checkGradients(k == 1 ? "moe top-1 experts" : "moe top-2 experts", m.expertParams().data(), experts, experts.size(),
                   loss);
  }
}

TEST_CASE("pipeline schedules", "[unit]") {
  // 1F1B on stage 0 of 3 with 4 micro-batches: two warm-up forwards, then alternate, then drain.
  std::string s;
  for (const PipelineAction& a : pipelineActions(PipelineSchedule::kOneFOneB, 0, 3, 4))
    s += (a.forward ? "F" : "B") + std::to_string(a.micro) + " ";
  CHECK(s == "F0 F1 F2 B0 F3 B1 B2 B3 ");
  s.clear();
  for (const PipelineAction& a : pipelineActions(PipelineSchedule::kGPipe, 2, 3, 2))
    s += (a.forward ? "F" : "B") + std::to_string(a.micro) + " ";
  CHECK(s == "F0 F1 B0 B1 ");
  // Every schedule runs each micro-batch's forward once, before its backward.
  for (auto sched : {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB})
    for (int stage = 0; stage < 4; ++stage) {
      std::vector<int> seen(6, 0);
      for (const PipelineAction& a : pipelineActions(sched, stage, 4, 6)) {
        if (a.forward) CHECK(seen[a.micro]++ == 0);
        else CHECK(seen[a.micro]++ == 1);
      }
      for (int v : seen) CHECK(v == 2);
    }
}
