// The replay (replay.hpp has the model).
#include "tools/ferry_sim/replay.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>

namespace ferry::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Events this close are one batch: rounding must not split ranks that move in step.
constexpr double kTimeEps = 1e-12;

struct Flow {
  int src;         // simulated sender
  uint32_t req;    // the sender's request
  uint64_t key;    // message key (replay.hpp, "Symmetry")
  uint64_t index;  // position among the key's messages
  double remaining;
  double rate;
  double latency;
  uint32_t pathBegin;
  uint32_t pathLen;
};

// A message of one key: whether it arrived, and the receive that takes it once posted.
struct Slot {
  bool arrived = false;
  bool posted = false;
  int rank = -1;
  uint32_t req = 0;
};

struct KeyState {
  std::vector<Slot> slots;  // slots[i - head] is message base + i
  size_t head = 0;
  uint64_t base = 0;
  uint64_t sends = 0;
  uint64_t recvs = 0;
  // Messages of one pair leave one after another, as over one connection: the one on the wire,
  // and those queued behind it.
  int draining = -1;
  std::vector<int> queued;
  size_t queuedHead = 0;
};

struct Event {
  double time;
  int kind;  // 0: a message arrives (a = flow), 1: a computation ends (a = rank)
  int a;
  bool operator>(const Event& o) const { return time > o.time; }
};

struct RankState {
  size_t pc = 0;
  int64_t blockedOn = -1;
  bool busy = false;
  bool finished = false;
  double end = 0;
  std::vector<uint8_t> done;
};

