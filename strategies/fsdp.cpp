// FSDP: unit planning, the sharded step (gather, compute, free; reduce-scatter of gradients) and
// the accounting of the memory it holds against DDP's.
#include "strategies/fsdp.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"
#include "strategies/host_arena.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Bytes of the buffers alive only during the step, and their peak.
struct TransientMemory {
  uint64_t live = 0, peak = 0;
  void hold(size_t floats) {
    live += floats * sizeof(float);
    peak = std::max(peak, live);
  }
  void drop(size_t floats) { live -= floats * sizeof(float); }
};

// A unit's full temporary copy (gathered parameters, or gradients being reduce-scattered) and the
// asynchronous collective filling or draining it. Moving a vector keeps its storage in place.
struct FullCopy {
  std::vector<float> data;
  std::shared_ptr<Work> work;
};

// When something ran. Collectives write theirs on the progress thread; the training thread reads
// them only after Work::wait() returned, which orders the two.
struct Interval {
  Clock::time_point start, end;
};

// Queues `op` on the progress thread (what allGatherAsync and reduceScatterAsync do), recording
// when it ran so the step can tell how much of it the computation hid.
std::shared_ptr<Work> timed(Comm& comm, std::vector<std::shared_ptr<Interval>>& log, std::function<Status(Comm&)> op) {
  auto t = std::make_shared<Interval>();
  log.push_back(t);
  return comm.enqueue([t, op = std::move(op)](Comm& c) {
    t->start = Clock::now();
    Status s = op(c);
    t->end = Clock::now();
    return s;
  });
}

// Waits for every collective still attached to the copies when the step's scope ends (they fail
// fast once the communicator's error is sticky), so none writes into freed memory.
struct DrainOnExit {
  std::vector<std::vector<FullCopy>*> copies;
  ~DrainOnExit() {
    for (auto* list : copies)
      for (FullCopy& c : *list)
        if (c.work) (void)c.work->wait();
  }
};

// What one step holds: its report, the buffers alive only during it, the units' full copies, and
// when the collectives and the layers ran. Built in place: `drain` points at the copies.
struct FsdpStep {
  explicit FsdpStep(size_t units) : paramCopy(units), gradCopy(units) {}
  FsdpStep(const FsdpStep&) = delete;
  FsdpStep& operator=(const FsdpStep&) = delete;

  StepStats st;
  TransientMemory mem;
  const Clock::time_point t0 = Clock::now();
  std::vector<FullCopy> paramCopy, gradCopy;
  // On an early error return, collectives still queued must finish before their buffers go.
  DrainOnExit drain{{&paramCopy, &gradCopy}};
  std::vector<std::shared_ptr<Interval>> commLog;
  std::vector<Interval> computeLog;
};

// What every step of one run reads: this rank's shards of every unit (back to back), the
// optimizer, and the layers, rebound to each fresh full copy of their unit.
struct FsdpRun {
  FsdpRun(Comm& comm, const TrainConfig& config, Mlp& model);
  Result<StepStats> step(const SyntheticTask& task, int step);
  Status gatherModel();

  void bind(size_t u, float* p, float* g);
  Status wait(FsdpStep& s, const std::shared_ptr<Work>& w);
  void gather(FsdpStep& s, size_t u);
  Status pass(FsdpStep& s, const std::vector<size_t>& order, const std::function<void(size_t)>& compute);
  Result<Tensor> forward(FsdpStep& s, Tensor h);
  Status backward(FsdpStep& s, Tensor d);
  Status drainGradients(FsdpStep& s, Status passStatus);
  void account(FsdpStep& s) const;

  Comm& comm;
  const TrainConfig& config;
  Mlp& model;
  const int n, rank;
  const size_t rows;
  const MlpShape& shape;
  const size_t nb, hid;
  const std::vector<FsdpUnit> units;
  const size_t U;
  std::vector<size_t> shard, local;  // per unit: this rank's shard and where it starts
  size_t S = 0;
  std::vector<float> params, grads;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<HostArena> arena;
  // Unit 0 is the head, unit u ≥ 1 block nb-u.
  std::vector<Linear> fc;
  std::vector<Gelu> act;
  std::vector<LayerNorm> norm;
  Linear head;
  std::vector<size_t> backwardOrder, forwardOrder;
};

