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

Result<std::vector<StepStats>> trainDdp(Comm& comm, const TrainConfig& config, Mlp& model, const StepCallback& onStep) {
  const int n = comm.size(), rank = comm.rank();
  if (config.globalBatch % static_cast<size_t>(n) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible by the %d ranks",
                     config.globalBatch, n);
  const size_t shard = config.globalBatch / static_cast<size_t>(n);
  const size_t P = model.paramCount();
  // Same starting point everywhere, whatever each rank's initialization did.
  FERRY_TRY(comm.broadcast(model.paramData(), model.paramData(), P, DataType::kFloat32, 0));

  const std::vector<Bucket> buckets = planBuckets(model.params(), config.bucketBytes);
  std::vector<size_t> bucketOf(model.params().size());
  for (size_t b = 0; b < buckets.size(); ++b)
    for (size_t p = buckets[b].firstParam; p < buckets[b].endParam; ++p) bucketOf[p] = b;

  SyntheticTask task(config.shape.in, config.shape.out, config.seed);
  auto opt = configOptimizer(config);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
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
    if (onStep) onStep(st);
    all.push_back(st);
  }
  return all;
}

}  // namespace ferry::train