class Replayer {
 public:
  Replayer(const Fabric& fabric, const std::vector<Program>& programs, int n, const ComputeRates& rates, Fold fold)
      : fabric_(fabric), programs_(programs), n_(n), p_(static_cast<int>(programs.size())), fold_(fold), rates_(rates),
        ranks_(programs.size()) {
    const int links = fabric.links();
    capacity_.resize(static_cast<size_t>(links));
    for (int l = 0; l < links; ++l) capacity_[static_cast<size_t>(l)] = fabric.capacity(l);
    count_.assign(static_cast<size_t>(links), 0);
    rem_.assign(static_cast<size_t>(links), 0);
    size_t requests = 0;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].done.assign(programs[r].requests, 0);
      requests += programs[r].requests;
    }
    keys_.reserve(requests / 2 + 16);
    flows_.reserve(requests / 2 + 16);
  }

  /// Post every rank's first ops and return the flows' rates (maxMinRates).
  std::vector<double> firstRates() {
    for (int r = 0; r < p_; ++r) step(r);
    computeRates();
    std::vector<double> out;
    for (const Flow& f : flows_) out.push_back(f.rate);
    return out;
  }

  ReplayResult run() {
    for (int r = 0; r < p_; ++r) runnable_.push_back(r);
    for (;;) {
      while (!runnable_.empty()) {
        const int r = runnable_.back();
        runnable_.pop_back();
        step(r);
      }
      if (dirty_) {
        computeRates();
        ++result_.batches;
        dirty_ = false;
      }
      double next = events_.empty() ? kInf : events_.top().time;
      for (int f : active_) {
        const Flow& fl = flows_[static_cast<size_t>(f)];
        next = std::min(next, fl.rate == kInf ? now_ : now_ + fl.remaining / fl.rate);
      }
      if (next == kInf) break;
      advance(next);
    }
    result_.complete = true;
    for (const RankState& s : ranks_) {
      result_.complete = result_.complete && s.finished;
      result_.seconds = std::max(result_.seconds, s.end);
    }
    result_.flows = flows_.size();
    return result_;
  }

 private:
  uint64_t key(int srcSim, int dstSim, int delta) const {
    return (static_cast<uint64_t>(srcSim) * static_cast<uint64_t>(p_) + static_cast<uint64_t>(dstSim)) *
               static_cast<uint64_t>(n_) +
           static_cast<uint64_t>(delta);
  }
  // The key's third part: where the receiver sits relative to the sender.
  int delta(int sender, int receiver) const {
    if (fold_ == Fold::kXor) return sender ^ receiver;
    return static_cast<int>(((static_cast<int64_t>(receiver) - sender) % n_ + n_) % n_);
  }

  // Run rank r's ops until it blocks or ends.
  void step(int r) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    const std::vector<Op>& ops = programs_[static_cast<size_t>(r)].ops;
    while (s.pc < ops.size()) {
      const Op& op = ops[s.pc];
      switch (op.kind) {
        case Op::Kind::kSend: send(r, op); break;
        case Op::Kind::kRecv: recv(r, op); break;
        case Op::Kind::kWait:
          if (!s.done[op.req]) {
            s.blockedOn = op.req;
            return;
          }
          break;
        case Op::Kind::kReduce:
        case Op::Kind::kCopy: {
          const double rate = op.kind == Op::Kind::kReduce ? rates_.reduce : rates_.copy;
          if (rate > 0 && op.bytes > 0) {
            ++s.pc;
            s.busy = true;
            events_.push({now_ + static_cast<double>(op.bytes) / rate, 1, r});
            return;
          }
          break;
        }
      }
      ++s.pc;
    }
    s.finished = true;
    s.end = now_;
  }

  void complete(int r, uint32_t req) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    s.done[req] = 1;
    if (s.blockedOn == static_cast<int64_t>(req)) {
      s.blockedOn = -1;
      runnable_.push_back(r);
    }
  }

  void send(int r, const Op& op) {
    const int dstSim = op.peer % p_;
    const uint64_t k = key(r, dstSim, delta(r, op.peer));
    KeyState& ks = keys_[k];
    Flow f{r, op.req, k, ks.sends++, static_cast<double>(op.bytes), 0, 0, static_cast<uint32_t>(pool_.size()), 0};
    const size_t before = pool_.size();
    f.latency = fabric_.route(r, op.peer, pool_);
    f.pathLen = static_cast<uint32_t>(pool_.size() - before);
    flows_.push_back(f);
    const int id = static_cast<int>(flows_.size() - 1);
    if (ks.draining >= 0) {
      ks.queued.push_back(id);
    } else {
      ks.draining = id;
      active_.push_back(id);
      dirty_ = true;
    }
  }

  // The pair's next message goes on the wire once the previous one left.
  void nextOnWire(uint64_t key) {
    KeyState& ks = keys_[key];
    ks.draining = -1;
    if (ks.queuedHead < ks.queued.size()) {
      ks.draining = ks.queued[ks.queuedHead++];
      active_.push_back(ks.draining);
      if (ks.queuedHead == ks.queued.size()) {
        ks.queued.clear();
        ks.queuedHead = 0;
      }
    }
  }

  // Messages of a key are mostly matched as they come: the vector stays short and allocates once.
  Slot& slot(KeyState& ks, uint64_t index) {
    while (ks.base + (ks.slots.size() - ks.head) <= index) ks.slots.emplace_back();
    return ks.slots[ks.head + (index - ks.base)];
  }
  void retire(KeyState& ks) {
    while (ks.head < ks.slots.size() && ks.slots[ks.head].arrived && ks.slots[ks.head].posted) {
      ++ks.head;
      ++ks.base;
    }
    if (ks.head == ks.slots.size()) {
      ks.slots.clear();
      ks.head = 0;
    }
  }

  void recv(int r, const Op& op) {
    const uint64_t k = key(op.peer % p_, r, delta(op.peer, r));
    KeyState& ks = keys_[k];
    Slot& sl = slot(ks, ks.recvs++);
    sl.posted = true;
    sl.rank = r;
    sl.req = op.req;
    if (sl.arrived) {
      complete(r, op.req);
      retire(ks);
    }
  }

  void arrive(const Flow& f) {
    KeyState& ks = keys_[f.key];
    Slot& sl = slot(ks, f.index);
    sl.arrived = true;
    if (sl.posted) {
      complete(sl.rank, sl.req);
      retire(ks);
    }
  }

  void advance(double next) {
    const double dt = next - now_;
    now_ = next;
    drained_.clear();
    for (size_t i = 0; i < active_.size();) {
      Flow& f = flows_[static_cast<size_t>(active_[i])];
      if (f.rate != kInf) f.remaining -= f.rate * dt;
      if (f.rate == kInf || f.remaining <= f.rate * kTimeEps + 1e-6) {
        drained_.push_back(active_[i]);
        active_[i] = active_.back();
        active_.pop_back();
        dirty_ = true;
      } else {
        ++i;
      }
    }
    for (int id : drained_) {
      const Flow& f = flows_[static_cast<size_t>(id)];
      complete(f.src, f.req);
      events_.push({now_ + f.latency, 0, id});
      nextOnWire(f.key);
    }
    while (!events_.empty() && events_.top().time <= now_ + kTimeEps) {
      const Event e = events_.top();
      events_.pop();
      if (e.kind == 0) {
        arrive(flows_[static_cast<size_t>(e.a)]);
      } else {
        ranks_[static_cast<size_t>(e.a)].busy = false;
        runnable_.push_back(e.a);
      }
    }
  }

  // Progressive filling over the active flows (replay.hpp); every link at the smallest share is
  // settled in one pass, so symmetric flows settle together.
  void computeRates() {
    touched_.clear();
    for (int f : active_) {
      Flow& fl = flows_[static_cast<size_t>(f)];
      fl.rate = fl.pathLen == 0 ? kInf : -1;
      for (uint32_t i = 0; i < fl.pathLen; ++i) {
        const int l = pool_[fl.pathBegin + i];
        if (count_[static_cast<size_t>(l)]++ == 0) {
          touched_.push_back(l);
          rem_[static_cast<size_t>(l)] = capacity_[static_cast<size_t>(l)];
        }
      }
    }
    // Flows of each touched link, as offsets into linkFlows_.
    offset_.assign(touched_.size() + 1, 0);
    slotOf_.resize(capacity_.size());
    for (size_t i = 0; i < touched_.size(); ++i) {
      slotOf_[static_cast<size_t>(touched_[i])] = static_cast<int>(i);
      offset_[i + 1] = offset_[i] + count_[static_cast<size_t>(touched_[i])];
    }
    linkFlows_.resize(offset_.back());
    fill_.assign(offset_.begin(), offset_.end() - 1);
    for (int f : active_) {
      const Flow& fl = flows_[static_cast<size_t>(f)];
      for (uint32_t i = 0; i < fl.pathLen; ++i) {
        const auto t = static_cast<size_t>(slotOf_[static_cast<size_t>(pool_[fl.pathBegin + i])]);
        linkFlows_[fill_[t]++] = f;
      }
    }
    for (;;) {
      double share = kInf;
      for (int l : touched_) {
        const auto c = count_[static_cast<size_t>(l)];
        if (c > 0) share = std::min(share, rem_[static_cast<size_t>(l)] / c);
      }
      if (share == kInf) break;
      const double limit = share * (1 + 1e-9);
      for (size_t t = 0; t < touched_.size(); ++t) {
        const auto l = static_cast<size_t>(touched_[t]);
        if (count_[l] == 0 || rem_[l] / count_[l] > limit) continue;
        for (size_t j = offset_[t]; j < offset_[t + 1]; ++j) {
          Flow& fl = flows_[static_cast<size_t>(linkFlows_[j])];
          if (fl.rate >= 0) continue;
          fl.rate = share;
          for (uint32_t i = 0; i < fl.pathLen; ++i) {
            const auto l2 = static_cast<size_t>(pool_[fl.pathBegin + i]);
            rem_[l2] -= share;
            --count_[l2];
          }
        }
      }
    }
    for (int l : touched_) count_[static_cast<size_t>(l)] = 0;
  }

  const Fabric& fabric_;
  const std::vector<Program>& programs_;
  int n_;
  int p_;
  Fold fold_;
  ComputeRates rates_;
  std::vector<RankState> ranks_;
  std::vector<double> capacity_;
  std::vector<size_t> count_;
  std::vector<double> rem_;
  std::vector<int> touched_;
  std::vector<int> slotOf_;
  std::vector<size_t> offset_;
  std::vector<size_t> fill_;
  std::vector<int> linkFlows_;
  std::vector<Flow> flows_;
  std::vector<int> pool_;
  std::vector<int> active_;
  std::vector<int> drained_;
  std::vector<int> runnable_;
  std::unordered_map<uint64_t, KeyState> keys_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
  bool dirty_ = false;
  ReplayResult result_;
};

}  // namespace