FsdpRun::FsdpRun(Comm& c, const TrainConfig& cfg, Mlp& m)
    : comm(c), config(cfg), model(m), n(c.size()), rank(c.rank()), rows(cfg.globalBatch / static_cast<size_t>(n)),
      shape(m.shape()), nb(shape.blocks), hid(shape.hidden), units(planFsdpUnits(m)), U(units.size()), shard(U),
      local(U), opt(configOptimizer(cfg)), fc(nb), act(nb), norm(nb), backwardOrder(U) {
  for (size_t u = 0; u < U; ++u) {
    shard[u] = fsdpShard(units[u].count, n);
    local[u] = S;
    S += shard[u];
  }
  params.assign(S, 0.0f);
  grads.assign(S, 0.0f);
  for (size_t u = 0; u < U; ++u)
    for (size_t k = 0; k < shard[u]; ++k) {
      const size_t idx = static_cast<size_t>(rank) * shard[u] + k;
      if (idx < units[u].count) params[local[u] + k] = model.paramData()[units[u].offset + idx];
    }
  if (config.offload) {
    arena = std::make_unique<HostArena>(S * opt->stateBytesPerParam() / sizeof(float));
    opt->bindState(arena->data());
  }
  for (size_t u = 0; u < U; ++u) backwardOrder[u] = u;
  forwardOrder.assign(backwardOrder.rbegin(), backwardOrder.rend());
}

void FsdpRun::bind(size_t u, float* p, float* g) {
  auto view = [](float* base, size_t at, size_t r, size_t c) {
    return base ? Tensor::view(base + at, r, c) : Tensor();
  };
  if (u == 0) {
    head.rebind(view(p, 0, hid, shape.out), view(p, hid * shape.out, 1, shape.out), view(g, 0, hid, shape.out),
                view(g, hid * shape.out, 1, shape.out));
    return;
  }
  const size_t i = nb - u, in = i == 0 ? shape.in : hid;
  norm[i].rebind(view(p, 0, 1, hid), view(p, hid, 1, hid), view(g, 0, 1, hid), view(g, hid, 1, hid));
  fc[i].rebind(view(p, 2 * hid, in, hid), view(p, 2 * hid + in * hid, 1, hid), view(g, 2 * hid, in, hid),
               view(g, 2 * hid + in * hid, 1, hid));
}

// Waits for a collective, counting the wait as exposed communication.
Status FsdpRun::wait(FsdpStep& s, const std::shared_ptr<Work>& w) {
  auto tw = Clock::now();
  Status status = w->wait();
  s.st.exposedSeconds += secondsSince(tw);
  return status;
}

// Starts gathering unit u's full parameters into its copy.
void FsdpRun::gather(FsdpStep& s, size_t u) {
  const size_t padded = shard[u] * static_cast<size_t>(n);
  s.paramCopy[u].data.assign(padded, 0.0f);
  s.mem.hold(padded);
  const float* from = params.data() + local[u];
  float* to = s.paramCopy[u].data.data();
  const size_t count = shard[u];
  s.paramCopy[u].work =
      timed(comm, s.commLog, [from, to, count](Comm& c) { return c.allGather(from, to, count, DataType::kFloat32); });
  s.st.bytesSent += ringGatherBytesSent(shard[u], n);
  s.st.bytesReceived += ringGatherBytesSent(shard[u], n);
}

// Runs the units of one pass in `order`: gather (prefetched), compute, free.
Status FsdpRun::pass(FsdpStep& s, const std::vector<size_t>& order, const std::function<void(size_t)>& compute) {
  gather(s, order[0]);
  for (size_t j = 0; j < order.size(); ++j) {
    const size_t u = order[j];
    FERRY_TRY(wait(s, s.paramCopy[u].work));
    if (config.prefetch && j + 1 < order.size()) gather(s, order[j + 1]);
    const auto c0 = Clock::now();
    compute(u);
    s.computeLog.push_back({c0, Clock::now()});
    s.mem.drop(s.paramCopy[u].data.size());
    s.paramCopy[u].data = std::vector<float>();
    if (!config.prefetch && j + 1 < order.size()) gather(s, order[j + 1]);
  }
  return Status();
}

Result<Tensor> FsdpRun::forward(FsdpStep& s, Tensor h) {
  FERRY_TRY(pass(s, forwardOrder, [&](size_t u) {
    bind(u, s.paramCopy[u].data.data(), nullptr);
    if (u == 0) {
      h = head.forward(h);
    } else {
      const size_t i = nb - u;
      h = norm[i].forward(act[i].forward(fc[i].forward(h)));
    }
  }));
  return h;
}

