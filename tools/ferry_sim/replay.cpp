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
// Peers per rank whose message keys the rank keeps at hand (RankState): the trees' and halving's
// few, not an all-to-all's n.
constexpr size_t kKeyCache = 32;

struct KeyState;

struct Flow {
  int src;           // simulated sender
  uint32_t req;      // the sender's request
  KeyState* ks;      // its message key's state (replay.hpp, "Symmetry"; the map's nodes do not move);
                     // null for a computation (Fabric::computeRoute)
  uint64_t index;    // position among the key's messages
  double remaining;  // bytes left at time `last`
  double rate;
  double before = 0;  // its rate before the computation under way
  double latency;
  uint32_t pathBegin;  // its links: pool_[pathBegin, pathBegin + pathLen)
  uint32_t pathLen;
  uint32_t pathCap = 0;  // room at pathBegin, kept when the slot is reused
  double last = 0;       // when `remaining` was last brought up to date
  uint32_t version = 0;  // bumped at each new rate: older finish events are stale
  bool active = false;   // on the wire
  uint32_t mark = 0;     // the rate computation that last took it into its component
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

// When an active flow's last byte leaves at its current rate (stale once its version moved on).
struct Finish {
  double time;
  int flow;
  uint32_t version;
  bool operator>(const Finish& o) const { return time > o.time; }
};

struct RankState {
  size_t pc = 0;
  int64_t blockedOn = -1;
  bool busy = false;
  bool finished = false;
  double end = 0;
  std::vector<uint8_t> done;
  // The message keys of the peers this rank sent to and received from, kept beside the rank so
  // that its ops find them without the shared map (most schedules have a few peers a rank).
  std::vector<std::pair<int, KeyState*>> sendKeys, recvKeys;
};

class Replayer {
 public:
  Replayer(const Fabric& fabric, const std::vector<Program>& programs, int n, const ComputeRates& rates, Fold fold,
           bool everyFlow)
      : fabric_(fabric), programs_(programs), n_(n), p_(static_cast<int>(programs.size())), fold_(fold), rates_(rates),
        everyFlow_(everyFlow), ranks_(programs.size()) {
    const int links = fabric.links();
    capacity_.resize(static_cast<size_t>(links));
    for (int l = 0; l < links; ++l) capacity_[static_cast<size_t>(l)] = fabric.capacity(l);
    count_.assign(static_cast<size_t>(links), 0);
    rem_.assign(static_cast<size_t>(links), 0);
    onLink_.resize(static_cast<size_t>(links));
    linkMark_.assign(static_cast<size_t>(links), 0);
    for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r].done.assign(programs[r].requests, 0);
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
      recycle();
      double next = events_.empty() ? kInf : events_.top().time;
      dropStale();
      if (!finishes_.empty()) next = std::min(next, std::max(now_, finishes_.top().time));
      if (next == kInf) break;
      advance(next);
    }
    result_.complete = true;
    for (const RankState& s : ranks_) {
      result_.complete = result_.complete && s.finished;
      result_.seconds = std::max(result_.seconds, s.end);
    }
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
            path_.clear();
            const double scale = fabric_.computeRoute(r, rate, path_);
            if (scale > 0) {
              compute(r, static_cast<double>(op.bytes) * scale);
            } else {
              events_.push({now_ + static_cast<double>(op.bytes) / rate, 1, r});
            }
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

  // The key of messages from simulated rank `r` to real rank `peer` (recv: from `peer` to `r`).
  KeyState& keyOf(int r, int peer, bool recv) {
    auto& cache = recv ? ranks_[static_cast<size_t>(r)].recvKeys : ranks_[static_cast<size_t>(r)].sendKeys;
    for (const auto& [p, ks] : cache) {
      if (p == peer) return *ks;
    }
    KeyState& ks = recv ? keys_[key(peer % p_, r, delta(peer, r))] : keys_[key(r, peer % p_, delta(r, peer))];
    if (cache.size() < kKeyCache) cache.emplace_back(peer, &ks);
    return ks;
  }

  void send(int r, const Op& op) {
    KeyState& ks = keyOf(r, op.peer, false);
    path_.clear();
    const double latency = fabric_.route(r, op.peer, path_);
    const int id = newFlow(static_cast<uint32_t>(path_.size()));
    Flow& f = flows_[static_cast<size_t>(id)];
    f.src = r;
    f.req = op.req;
    f.ks = &ks;
    f.index = ks.sends++;
    f.remaining = static_cast<double>(op.bytes);
    f.rate = 0;
    f.latency = latency;
    std::copy(path_.begin(), path_.end(), pool_.begin() + f.pathBegin);
    ++result_.flows;
    if (ks.draining >= 0) {
      ks.queued.push_back(id);
    } else {
      ks.draining = id;
      start(id);
    }
  }

