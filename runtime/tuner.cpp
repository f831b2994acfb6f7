#include "runtime/tuner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "collectives/table.hpp"
#include "base/log.hpp"

namespace ferry {

using coll::Algorithm;
using coll::Plan;
using coll::Protocol;

namespace {

constexpr double kInf = coll::kInapplicable;
using coll::kUnmodelled;
// Measured selection tries the candidates predicted within this factor of the best one (the largest
// error the model was found to make, docs/ARCHITECTURE.md "The tuner"), at most kMaxTrialPlans.
constexpr double kPrune = 8.0;
constexpr size_t kMaxTrialPlans = 4;
// Calls moving less are left to the model: their few microseconds are within what scheduling adds
// or takes from one call to the next, so two trials cannot rank the plans (docs/ARCHITECTURE.md,
// "The tuner").
constexpr size_t kMeasureMinBytes = 64 * 1024;
// Outputs (per rank) from this size are tried with both kinds of store; smaller ones are cheap to
// write either way.
constexpr size_t kStoreTrialBytes = 256 * 1024;
// Runs of each candidate: one on a host, two in turn across hosts (Tuner::settle).
size_t trialRounds(const TunerInputs& in) { return in.arena ? 1 : 2; }
// Watching kept plans (tuner.hpp). A watch of the kept plan alone costs one agreement, so quiet
// watches space out, doubling from kWatchEvery calls to kWatchMax. A watch that also runs the rival
// costs a few calls of what may be the slower plan, so those stop spacing out at kCompareMax: the
// machine may change back. kDrift sits above what "fastest of two calls" moves by from one watch
// to the next (tens of percent) and below what the machine's slow spells cost (several times); a
// rival must be kSwitch times faster to take over, so that noise does not swap two equal plans.
constexpr int kWatchEvery = 16;
constexpr int kWatchMax = 1024;
constexpr int kCompareMax = 256;
constexpr double kDrift = 1.8;
constexpr double kSwitch = 1.2;
// Plans kept at less than this a call are not watched: a watch's agreement makes the ranks wait for
// each other, tens of microseconds where ranks outnumber cores, which short calls pay in full
// (docs/PERFORMANCE.md, "Watching the kept plan").
constexpr double kWatchMinSeconds = 100e-6;

// The constants stableOrder() prices with in place of the measured ones: fixed, so that every run
// of a job picks the same order class for the same call. Their values only place the crossover
// between the flat ring and recursive doubling over a network (a 25 us message, 1 GB/s a stream);
// the arena's rows, which these host figures price, all share one class.
constexpr double kNominalAlpha = 25e-6;
constexpr double kNominalBeta = 1e-9;
HostModel nominalHost(int cores) {
  HostModel m;
  m.syncSpin = 1e-6;
  m.syncSleep = 10e-6;
  m.copyBw = m.reduceBw = m.cmaBw = 10e9;
  m.copyBwCache = m.reduceBwCache = 30e9;
  m.cmaCall = 1e-6;
  m.l2Bytes = 1 << 20;
  m.cores = cores;
  return m;
}

// The int keys of the plan caches: a call whose bits depend on the order is planned apart from
// calls of the same shape that may take any class (min, max, integers).
int sensitiveKey(int value, bool sensitive) { return value | (sensitive ? 0x100 : 0); }

// "direct/cma", "direct/cma+nt" (streaming stores), "direct/cma+cached".
std::string planName(const Plan& p) {
  std::string s = std::string(coll::algorithmName(p.algorithm)) + "/" + coll::protocolName(p.protocol);
  if (p.stores == coll::Stores::kStreaming) s += "+nt";
  if (p.stores == coll::Stores::kCached) s += "+cached";
  return s;
}

std::string lower(std::string s) {
  std::string out;
  for (char c : s) {
    if (c != '_' && c != '-' && c != ' ') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// A collective's index as FERRY_ALGO names it: callKindName() lower-cased ("allreduce").
int kindIndex(const std::string& name) {
  for (int k = 1; k <= static_cast<int>(CallKind::kReduce); ++k) {
    if (name == lower(callKindName(static_cast<CallKind>(k)))) return k;
  }
  return -1;
}

// "shm" is the mailbox protocol's former name, still accepted.
int protocolValue(const std::string& name) {
  if (name == "shm") return static_cast<int>(Protocol::kMailbox);
  for (int p = 1; coll::protocolName(static_cast<Protocol>(p)) != nullptr; ++p) {
    if (name == coll::protocolName(static_cast<Protocol>(p))) return p;
  }
  return -1;
}

std::string collectiveNames() {
  std::string out;
  for (int k = 1; k <= static_cast<int>(CallKind::kReduce); ++k) {
    out += std::string(out.empty() ? "" : ", ") + lower(callKindName(static_cast<CallKind>(k)));
  }
  return out;
}

int algorithmValue(const std::string& name) {
  for (int a = 1; coll::algorithmName(static_cast<Algorithm>(a)) != nullptr; ++a) {
    if (name == coll::algorithmName(static_cast<Algorithm>(a))) return a;
  }
  return -1;
}

}  // namespace

Result<Tuner> Tuner::create(const TunerInputs& in, const std::string& algo, const std::string& proto,
                            int64_t chunkBytes) {
  Tuner t;
  t.in_ = in;
  // Chunks: two staged operands, the output and the local operand should share the L2.
  int64_t l2 = in.model.l2Bytes > 0 ? in.model.l2Bytes : (1 << 20);
  t.chunk_ = chunkBytes > 0 ? static_cast<size_t>(chunkBytes)
                            : static_cast<size_t>(std::clamp<int64_t>(l2 / 8, 32 * 1024, 1024 * 1024));
  for (const std::string& group : split(lower(algo), ';')) {
    int kind = 0;
    std::string list = group;
    if (size_t colon = group.find(':'); colon != std::string::npos) {
      kind = kindIndex(group.substr(0, colon));
      if (kind < 0) {
        return makeError(ErrorCode::kInvalidArgument, "FERRY_ALGO='%s': '%s' is not a collective (expected one of: %s)",
                         algo.c_str(), group.substr(0, colon).c_str(), collectiveNames().c_str());
      }
      list = group.substr(colon + 1);
    }
    for (const std::string& name : split(list, ',')) {
      int a = algorithmValue(name);
      if (a < 0) {
        // NCCL_ALGO values ferry does not have (tree, collnet, nvls, pat) fall through to the tuner.
        FERRY_WARN(log::kTune, "FERRY_ALGO/NCCL_ALGO: '%s' is not a ferry algorithm (expected one of: %s); ignored",
                   name.c_str(), coll::algorithmList().c_str());
        continue;
      }
      t.algoMask_[kind] |= 1u << a;
    }
  }
  for (const std::string& name : split(lower(proto), ',')) {
    const int p = protocolValue(name);
    if (p > 0) {
      t.protoMask_ |= 1u << p;
    } else {
      FERRY_WARN(log::kTune, "FERRY_PROTO/NCCL_PROTO: '%s' is not a ferry protocol (messages, mailbox, cma); ignored",
                 name.c_str());
    }
  }
  return t;
}

bool Tuner::allowed(CallKind kind, Algorithm a, Protocol p) const {
  uint32_t mask = algoMask_[static_cast<int>(kind)] | algoMask_[0];
  if (mask != 0 && (mask & (1u << static_cast<int>(a))) == 0) return false;
  // Transport algorithms always move messages; FERRY_PROTO restricts the single-host ones.
  if (protoMask_ != 0 && p != Protocol::kMessages && (protoMask_ & (1u << static_cast<int>(p))) == 0) return false;
  return true;
}

bool Tuner::allowsSomewhere(Algorithm a) const {
  for (size_t kind = 1; kind < std::size(algoMask_); ++kind) {
    const uint32_t mask = algoMask_[kind] | algoMask_[0];
    if (mask == 0 || (mask & (1u << static_cast<int>(a))) != 0) return true;
  }
  return false;
}

void Tuner::update(const TunerInputs& in) {
  in_ = in;
  cache_.clear();
  hasLast_ = false;
  hasLastModelled_ = false;
  trials_.clear();
  measuredStores_.clear();
  measuredPlans_.clear();
}

double Tuner::predict(CallKind kind, size_t bytes) const {
  double best = kInf;
  for (const Candidate& c : candidates(kind, bytes)) {
    if (c.allowed) best = std::min(best, c.seconds);
  }
  // A communicator of one rank, or one whose transport algorithms are not modelled: nothing known.
  return best >= kUnmodelled ? 0.0 : best;
}

std::vector<Tuner::Candidate> Tuner::candidates(CallKind kind, size_t bytes, bool shared) const {
  const coll::Pricing p(in_, chunk_, bytes, shared);
  std::vector<Candidate> out;
  for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
    if (row->kind != kind) continue;
    out.push_back({Plan{row->algorithm, row->protocol, chunk_, coll::Stores::kAuto, row},
                   row->applicable(p) ? row->cost(p) : kInf, allowed(kind, row->algorithm, row->protocol)});
  }
  return out;
}

int Tuner::stableOrder(CallKind kind, size_t bytes) const {
  coll::ModelInputs nominal = in_;
  nominal.model = nominalHost(in_.model.cores);
  nominal.net.alpha = kNominalAlpha;
  nominal.net.beta = kNominalBeta;
  nominal.intra = NetLevel{};  // measured, it would make the order depend on the run
  nominal.localCost = nullptr;
  nominal.localCopyBw = 0;
  const coll::Pricing p(nominal, chunk_, bytes, false);
  // As choose(): FERRY_ALGO / FERRY_PROTO first, everything applicable where they leave nothing.
  for (bool respect : {true, false}) {
    const coll::AlgorithmRow* best = nullptr;
    double bestSeconds = kInf;
    for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
      if (row->kind != kind || (respect && !allowed(kind, row->algorithm, row->protocol)) || !row->applicable(p)) {
        continue;
      }
      // Two levels wherever they apply: measured, they beat the flat plans from 64 KiB up
      // (docs/ARCHITECTURE.md, "Several hosts"), and below that their order holds the bits of
      // a job's small and large calls alike.
      if (row->algorithm == Algorithm::kHierarchical) return coll::reductionOrder(row->algorithm);
      const double s = row->cost(p);
      if (best == nullptr || s < bestSeconds) best = row, bestSeconds = s;
    }
    if (best != nullptr) return coll::reductionOrder(best->algorithm);
  }
  return -1;
}

Plan Tuner::choose(const coll::OpDesc& d, bool shared) {
  size_t bytes = d.count * dataTypeSize(d.type);
  const bool sensitive = coll::orderSensitive(d.kind, d.type, d.op);
  auto key = std::make_tuple(sensitiveKey(static_cast<int>(d.kind), sensitive), bytes, shared);
  // Calls in a loop repeat their key: the last answer first, before the map.
  if (hasLast_ && key == lastKey_) return lastPlan_;
  if (auto it = cache_.find(key); it != cache_.end()) {
    hasLast_ = true;
    lastKey_ = key;
    lastPlan_ = it->second;
    return it->second;
  }
  // Reading peers' buffers in place pays for small calls only with warm pages (sharedMinBytes).
  const bool perRank =
      d.kind == CallKind::kAllGather || d.kind == CallKind::kAllToAll || d.kind == CallKind::kReduceScatter;
  shared = shared && (perRank ? bytes * static_cast<size_t>(in_.ranks) : bytes) >= in_.sharedMinBytes;
  auto cands = candidates(d.kind, bytes, shared);
  // A call whose bits depend on the order runs a plan of the class stableOrder() picked.
  const int order = sensitive ? stableOrder(d.kind, bytes) : -1;
  if (order >= 0) {
    for (Candidate& c : cands) {
      if (coll::reductionOrder(c.plan.algorithm) != order) c.seconds = kInf;
    }
  }
  const Candidate* best = nullptr;
  for (const Candidate& c : cands) {
    if (c.allowed && c.seconds < kInf && (best == nullptr || c.seconds < best->seconds)) best = &c;
  }
  bool forcedOut = best == nullptr;
  if (forcedOut) {  // FERRY_ALGO/PROTO excluded every applicable candidate: ignore them here
    for (const Candidate& c : cands) {
      if (c.seconds < kInf && (best == nullptr || c.seconds < best->seconds)) best = &c;
    }
  }
  Plan plan = best->plan;
  if (log::enabled(log::Level::kInfo, log::kTune)) {
    std::string why;
    for (const Candidate& c : cands) {
      char buf[96];
      if (c.seconds == kUnmodelled) {
        std::snprintf(buf, sizeof(buf), "%s/%s not modelled%s", coll::algorithmName(c.plan.algorithm),
                      coll::protocolName(c.plan.protocol), c.allowed ? "" : " (excluded)");
      } else if (c.seconds == kInf) {
        std::snprintf(buf, sizeof(buf), "%s/%s n/a", coll::algorithmName(c.plan.algorithm),
                      coll::protocolName(c.plan.protocol));
      } else {
        std::snprintf(buf, sizeof(buf), "%s/%s %.1f us%s", coll::algorithmName(c.plan.algorithm),
                      coll::protocolName(c.plan.protocol), c.seconds * 1e6, c.allowed ? "" : " (excluded)");
      }
      why += why.empty() ? buf : std::string(", ") + buf;
    }
    char scale[96] = "";
    if (modelOnly()) {
      std::snprintf(scale, sizeof(scale), " (model only: %d hosts > FERRY_TUNE_MODEL_HOSTS %d)", in_.hosts,
                    in_.modelHosts);
    }
    FERRY_INFO(log::kTune, "%s of %zu B on %d ranks%s%s%s: %s/%s, chunk %zu B%s [predicted: %s]", callKindName(d.kind),
               bytes, in_.ranks, shared ? " (buffers in shared memory)" : "",
               order >= 0 ? " (order of reduction fixed)" : "", scale, coll::algorithmName(plan.algorithm),
               coll::protocolName(plan.protocol), plan.chunkBytes,
               forcedOut ? " (FERRY_ALGO/FERRY_PROTO allow nothing that applies: ignored)" : "", why.c_str());
  }
  if (cache_.size() > 4096) cache_.clear();
  cache_.emplace(key, plan);
  return plan;
}

Tuner::Choice Tuner::select(const coll::OpDesc& d, bool shared) {
  // A call that repeats the last one the model alone planned gets the same plan (loops of small calls).
  if (const coll::Plan* p = repeatsModelled(d, shared)) {
    Choice c;
    c.plan = *p;
    return c;
  }
  const size_t bytes = d.count * dataTypeSize(d.type);
  const bool perRank =
      d.kind == CallKind::kAllGather || d.kind == CallKind::kAllToAll || d.kind == CallKind::kReduceScatter;
  const size_t moved = perRank ? bytes * static_cast<size_t>(in_.ranks) : bytes;
  const size_t output = d.kind == CallKind::kAllGather || d.kind == CallKind::kAllToAll ? moved : bytes;
  const bool sensitive = coll::orderSensitive(d.kind, d.type, d.op);
  // On one host, calls on buffers in shared memory and on plain ones are measured apart.
  const int planKey = sensitiveKey(static_cast<int>(d.kind), sensitive) | (in_.arena && shared ? 0x200 : 0);
  const auto key =
      std::make_tuple(static_cast<int>(d.kind), bytes, shared, sensitiveKey(static_cast<int>(d.type), sensitive));
  // "allReduce of 1048576 B on 4 ranks", for the log of trials and watches.
  auto label = [&] {
    char what[128];
    std::snprintf(what, sizeof(what), "%s of %zu B on %d ranks%s", callKindName(d.kind), bytes, in_.ranks,
                  shared ? " (buffers in shared memory)" : "");
    return std::string(what);
  };
  Choice c;
  // Measured: single-host calls, and calls of communicators with two levels (the network's alpha
  // and beta cannot say how a flat ring of processes sharing cores compares with the two levels),
  // up to FERRY_TUNE_MODEL_HOSTS hosts: beyond, the model alone (modelOnly()).
  const bool measurable = in_.arena || (in_.hierarchy && in_.net.measured && !modelOnly());
  if (in_.trials <= 0 || !measurable || in_.ranks < 2 || moved < kMeasureMinBytes || moved > in_.measureMaxBytes) {
    // Beyond the measured sizes a call keeps the algorithm and protocol the largest measured call
    // of its collective settled on: where trials ran, the model's prices proved unreliable (one
    // core's copy rate stands in for lines handed between cores: docs/PERFORMANCE.md, "The plan
    // beyond the measured sizes"). The kind of store follows the rule below.
    if (measurable && in_.trials > 0 && moved > in_.measureMaxBytes) {
      auto m = measuredPlans_.find(planKey);
      // A measured plan of another order class than this size's (stableOrder) would change bits.
      if (m != measuredPlans_.end() &&
          (!sensitive || coll::reductionOrder(m->second.plan.algorithm) == stableOrder(d.kind, bytes))) {
        const MeasuredPlan& mp = m->second;
        c.plan = mp.plan;
        if (!in_.arena) return c;
        c.plan.stores = streamsBeyond(d.kind, output) ? coll::Stores::kStreaming : coll::Stores::kAuto;
        if (!mp.hasRival || held_) return c;
        // Watched as the measured calls are: held to the largest one's time, scaled, against its rival.
        auto it = trials_.find(key);
        if (it == trials_.end()) {
          if (trials_.size() >= 4096) trials_.clear();
          Trials t;
          t.settled = true;
          t.chosen = c.plan;
          t.rival = mp.rival;
          t.rival.stores = c.plan.stores;
          t.hasRival = true;
          t.fastestSeen = mp.seconds * static_cast<double>(moved) / static_cast<double>(std::max<size_t>(mp.moved, 1));
          t.watchEvery = kWatchEvery;
          t.kind = static_cast<int>(d.kind);
          t.planKey = planKey;
          t.moved = moved;
          t.what = label();
          it = trials_.emplace(key, std::move(t)).first;
        }
        return watchOrKeep(it->second);
      }
    }
    c.plan = choose(d, shared);
    // Only calls no trial or measured plan can ever reach: their plan depends on nothing but d.
    if (moved < kMeasureMinBytes && moved <= in_.measureMaxBytes) {
      hasLastModelled_ = true;
      lastModelled_ = d;
      lastModelledShared_ = shared;
      lastModelledPlan_ = c.plan;
    }
    // Larger than anything measured: stream where the largest measured call of this kind did.
    if (in_.trials > 0 && moved > in_.measureMaxBytes && c.plan.protocol != Protocol::kMessages &&
        c.plan.stores == coll::Stores::kAuto && streamsBeyond(d.kind, output)) {
      c.plan.stores = coll::Stores::kStreaming;
    }
    return c;
  }
  auto it = trials_.find(key);
  if (held_) {
    c.plan = it != trials_.end() && it->second.settled ? it->second.chosen : choose(d, shared);
    return c;
  }
  if (it == trials_.end()) {
    if (trials_.size() >= 4096) trials_.clear();
    Trials t;
    t.chosen = choose(d, shared);
    // The model's candidates, as choose() weighs them, within kPrune of its best; where the bits
    // depend on the order, only those of the chosen plan's order class.
    auto cands = candidates(d.kind, bytes, shared && moved >= in_.sharedMinBytes);
    if (sensitive) {
      const int order = coll::reductionOrder(t.chosen.algorithm);
      std::erase_if(cands, [order](const Candidate& x) { return coll::reductionOrder(x.plan.algorithm) != order; });
    }
    double best = kInf;
    for (const Candidate& x : cands) {
      if (x.allowed && x.seconds < kUnmodelled) best = std::min(best, x.seconds);
    }
    std::vector<Candidate> keep;
    for (const Candidate& x : cands) {
      if (x.allowed && x.seconds < kUnmodelled && x.seconds <= kPrune * best) keep.push_back(x);
    }
    std::stable_sort(keep.begin(), keep.end(),
                     [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
    if (keep.size() > kMaxTrialPlans) keep.resize(kMaxTrialPlans);
    // Where each rank's output is large enough for the kind of store to matter, the best two
    // plans are tried with cached and with streaming stores (coll::Stores): whether the output
    // is still cached when the call writes it depends on what the application does between
    // calls, which only a measurement sees.
    t.kind = static_cast<int>(d.kind);
    t.planKey = planKey;
    t.moved = moved;
    if (in_.arena && output >= kStoreTrialBytes && !keep.empty()) {
      t.output = output;
      std::vector<Candidate> both;
      const size_t paired = std::min<size_t>(keep.size(), kMaxTrialPlans / 2);
      for (size_t i = 0; i < paired; ++i) {
        for (coll::Stores st : {coll::Stores::kCached, coll::Stores::kStreaming}) {
          both.push_back(keep[i]);
          both.back().plan.stores = st;
        }
      }
      // The next plan of another algorithm too, as it lies: the model's order of algorithms is
      // least sure where caches stop holding the operands, the sizes these trials start at.
      for (size_t i = paired; i < keep.size(); ++i) {
        if (std::none_of(keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(paired),
                         [&](const Candidate& x) { return x.plan.algorithm == keep[i].plan.algorithm; })) {
          both.push_back(keep[i]);
          break;
        }
      }
      keep = std::move(both);
    }
    if (keep.size() < 2) {
      t.settled = true;  // nothing to compare (or FERRY_ALGO / FERRY_PROTO left one plan)
    } else {
      for (const Candidate& x : keep) {
        t.plans.push_back(x.plan);
        t.predicted.push_back(x.seconds);
      }
      t.ends.assign(t.plans.size() * static_cast<size_t>(in_.trials + 1) * trialRounds(in_), 0);
      t.what = label();
    }
    it = trials_.emplace(key, std::move(t)).first;
  }
  Trials& t = it->second;
  if (t.settled) return watchOrKeep(t);
  c.trials = &t;
  if (t.next < static_cast<int>(t.ends.size())) {
    c.trial = t.next++;
    c.plan = t.plans[static_cast<size_t>(c.trial / (in_.trials + 1)) % t.plans.size()];
  } else {
    c.settle = true;
  }
  return c;
}

Tuner::Choice Tuner::watchOrKeep(Trials& t) {
  Choice c;
  if (t.watchRuns == 0) {
    if (!in_.arena || !t.hasRival || t.fastestSeen < kWatchMinSeconds || ++t.sinceWatch < t.watchEvery) {
      c.plan = t.chosen;
      return c;
    }
    t.sinceWatch = 0;
    t.watchRuns = t.compareNext || t.changedPlaces ? 2 : 1;
    t.compareNext = false;
    // Each watched call's start and end: ends[2 i], ends[2 i + 1].
    t.ends.assign(2 * static_cast<size_t>(t.watchRuns) * static_cast<size_t>(in_.trials + 1), 0);
    t.next = 0;
  }
  c.trials = &t;
  if (2 * t.next < static_cast<int>(t.ends.size())) {
    c.trial = t.next++;
    c.plan = c.trial / (in_.trials + 1) == 0 ? t.chosen : t.rival;
  } else {
    c.plan = t.chosen;
    c.settle = true;
  }
  return c;
}

void Tuner::settleWatch(Trials& t, const std::vector<int64_t>& times) {
  const size_t run = static_cast<size_t>(in_.trials + 1);
  const int runs = t.watchRuns;
  // Per run, its fastest call after the first (which may still fault in the plan's pages), each
  // call the shorter of its time since the call before (as the trials timed it, in a stream) and
  // of its own time, from the last rank's start (what the application does between calls).
  double best[2] = {kInf, kInf};
  for (size_t b = 0; b < static_cast<size_t>(runs); ++b) {
    for (size_t k = b * run + 1; k < (b + 1) * run && 2 * k + 1 < times.size(); ++k) {
      const int64_t start = times[2 * k], end = times[2 * k + 1], before = times[2 * k - 1];
      if (start <= 0 || end <= 0 || before <= 0) continue;
      const int64_t ns = std::min(end - before, end - start);
      best[b] = std::min(best[b], std::max(static_cast<double>(ns) * 1e-9, 0.0));
    }
  }
  t.watchRuns = 0;
  t.ends.clear();
  t.ends.shrink_to_fit();
  if (best[0] >= kInf) return;  // nothing timed (cannot happen: every rank records every call)
  if (runs == 2 && best[1] * kSwitch < best[0]) {
    FERRY_INFO(log::kTune, "%s: %s now takes %.1f us a call against %.1f for %s (held to %.1f): switched",
               t.what.c_str(), planName(t.rival).c_str(), best[1] * 1e6, best[0] * 1e6, planName(t.chosen).c_str(),
               t.fastestSeen * 1e6);
    std::swap(t.chosen, t.rival);
    t.fastestSeen = best[1];
    t.changedPlaces = true;
    t.watchEvery = kWatchEvery;
    auto& mp = measuredPlans_[t.planKey];
    if (t.moved >= mp.moved) mp = {t.moved, t.chosen, t.rival, true, t.fastestSeen};
    return;
  }
  if (runs == 1 && t.fastestSeen > 0 && best[0] > kDrift * t.fastestSeen) {
    FERRY_INFO(log::kTune, "%s: kept %s takes %.1f us a call, %.1fx the %.1f it is held to: timing it against %s",
               t.what.c_str(), planName(t.chosen).c_str(), best[0] * 1e6, best[0] / t.fastestSeen, t.fastestSeen * 1e6,
               planName(t.rival).c_str());
    t.compareNext = true;
    t.sinceWatch = t.watchEvery;  // at the next call
    return;
  }
  // The kept plan stays. Compared with its rival, it is held from now on to what the machine
  // gives it now: its trials' time may be one it cannot reach any more.
  if (runs == 2) {
    FERRY_INFO(log::kTune, "%s: %s takes %.1f us a call against %.1f for %s: kept", t.what.c_str(),
               planName(t.chosen).c_str(), best[0] * 1e6, best[1] * 1e6, planName(t.rival).c_str());
  }
  t.fastestSeen = runs == 2 || t.fastestSeen <= 0 ? best[0] : std::min(t.fastestSeen, best[0]);
  t.watchEvery = std::min(t.watchEvery * 2, t.changedPlaces ? kCompareMax : kWatchMax);
}

void Tuner::recordStart(const Choice& c, int64_t startNs) {
  Trials* t = c.trials;
  if (t == nullptr || t->watchRuns == 0 || c.trial < 0 || 2 * static_cast<size_t>(c.trial) >= t->ends.size()) return;
  t->ends[2 * static_cast<size_t>(c.trial)] = startNs;
}

bool Tuner::opensRun(const Choice& c) const {
  return in_.arena && c.trials != nullptr && c.trial >= 0 && c.trials->watchRuns == 0 &&
         c.trial % (in_.trials + 1) == 0;
}

void Tuner::record(const Choice& c, int64_t endNs) {
  if (c.trials == nullptr || c.trial < 0) return;
  const size_t i = c.trials->watchRuns > 0 ? 2 * static_cast<size_t>(c.trial) + 1 : static_cast<size_t>(c.trial);
  if (i < c.trials->ends.size()) c.trials->ends[i] = endNs;
}

std::vector<int64_t> Tuner::callEnds(const Choice& c) const {
  return c.trials != nullptr ? c.trials->ends : std::vector<int64_t>{};
}

std::vector<int64_t> Tuner::intervals(const std::vector<int64_t>& ends, int trials) {
  const size_t run = static_cast<size_t>(std::max(trials, 0) + 1);
  std::vector<int64_t> out(ends.size(), 0);
  for (size_t k = 1; k < ends.size(); ++k) {
    if (k % run != 0) out[k] = ends[k] - ends[k - 1];
  }
  return out;
}

void Tuner::settle(const Choice& c, const std::vector<int64_t>& times, bool areIntervals) {
  Trials* t = c.trials;
  if (t != nullptr && t->watchRuns > 0) {
    settleWatch(*t, times);
    return;
  }
  if (t == nullptr || t->settled) return;
  const size_t m = t->plans.size(), run = static_cast<size_t>(in_.trials + 1);
  // One host: the mean time a call of each run took after its first, from the last rank's end of
  // that first call (a barrier: opensRun) to the last rank's end of the run's last call. Not the
  // fastest interval between two ends: a plan whose ranks run ahead (a broadcast root filling the
  // mailboxes) ends a few calls at once and looks faster in a few calls than in a stream
  // (docs/ARCHITECTURE.md, "The tuner"). Across hosts: the mean of the second half of each run's
  // calls (each the slowest rank's), since plans that let ranks run ahead through socket buffers
  // finish most calls at once and pay it back every few calls; and each candidate runs twice in
  // turn (A B A B) keeping its better run, so a stall or the first touch of a new size's memory
  // spoils one run, not the plan.
  std::vector<double> bestOf(m, kInf);
  for (size_t b = 0; b * run < times.size(); ++b) {
    const size_t j = b % m;
    const size_t first = b * run, last = std::min((b + 1) * run, times.size()) - 1;
    if (last == first) continue;
    double score = 0;
    if (areIntervals) {
      double sum = 0;
      int n = 0;
      for (size_t k = first + 1 + std::min(run / 2, run - 2); k <= last; ++k) {
        sum += std::max(static_cast<double>(times[k]) * 1e-9, 0.0);
        ++n;
      }
      score = sum / n;
    } else {
      score = std::max(static_cast<double>(times[last] - times[first]) * 1e-9, 0.0) / static_cast<double>(last - first);
    }
    bestOf[j] = std::min(bestOf[j], score);
  }
  size_t win = 0;
  for (size_t j = 1; j < m; ++j) {
    if (bestOf[j] < bestOf[win]) win = j;
  }
  t->chosen = t->plans[win];
  t->settled = true;
  // The rival a watch times the kept plan against: the fastest of another algorithm or protocol.
  size_t rival = m;
  for (size_t j = 0; j < m; ++j) {
    const Plan& p = t->plans[j];
    if (p.algorithm == t->chosen.algorithm && p.protocol == t->chosen.protocol) continue;
    if (rival == m || bestOf[j] < bestOf[rival]) rival = j;
  }
  t->hasRival = rival < m;
  if (t->hasRival) t->rival = t->plans[rival];
  t->fastestSeen = bestOf[win];
  t->watchEvery = kWatchEvery;
  t->sinceWatch = 0;
  if (t->output > 0 && t->chosen.stores != coll::Stores::kAuto) {
    auto& m = measuredStores_[t->kind];
    if (t->output >= m.first) m = {t->output, t->chosen.stores};
  }
  auto& mp = measuredPlans_[t->planKey];
  if (t->moved >= mp.moved) mp = {t->moved, t->chosen, t->rival, t->hasRival, t->fastestSeen};
  if (log::enabled(log::Level::kInfo, log::kTune)) {
    std::string why;
    for (size_t j = 0; j < m; ++j) {
      char buf[128];
      std::snprintf(buf, sizeof(buf), "%s%s %.1f us (predicted %.1f)", j == 0 ? "" : ", ",
                    planName(t->plans[j]).c_str(), bestOf[j] * 1e6, t->predicted[j] * 1e6);
      why += buf;
    }
    const char* how = areIntervals ? "the better of two runs' means of their last half" : "mean";
    FERRY_INFO(log::kTune, "%s: measured %s [per call in a stream, %s of %d: %s]", t->what.c_str(),
               planName(t->chosen).c_str(), how, in_.trials, why.c_str());
  }
  t->ends.clear();
  t->ends.shrink_to_fit();
}

}  // namespace ferry