// The backward pass; each unit's gradients start their reduce-scatter as soon as they are computed.
Status FsdpRun::backward(FsdpStep& s, Tensor d) {
  return pass(s, backwardOrder, [&](size_t u) {
    const size_t padded = shard[u] * static_cast<size_t>(n);
    s.gradCopy[u].data.assign(padded, 0.0f);  // the padding's gradient stays 0
    s.mem.hold(padded);
    bind(u, s.paramCopy[u].data.data(), s.gradCopy[u].data.data());
    if (u == 0) {
      d = head.backward(d);
    } else {
      const size_t i = nb - u;
      d = fc[i].backward(act[i].backward(norm[i].backward(d)), i > 0);
    }
    // Average over ranks straight into this rank's gradient shard, while earlier units compute.
    const float* from = s.gradCopy[u].data.data();
    float* to = grads.data() + local[u];
    const size_t count = shard[u];
    s.gradCopy[u].work = timed(comm, s.commLog, [from, to, count](Comm& c) {
      return c.reduceScatter(from, to, count, DataType::kFloat32, RedOp::kAvg);
    });
    s.st.bytesSent += ringGatherBytesSent(shard[u], n);
    s.st.bytesReceived += ringGatherBytesSent(shard[u], n);
  });
}

// Waits for every reduce-scatter the backward pass started; the first error wins.
Status FsdpRun::drainGradients(FsdpStep& s, Status passStatus) {
  Status first = passStatus;
  for (size_t u = 0; u < U; ++u) {
    if (!s.gradCopy[u].work) continue;
    Status status = wait(s, s.gradCopy[u].work);
    if (!status.isOk() && first.isOk()) first = status;
    s.mem.drop(s.gradCopy[u].data.size());
    s.gradCopy[u].data = std::vector<float>();
  }
  return first;
}

// Busy time of the collectives, the part of it that ran while a layer computed, and the memory held.
void FsdpRun::account(FsdpStep& s) const {
  double busy = 0, hidden = 0;
  for (const auto& t : s.commLog) {
    busy += std::chrono::duration<double>(t->end - t->start).count();
    for (const Interval& c : s.computeLog) {
      const auto lo = std::max(t->start, c.start), hi = std::min(t->end, c.end);
      if (hi > lo) hidden += std::chrono::duration<double>(hi - lo).count();
    }
  }
  s.st.commSeconds = busy;
  s.st.overlapFraction = busy > 0 ? hidden / busy : 0;
  s.st.stateBytes = static_cast<uint64_t>(S) * 2 * sizeof(float) + (arena ? 0 : S * opt->stateBytesPerParam());
  s.st.peakStateBytes = s.st.stateBytes + s.mem.peak;
  s.st.offloadBytes = arena ? arena->bytes() : 0;
}

Result<StepStats> FsdpRun::step(const SyntheticTask& task, int step) {
  FsdpStep s(U);
  s.st.step = step;
  Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
  Batch mine = global.slice(rows * static_cast<size_t>(rank), rows);
  auto h = forward(s, mine.x);
  FERRY_TRY(h);
  LossResult loss = batchLoss(*h, mine, config.loss);
  s.st.loss = loss.loss;
  FERRY_TRY(drainGradients(s, backward(s, loss.grad)));
  opt->step(params.data(), grads.data(), S);
  account(s);
  s.st.stepSeconds = secondsSince(s.t0);
  return s.st;
}

// Leaves the whole trained model on every rank (outside the step accounting).
Status FsdpRun::gatherModel() {
  for (size_t u = 0; u < U; ++u) {
    std::vector<float> full(shard[u] * static_cast<size_t>(n));
    FERRY_TRY(comm.allGather(params.data() + local[u], full.data(), shard[u], DataType::kFloat32));
    std::copy(full.begin(), full.begin() + static_cast<long>(units[u].count), model.paramData() + units[u].offset);
  }
  return Status();
}

}  // namespace

std::vector<FsdpUnit> planFsdpUnits(const Mlp& model) {
  const std::vector<ParamSlot>& slots = model.params();
  std::vector<FsdpUnit> units;
  // Head: slots 0 and 1; then each block's four (γ, β, weight, bias), the last block first.
  for (size_t first = 0; first < slots.size();) {
    const size_t end = first == 0 ? 2 : first + 4;
    units.push_back(
        {first, end, slots[first].offset, slots[end - 1].offset + slots[end - 1].count - slots[first].offset});
    first = end;
  }
  return units;
}

uint64_t ddpStateBytes(size_t params, size_t optimizerBytesPerParam) {
  return static_cast<uint64_t>(params) * (2 * sizeof(float) + optimizerBytesPerParam);
}

Result<std::vector<StepStats>> trainFsdp(Comm& comm, const TrainConfig& config, Mlp& model,
                                         const StepCallback& onStep) {
  const int n = comm.size();
  if (config.globalBatch % static_cast<size_t>(n) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible by the %d ranks",
                     config.globalBatch, n);
  FsdpRun run(comm, config, model);
  SyntheticTask task(model.shape().in, model.shape().out, config.seed);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    auto st = run.step(task, step);
    FERRY_TRY(st);
    if (onStep) onStep(*st);
    all.push_back(*st);
  }
  FERRY_TRY(run.gatherModel());
  return all;
}

}  // namespace ferry::train