  // A computation that shares links with messages (Fabric::computeRoute, path in path_): a flow
  // with no message key, which frees its rank when its last byte is done.
  void compute(int r, double bytes) {
    const int id = newFlow(static_cast<uint32_t>(path_.size()));
    Flow& f = flows_[static_cast<size_t>(id)];
    f.src = r;
    f.ks = nullptr;
    f.remaining = bytes;
    f.rate = 0;
    f.latency = 0;
    std::copy(path_.begin(), path_.end(), pool_.begin() + f.pathBegin);
    start(id);
  }

  // A slot for a flow of `pathLen` links: one whose flow arrived (recycle()), else a new one.
  // Slots are reused so that the flows in memory are those in flight, not every message of the
  // call (millions at 16,384 ranks).
  int newFlow(uint32_t pathLen) {
    int id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<int>(flows_.size());
      flows_.emplace_back();
    }
    Flow& f = flows_[static_cast<size_t>(id)];
    if (f.pathCap < pathLen) {
      f.pathBegin = static_cast<uint32_t>(pool_.size());
      f.pathCap = pathLen;
      pool_.resize(pool_.size() + pathLen);
    }
    f.pathLen = pathLen;
    return id;
  }

  // Flows that arrived become free once a rate computation dropped them from their links' lists
  // (computeRates); when no computation is due, every flow that left was dropped already.
  void recycle() {
    free_.insert(free_.end(), arrived_.begin(), arrived_.end());
    arrived_.clear();
  }

  // A flow goes on the wire: its links' flows get new rates at the next computation.
  void start(int id) {
    Flow& f = flows_[static_cast<size_t>(id)];
    f.active = true;
    f.last = now_;
    if (f.pathLen == 0) {  // nothing to cross: it leaves at once
      f.rate = kInf;
      finishes_.push({now_, id, ++f.version});
      return;
    }
    for (uint32_t i = 0; i < f.pathLen; ++i) onLink_[static_cast<size_t>(pool_[f.pathBegin + i])].push_back(id);
    changed_.push_back(id);
    dirty_ = true;
  }

  // The pair's next message goes on the wire once the previous one left.
  void nextOnWire(KeyState& ks) {
    ks.draining = -1;
    if (ks.queuedHead < ks.queued.size()) {
      ks.draining = ks.queued[ks.queuedHead++];
      if (ks.queuedHead == ks.queued.size()) {
        ks.queued.clear();
        ks.queuedHead = 0;
      }
      start(ks.draining);
    }
  }

  // Pop finish events of flows that left or got a new rate since.
  void dropStale() {
    while (!finishes_.empty()) {
      const Finish& top = finishes_.top();
      const Flow& f = flows_[static_cast<size_t>(top.flow)];
      if (f.active && f.version == top.version) return;
      finishes_.pop();
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
    KeyState& ks = keyOf(r, op.peer, true);
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
    KeyState& ks = *f.ks;
    Slot& sl = slot(ks, f.index);
    sl.arrived = true;
    if (sl.posted) {
      complete(sl.rank, sl.req);
      retire(ks);
    }
  }

  void advance(double next) {
    now_ = next;
    drained_.clear();
    // Flows whose last byte leaves within kTimeEps (their finish time counts a millionth of a
    // byte as gone, as rounding leaves it).
    for (dropStale(); !finishes_.empty() && finishes_.top().time <= now_ + kTimeEps; dropStale()) {
      const int id = finishes_.top().flow;
      finishes_.pop();
      Flow& f = flows_[static_cast<size_t>(id)];
      f.active = false;
      if (f.pathLen > 0) {
        changed_.push_back(id);
        dirty_ = true;
      }
      drained_.push_back(id);
    }
    for (int id : drained_) {
      const Flow& f = flows_[static_cast<size_t>(id)];
      if (f.ks == nullptr) {  // a computation ended
        ranks_[static_cast<size_t>(f.src)].busy = false;
        runnable_.push_back(f.src);
        arrived_.push_back(id);
        continue;
      }
      complete(f.src, f.req);
      events_.push({now_ + f.latency, 0, id});
      nextOnWire(*f.ks);
    }
    while (!events_.empty() && events_.top().time <= now_ + kTimeEps) {
      const Event e = events_.top();
      events_.pop();
      if (e.kind == 0) {
        arrive(flows_[static_cast<size_t>(e.a)]);
        arrived_.push_back(e.a);
      } else {
        ranks_[static_cast<size_t>(e.a)].busy = false;
        runnable_.push_back(e.a);
      }
    }
  }

  // New rates for the flows that share a link, directly or through other flows, with one that
  // started or left since the last computation (every active flow with everyFlow_): max-min
  // fairness splits into such components, so the others keep their rates. Progressive filling
  // (replay.hpp) then runs over the component; every link at the smallest share is settled in one
  // pass, so symmetric flows settle together.
  void computeRates() {
    ++mark_;
    comp_.clear();
    touched_.clear();
    auto takeLink = [&](int l) {
      if (linkMark_[static_cast<size_t>(l)] == mark_) return;
      linkMark_[static_cast<size_t>(l)] = mark_;
      touched_.push_back(l);
    };
    if (everyFlow_) {
      for (size_t l = 0; l < onLink_.size(); ++l) takeLink(static_cast<int>(l));
    } else {
      for (int id : changed_) {
        const Flow& f = flows_[static_cast<size_t>(id)];
        for (uint32_t i = 0; i < f.pathLen; ++i) takeLink(pool_[f.pathBegin + i]);
      }
    }
    changed_.clear();
    // Walk the component: each touched link's active flows, and their links (inactive flows are
    // dropped from the lists on the way).
    for (size_t t = 0; t < touched_.size(); ++t) {
      std::vector<int>& on = onLink_[static_cast<size_t>(touched_[t])];
      size_t keep = 0;
      for (int id : on) {
        Flow& f = flows_[static_cast<size_t>(id)];
        if (!f.active) continue;
        on[keep++] = id;
        if (f.mark == mark_) continue;
        f.mark = mark_;
        comp_.push_back(id);
        for (uint32_t i = 0; i < f.pathLen; ++i) takeLink(pool_[f.pathBegin + i]);
      }
      on.resize(keep);
    }
    for (int id : comp_) {
      Flow& f = flows_[static_cast<size_t>(id)];
      if (f.rate > 0 && f.rate != kInf) f.remaining -= f.rate * (now_ - f.last);
      f.last = now_;
      f.before = f.rate;
      f.rate = -1;
    }
    for (int l : touched_) {
      const auto u = static_cast<size_t>(l);
      count_[u] = onLink_[u].size();
      rem_[u] = capacity_[u];
    }
    for (;;) {
      double share = kInf;
      for (int l : touched_) {
        const auto c = count_[static_cast<size_t>(l)];
        if (c > 0) share = std::min(share, rem_[static_cast<size_t>(l)] / c);
      }
      if (share == kInf) break;
      const double limit = share * (1 + 1e-9);
      for (int t : touched_) {
        const auto l = static_cast<size_t>(t);
        if (count_[l] == 0 || rem_[l] / count_[l] > limit) continue;
        for (int id : onLink_[l]) {
          Flow& fl = flows_[static_cast<size_t>(id)];
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
    // A flow whose rate did not change keeps its finish event: the time it gives is the same.
    for (int id : comp_) {
      Flow& f = flows_[static_cast<size_t>(id)];
      if (f.rate == f.before && f.before > 0) continue;
      finishes_.push({f.last + std::max(f.remaining - 1e-6, 0.0) / f.rate, id, ++f.version});
    }
  }

  const Fabric& fabric_;
  const std::vector<Program>& programs_;
  int n_;
  int p_;
  Fold fold_;
  ComputeRates rates_;
  bool everyFlow_;  // recompute every active flow's rate at each change (the reference)
  std::vector<RankState> ranks_;
  std::vector<double> capacity_;
  std::vector<size_t> count_;
  std::vector<double> rem_;
  std::vector<int> touched_;
  std::vector<std::vector<int>> onLink_;  // flows put on each link (inactive ones dropped lazily)
  std::vector<uint32_t> linkMark_;        // the computation that last touched each link
  uint32_t mark_ = 0;
  std::vector<int> comp_;     // the flows whose rates are being computed
  std::vector<int> changed_;  // flows started or left since the last computation
  std::vector<Flow> flows_;
  std::vector<int> free_;     // slots of flows_ to reuse
  std::vector<int> arrived_;  // flows that arrived since the last recycle()
  std::vector<int> pool_;
  std::vector<int> path_;  // route()'s output, copied into the flow's slot
  std::priority_queue<Finish, std::vector<Finish>, std::greater<Finish>> finishes_;
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
                    Fold fold, RateScope scope) {
  return Replayer(fabric, programs, n, rates, fold, scope == RateScope::kEveryFlow).run();
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
  Replayer r(fabric, programs, n, {}, Fold::kShift, true);
  return r.firstRates();
}

}  // namespace ferry::sim