ReplayResult replay(const Fabric& fabric, const std::vector<Program>& programs, int n, const ComputeRates& rates,
                    Fold fold) {
  return Replayer(fabric, programs, n, rates, fold).run();
}

std::vector<double> maxMinRates(const std::vector<std::vector<int>>& paths, const std::vector<double>& capacity) {
  // Rank i's program is one send whose route is paths[i]; the rates are those of the first batch.
  struct Fixed final : public Fabric {
    const std::vector<std::vector<int>>& paths;
    const std::vector<double>& cap;
    Fixed(const std::vector<std::vector<int>>& p, const std::vector<double>& c) : paths(p), cap(c) {}
    int links() const override { return static_cast<int>(cap.size()); }
    double capacity(int link) const override { return cap[static_cast<size_t>(link)]; }
    double route(int src, int, std::vector<int>& path) const override {
      const auto& p = paths[static_cast<size_t>(src)];
      path.insert(path.end(), p.begin(), p.end());
      return 0;
    }
  };
  Fixed fabric(paths, capacity);
  const int n = static_cast<int>(paths.size());
  std::vector<Program> programs(paths.size());
  for (int i = 0; i < n; ++i) {
    programs[static_cast<size_t>(i)].ops.push_back({Op::Kind::kSend, i, 0, uint64_t{1} << 40});
    programs[static_cast<size_t>(i)].requests = 1;
  }
  Replayer r(fabric, programs, n, {}, Fold::kShift);
  return r.firstRates();
}

}  // namespace ferry::sim
