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
std::shared_ptr<Work> timed(Comm& comm, std::vector<std::shared_ptr<Interval>>& log,
                            std::function<Status(Comm&)> op) {
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

}  // namespace

std::vector<FsdpUnit> planFsdpUnits(const Mlp& model) {
  const std::vector<ParamSlot>& slots = model.params();
  std::vector<FsdpUnit> units;
  // Head: slots 0 and 1; then each block's four (γ, β, weight, bias), the last block first.
  for (size_t first = 0; first < slots.size();) {
    const size_t end = first == 0 ? 2 : first + 4;
    units.push_back({first, end, slots[first].offset, slots[end - 1].offset + slots[end - 1].count - slots[first].offset});
    first = end;
  }
  return units;
}

uint64_t ddpStateBytes(size_t params, size_t optimizerBytesPerParam) {
  return static_cast<uint64_t>(params) * (2 * sizeof(float) + optimizerBytesPerParam);
}

Result<std::vector<StepStats>> trainFsdp(Comm& comm, const TrainConfig& config, Mlp& model, const StepCallback& onStep) {
  const int n = comm.size(), rank = comm.rank();
  if (config.globalBatch % static_cast<size_t>(n) != 0)
    return makeError(ErrorCode::kInvalidArgument, "global batch %zu is not divisible by the %d ranks",
                     config.globalBatch, n);
  const size_t rows = config.globalBatch / static_cast<size_t>(n);
  const MlpShape& shape = model.shape();
  const size_t nb = shape.blocks, hid = shape.hidden;
  const std::vector<FsdpUnit> units = planFsdpUnits(model);
  const size_t U = units.size();

  // This rank's shards of every unit, back to back.
  std::vector<size_t> shard(U), local(U);
  size_t S = 0;
  for (size_t u = 0; u < U; ++u) {
    shard[u] = fsdpShard(units[u].count, n);
    local[u] = S;
    S += shard[u];
  }
  std::vector<float> params(S, 0.0f), grads(S, 0.0f);
  for (size_t u = 0; u < U; ++u)
    for (size_t k = 0; k < shard[u]; ++k) {
      const size_t idx = static_cast<size_t>(rank) * shard[u] + k;
      if (idx < units[u].count) params[local[u] + k] = model.paramData()[units[u].offset + idx];
    }

  auto opt = configOptimizer(config);
  std::unique_ptr<HostArena> arena;
  if (config.offload) {
    arena = std::make_unique<HostArena>(S * opt->stateBytesPerParam() / sizeof(float));
    opt->bindState(arena->data());
  }

  // The layers, rebound to each fresh full copy of their unit. Unit 0 is the head, unit u ≥ 1 block nb-u.
  std::vector<Linear> fc(nb);
  std::vector<Gelu> act(nb);
  std::vector<LayerNorm> norm(nb);
  Linear head;
  auto view = [](float* base, size_t at, size_t r, size_t c) { return base ? Tensor::view(base + at, r, c) : Tensor(); };
  auto bind = [&](size_t u, float* p, float* g) {
    if (u == 0) {
      head.rebind(view(p, 0, hid, shape.out), view(p, hid * shape.out, 1, shape.out), view(g, 0, hid, shape.out),
                  view(g, hid * shape.out, 1, shape.out));
      return;
    }
    const size_t i = nb - u, in = i == 0 ? shape.in : hid;
    norm[i].rebind(view(p, 0, 1, hid), view(p, hid, 1, hid), view(g, 0, 1, hid), view(g, hid, 1, hid));
    fc[i].rebind(view(p, 2 * hid, in, hid), view(p, 2 * hid + in * hid, 1, hid), view(g, 2 * hid, in, hid),
                 view(g, 2 * hid + in * hid, 1, hid));
  };

  SyntheticTask task(shape.in, shape.out, config.seed);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
    TransientMemory mem;
    auto t0 = Clock::now();
    auto wait = [&](const std::shared_ptr<Work>& w) {
      auto tw = Clock::now();
      Status s = w->wait();
      st.exposedSeconds += secondsSince(tw);
      return s;
    };
    std::vector<FullCopy> paramCopy(U), gradCopy(U);
    // On an early error return, collectives still queued must finish before their buffers go.
    DrainOnExit drain{{&paramCopy, &gradCopy}};
    std::vector<std::shared_ptr<Interval>> commLog;
    std::vector<Interval> computeLog;
    auto gather = [&](size_t u) {
      const size_t padded = shard[u] * static_cast<size_t>(n);
      paramCopy[u].data.assign(padded, 0.0f);
      mem.hold(padded);
      const float* from = params.data() + local[u];
      float* to = paramCopy[u].data.data();
      const size_t count = shard[u];
      paramCopy[u].work = timed(comm, commLog, [from, to, count](Comm& c) {
        return c.allGather(from, to, count, DataType::kFloat32);
      });
      st.bytesSent += ringGatherBytesSent(shard[u], n);
      st.bytesReceived += ringGatherBytesSent(shard[u], n);
    };
    auto release = [&](size_t u) {
      mem.drop(paramCopy[u].data.size());
      paramCopy[u].data = std::vector<float>();
    };
    // Runs the units of one pass in `order`: gather (prefetched), compute, free.
    auto pass = [&](const std::vector<size_t>& order, const std::function<void(size_t)>& compute) -> Status {
      gather(order[0]);
      for (size_t j = 0; j < order.size(); ++j) {
        const size_t u = order[j];
        FERRY_TRY(wait(paramCopy[u].work));
        if (config.prefetch && j + 1 < order.size()) gather(order[j + 1]);
        const auto c0 = Clock::now();
        compute(u);
        computeLog.push_back({c0, Clock::now()});
        release(u);
        if (!config.prefetch && j + 1 < order.size()) gather(order[j + 1]);
      }
      return Status();
    };
    std::vector<size_t> backwardOrder(U);
    for (size_t u = 0; u < U; ++u) backwardOrder[u] = u;
    std::vector<size_t> forwardOrder(backwardOrder.rbegin(), backwardOrder.rend());

    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    Batch mine = global.slice(rows * static_cast<size_t>(rank), rows);
    Tensor h = mine.x;
    FERRY_TRY(pass(forwardOrder, [&](size_t u) {
      bind(u, paramCopy[u].data.data(), nullptr);
      if (u == 0) {
        h = head.forward(h);
      } else {
        const size_t i = nb - u;
        h = norm[i].forward(act[i].forward(fc[i].forward(h)));
      }
    }));
    LossResult loss = batchLoss(h, mine, config.loss);
    st.loss = loss.loss;
    Tensor d = loss.grad;
    Status passStatus = pass(backwardOrder, [&](size_t u) {
      const size_t padded = shard[u] * static_cast<size_t>(n);
      gradCopy[u].data.assign(padded, 0.0f);  // the padding's gradient stays 0
      mem.hold(padded);
      bind(u, paramCopy[u].data.data(), gradCopy[u].data.data());
      if (u == 0) {
        d = head.backward(d);
      } else {
        const size_t i = nb - u;
        d = fc[i].backward(act[i].backward(norm[i].backward(d)), i > 0);
      }
      // Average over ranks straight into this rank's gradient shard, while earlier units compute.
      const float* from = gradCopy[u].data.data();
      float* to = grads.data() + local[u];
      const size_t count = shard[u];
      gradCopy[u].work = timed(comm, commLog, [from, to, count](Comm& c) {
        return c.reduceScatter(from, to, count, DataType::kFloat32, RedOp::kAvg);
      });
      st.bytesSent += ringGatherBytesSent(shard[u], n);
      st.bytesReceived += ringGatherBytesSent(shard[u], n);
    });
    Status first = passStatus;
    for (size_t u = 0; u < U; ++u) {
      if (!gradCopy[u].work) continue;
      Status s = wait(gradCopy[u].work);
      if (!s.isOk() && first.isOk()) first = s;
      mem.drop(gradCopy[u].data.size());
      gradCopy[u].data = std::vector<float>();
    }
    FERRY_TRY(first);
    opt->step(params.data(), grads.data(), S);

    // Busy time of the collectives, and the part of it that ran while a layer computed.
    double busy = 0, hidden = 0;
    for (const auto& t : commLog) {
      busy += std::chrono::duration<double>(t->end - t->start).count();
      for (const Interval& c : computeLog) {
        const auto lo = std::max(t->start, c.start), hi = std::min(t->end, c.end);
        if (hi > lo) hidden += std::chrono::duration<double>(hi - lo).count();
      }
    }
    st.commSeconds = busy;
    st.overlapFraction = busy > 0 ? hidden / busy : 0;
    st.stateBytes = static_cast<uint64_t>(S) * 2 * sizeof(float) + (arena ? 0 : S * opt->stateBytesPerParam());
    st.peakStateBytes = st.stateBytes + mem.peak;
    st.offloadBytes = arena ? arena->bytes() : 0;
    st.stepSeconds = secondsSince(t0);
    if (onStep) onStep(st);
    all.push_back(st);
  }

  // Leave the whole trained model on every rank (outside the step accounting).
  for (size_t u = 0; u < U; ++u) {
    std::vector<float> full(shard[u] * static_cast<size_t>(n));
    FERRY_TRY(comm.allGather(params.data() + local[u], full.data(), shard[u], DataType::kFloat32));
    std::copy(full.begin(), full.begin() + static_cast<long>(units[u].count), model.paramData() + units[u].offset);
  }
  return all;
}

}  // namespace ferry::train
