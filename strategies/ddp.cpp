// DDP: bucket planning, the readiness hook that queues each bucket's all-reduce during backward,
// and the measurement of how much of that communication backward hid.
#include "strategies/ddp.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// When one bucket's all-reduce ran on the progress thread. Written there, read by the training
// thread only after Work::wait() returned (which orders the two).
struct BucketTiming {
  Clock::time_point start, end;
};

}  // namespace

std::vector<Bucket> planBuckets(const std::vector<ParamSlot>& params, size_t bucketBytes) {
  std::vector<Bucket> buckets;
  Bucket cur;
  for (size_t p = 0; p < params.size(); ++p) {
    if (cur.endParam == cur.firstParam) cur = {p, p, params[p].offset, 0};
    cur.endParam = p + 1;
    cur.count += params[p].count;
    if (cur.count * sizeof(float) >= bucketBytes) {
      buckets.push_back(cur);
      cur = {p + 1, p + 1, 0, 0};
    }
  }
  if (cur.endParam > cur.firstParam) buckets.push_back(cur);
  return buckets;
}

namespace {

// What every step of a DDP run shares.
struct DdpRun {
  const TrainConfig& config;
  Mlp& model;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucketOf;  // parameter -> bucket
  SyntheticTask task;
  std::unique_ptr<Optimizer> opt;

  DdpRun(const TrainConfig& c, Mlp& m)
      : config(c), model(m), buckets(planBuckets(m.params(), c.bucketBytes)), bucketOf(m.params().size()),
        task(c.shape.in, c.shape.out, c.seed), opt(configOptimizer(c)) {
    for (size_t b = 0; b < buckets.size(); ++b)
      for (size_t p = buckets[b].firstParam; p < buckets[b].endParam; ++p) bucketOf[p] = b;
  }

  Status checkBatch(const Comm& comm) const {
    if (config.globalBatch % static_cast<size_t>(comm.size()) != 0)
      return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible by the %d ranks",
                       config.globalBatch, comm.size());
    return Status::ok();
  }

  /// One step on `comm`: gradients of this rank's shard, bucketed all-reduces during backward,
  /// then the optimizer, which runs only once every bucket arrived (a failed step leaves the
  /// parameters as they were).
  Result<StepStats> step(Comm& comm, int step, const std::function<void(int)>& midStep) {
    const int n = comm.size(), rank = comm.rank();
    const size_t shard = config.globalBatch / static_cast<size_t>(n);
    const size_t P = model.paramCount();
    StepStats st;
    st.step = step;
    st.ranks = n;
    st.buckets = static_cast<int>(buckets.size());
    auto t0 = Clock::now();
    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    Batch mine = global.slice(shard * static_cast<size_t>(rank), shard);

    std::vector<size_t> pending(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) pending[b] = buckets[b].endParam - buckets[b].firstParam;
    auto timing = std::make_shared<std::vector<BucketTiming>>(buckets.size());
    std::vector<std::shared_ptr<Work>> works;
    auto ready = [&](size_t p) {
      const size_t b = bucketOf[p];
      if (--pending[b] != 0) return;
      if (works.empty() && midStep) midStep(step);
      float* g = model.gradData() + buckets[b].offset;
      const size_t count = buckets[b].count;
      // enqueue rather than allReduceAsync, to time the all-reduce where it runs.
      works.push_back(comm.enqueue([g, count, b, timing](Comm& c) {
        (*timing)[b].start = Clock::now();
        Status s = c.allReduce(g, g, count, DataType::kFloat32, RedOp::kAvg);
        (*timing)[b].end = Clock::now();
        return s;
      }));
      st.bytesSent += ringAllReduceBytesSent(count, n, rank);
      st.bytesReceived += ringAllReduceBytesReceived(count, n, rank);
    };
    // No bucket can start before backward does, so overlap with forward + backward is overlap with backward.
    const auto computeStart = Clock::now();
    st.loss = localGradients(model, mine, config.loss, ready);
    const auto backwardEnd = Clock::now();
    Status first;
    for (auto& w : works) {
      Status s = w->wait();
      if (!s.isOk() && first.isOk()) first = s;
    }
    const auto commEnd = Clock::now();
    FERRY_TRY(first);

    double busy = 0, hidden = 0;
    for (const BucketTiming& t : *timing) {
      busy += seconds(t.start, t.end);
      auto lo = std::max(t.start, computeStart), hi = std::min(t.end, backwardEnd);
      if (hi > lo) hidden += seconds(lo, hi);
    }
    st.commSeconds = busy;
    st.exposedSeconds = seconds(backwardEnd, commEnd);
    st.overlapFraction = busy > 0 ? hidden / busy : 0;
    opt->step(model.paramData(), model.gradData(), P);
    // A whole replica of parameters, gradients and optimizer state, held all the time.
    st.stateBytes = st.peakStateBytes = static_cast<uint64_t>(P) * (2 * sizeof(float) + opt->stateBytesPerParam());
    st.stepSeconds = seconds(t0, Clock::now());
    return st;
  }
};

}  // namespace

Result<std::vector<StepStats>> trainDdp(Comm& comm, const TrainConfig& config, Mlp& model, const StepCallback& onStep) {
  DdpRun run(config, model);
  FERRY_TRY(run.checkBatch(comm));
  // Same starting point everywhere, whatever each rank's initialization did.
  FERRY_TRY(comm.broadcast(model.paramData(), model.paramData(), model.paramCount(), DataType::kFloat32, 0));
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    auto st = run.step(comm, step, nullptr);
    FERRY_TRY(st);
    if (onStep) onStep(*st);
    all.push_back(*st);
  }
  return all;
}

Result<std::vector<StepStats>> trainDdpElastic(std::unique_ptr<Comm>& comm, const TrainConfig& config, Mlp& model,
                                               const StepCallback& onStep, const ElasticOptions& elastic) {
  DdpRun run(config, model);
  FERRY_TRY(run.checkBatch(*comm));
  const size_t P = model.paramCount();
  FERRY_TRY(comm->broadcast(model.paramData(), model.paramData(), P, DataType::kFloat32, 0));
  // The state before step s is kept in slot s % 2: a rank one step ahead of another can go back.
  std::vector<float> params[2] = {std::vector<float>(P), std::vector<float>(P)};
  std::unique_ptr<Optimizer> opts[2];
  std::vector<StepStats> all;
  int shrinks = 0;
  for (int step = 0; step < config.steps;) {
    std::copy(model.paramData(), model.paramData() + P, params[step % 2].begin());
    opts[step % 2] = run.opt->clone();
    auto st = run.step(*comm, step, elastic.midStep);
    if (st.isOk()) {
      if (onStep) onStep(*st);
      all.push_back(*st);
      ++step;
      continue;
    }
    if (shrinks == elastic.maxShrinks) return st.status();
    ++shrinks;
    auto shrunk = comm->shrink();
    if (!shrunk.isOk()) {
      return makeError(shrunk.status().code(), "step %d failed (%s), and the survivors could not shrink: %s", step,
                       st.status().message().c_str(), shrunk.status().message().c_str());
    }
    comm = std::move(*shrunk);
    if (elastic.onShrink) elastic.onShrink(step, st.status(), *comm);
    FERRY_TRY(run.checkBatch(*comm));
    // Each survivor failed in its step `step`; the agreed one is the earliest. A rank whose step
    // before it completed while another's failed (the dead rank left mid-way) goes back one.
    int64_t mine = step, agreed = 0;
    FERRY_TRY(comm->allReduce(&mine, &agreed, 1, DataType::kInt64, RedOp::kMin));
    if (agreed < step - 1 || agreed > step) {
      return makeError(ErrorCode::kInternalError, "rank %d failed at step %d but the survivors agree on step %lld",
                       comm->rank(), step, static_cast<long long>(agreed));
    }
    if (agreed < step) {
      const int back = static_cast<int>(agreed);
      std::copy(params[back % 2].begin(), params[back % 2].end(), model.paramData());
      run.opt = opts[back % 2]->clone();
      while (!all.empty() && all.back().step >= back) all.pop_back();
      step = back;
    }
  }
  return all;
}

}  // namespace ferry::train
