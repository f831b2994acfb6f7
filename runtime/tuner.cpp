#include "runtime/tuner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "base/log.hpp"

namespace ferry {

using coll::Algorithm;
using coll::OpKind;
using coll::Plan;
using coll::Protocol;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The transport algorithms are not modelled: on one host the arena ones always move fewer bytes
// with fewer hand-offs; they run where there is no arena, or when FERRY_ALGO asks for them.
constexpr double kUnmodelled = 1e9;
// Measured selection tries the candidates predicted within this factor of the best one (the model
// was off by up to 7x, never by more), at most kMaxTrialPlans of them.
constexpr double kPrune = 8.0;
constexpr size_t kMaxTrialPlans = 4;
// Calls moving less are left to the model: their few microseconds are within what scheduling and
// the hypervisor add or take from one call to the next, so two trials cannot rank the plans (on
// the 2-core VM, trials of 1-16 KiB reduces at 4 ranks chose as the model did and still ran
// 2-3x slower in the calls right after), and the model's small-message plans were tuned on
// streams of such calls.
constexpr size_t kMeasureMinBytes = 64 * 1024;
// Outputs (per rank) from this size are tried with both kinds of store; smaller ones are cheap to
// write either way.
constexpr size_t kStoreTrialBytes = 256 * 1024;
// Runs of each candidate: one on a host, two in turn across hosts (Tuner::settle).
size_t trialRounds(const TunerInputs& in) { return in.arena ? 1 : 2; }

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

int kindIndex(const std::string& name) {
  static const std::pair<const char*, OpKind> kNames[] = {
      {"allreduce", OpKind::kAllReduce}, {"reducescatter", OpKind::kReduceScatter}, {"allgather", OpKind::kAllGather},
      {"alltoall", OpKind::kAllToAll},   {"broadcast", OpKind::kBroadcast},         {"reduce", OpKind::kReduce}};
  for (auto& [n, k] : kNames) {
    if (name == n) return static_cast<int>(k);
  }
  return -1;
}

int algorithmValue(const std::string& name) {
  for (int a = 1; a <= static_cast<int>(Algorithm::kHierarchical); ++a) {
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
        return makeError(ErrorCode::kInvalidArgument,
                         "FERRY_ALGO='%s': '%s' is not a collective (expected allreduce, reducescatter, allgather, "
                         "alltoall, broadcast or reduce)",
                         algo.c_str(), group.substr(0, colon).c_str());
      }
      list = group.substr(colon + 1);
    }
    for (const std::string& name : split(list, ',')) {
      int a = algorithmValue(name);
      if (a < 0) {
        // NCCL_ALGO values ferry does not have (tree, collnet, nvls, pat) fall through to the tuner.
        FERRY_WARN(log::kTune, "FERRY_ALGO/NCCL_ALGO: '%s' is not a ferry algorithm (ring, chain, pairwise, oneshot, "
                   "twoshot, direct, doubling, hierarchical); ignored", name.c_str());
        continue;
      }
      t.algoMask_[kind] |= 1u << a;
    }
  }
  for (const std::string& name : split(lower(proto), ',')) {
    if (name == "shm") {
      t.protoMask_ |= 1u << static_cast<int>(Protocol::kShm);
    } else if (name == "cma") {
      t.protoMask_ |= 1u << static_cast<int>(Protocol::kCma);
    } else if (name == "messages") {
      t.protoMask_ |= 1u << static_cast<int>(Protocol::kMessages);
    } else {
      FERRY_WARN(log::kTune, "FERRY_PROTO/NCCL_PROTO: '%s' is not a ferry protocol (shm, cma, messages); ignored",
                 name.c_str());
    }
  }
  return t;
}

bool Tuner::allowed(OpKind kind, Algorithm a, Protocol p) const {
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
  trials_.clear();
  measuredStores_.clear();
  measuredPlans_.clear();
}

double Tuner::predict(OpKind kind, size_t bytes) const {
  double best = kInf;
  for (const Candidate& c : candidates(kind, bytes)) {
    if (c.allowed) best = std::min(best, c.seconds);
  }
  // A communicator of one rank, or one whose transport algorithms are not modelled: nothing known.
  return best >= kUnmodelled ? 0.0 : best;
}

std::vector<Tuner::Candidate> Tuner::networkCandidates(OpKind kind, size_t bytes) const {
  // A message of b bytes over one stream: a + b * beta; `share` streams through one host's link
  // (the ranks of a host talking to other hosts at once) divide its rate.
  const NetLevel& net = in_.net;
  const bool modelled = net.measured;
  const double a = net.alpha, beta = net.beta, n = in_.ranks, B = static_cast<double>(bytes);
  const double L = std::max(1, in_.ranksPerHost);
  const double slice = static_cast<double>(std::max<size_t>(in_.sliceBytes, 1));
  auto msg = [&](double b, double share) { return a + b * beta * share; };
  // Recursive doubling on m ranks: log2(p) exchanges, two more to fold and unfold the rest.
  auto doublingSteps = [](double m) {
    double p = 1, steps = 0;
    while (p * 2 <= m) p *= 2, ++steps;
    return steps + (p < m ? 2 : 0);
  };
  // A pipelined chain of m ranks: m - 1 hops for the first slice, then one per further slice.
  auto chain = [&](double m, double b) {
    const double slices = std::max(1.0, std::ceil(b / slice));
    return (m - 2 + slices) * msg(std::min(b, slice), 1);
  };
  std::vector<Candidate> out;
  auto add = [&](Algorithm al, bool applicable, double seconds) {
    out.push_back({Plan{al, Protocol::kMessages, chunk_}, applicable ? seconds : kInf,
                   allowed(kind, al, Protocol::kMessages)});
  };
  // Unmeasured (one host over UCX): the one transport algorithm of each collective, as before.
  auto flat = [&](double seconds) { return modelled ? seconds : 0.0; };
  switch (kind) {
    case OpKind::kAllReduce:
      add(Algorithm::kRing, true, flat(2 * (n - 1) * msg(B / n, 1)));
      add(Algorithm::kDoubling, true, modelled ? doublingSteps(n) * msg(B, 1) : kUnmodelled);
      break;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
      add(Algorithm::kRing, true, flat((n - 1) * msg(B, 1)));
      break;
    case OpKind::kAllToAll:
      // Of a host's L ranks each sends n - L blocks through the host's link.
      add(Algorithm::kPairwise, true, flat((n - 1) * a + L * (n - L) * B * beta));
      break;
    case OpKind::kBroadcast:
    case OpKind::kReduce:
      add(Algorithm::kChain, true, flat(chain(n, B)));
      break;
    default:
      add(Algorithm::kPairwise, true, 0);
      break;
  }
  if (in_.hierarchy && modelled) {
    const double H = in_.hosts, c = in_.localCopyBw > 0 ? 1.0 / in_.localCopyBw : 0.0;
    auto local = [&](OpKind k, double b) { return in_.localCost ? in_.localCost(k, static_cast<size_t>(b)) : 0.0; };
    // An all-reduce of b bytes per rank over the H hosts, `share` of them at once per host.
    auto crossAllReduce = [&](double b, double share) {
      return std::min(2 * (H - 1) * msg(b / H, share), doublingSteps(H) * msg(b, share));
    };
    const bool even = in_.evenHosts;
    switch (kind) {
      case OpKind::kAllReduce:
        add(Algorithm::kHierarchical, true,
            even ? local(OpKind::kReduceScatter, B / L) + crossAllReduce(B / L, L) + local(OpKind::kAllGather, B / L)
                 : local(OpKind::kReduce, B) + crossAllReduce(B, 1) + local(OpKind::kBroadcast, B));
        break;
      case OpKind::kReduceScatter:
        add(Algorithm::kHierarchical, even,
            n * B * c + local(OpKind::kReduceScatter, H * B) + (H - 1) * msg(B, L));
        break;
      case OpKind::kAllGather:
        add(Algorithm::kHierarchical, even, (H - 1) * msg(B, L) + local(OpKind::kAllGather, H * B) + n * B * c);
        break;
      case OpKind::kAllToAll:
        add(Algorithm::kHierarchical, even,
            2 * n * B * c + local(OpKind::kAllToAll, H * B) + (H - 1) * msg(L * B, L));
        break;
      case OpKind::kBroadcast:
        add(Algorithm::kHierarchical, true, chain(H, B) + local(OpKind::kBroadcast, B) * (even ? 1 : 2));
        break;
      case OpKind::kReduce:
        add(Algorithm::kHierarchical, true, local(OpKind::kReduce, B) + chain(H, B));
        break;
      default:
        break;
    }
  }
  return out;
}

std::vector<Tuner::Candidate> Tuner::candidates(OpKind kind, size_t bytes, bool shared) const {
  // bytes: the vector for all-reduce, broadcast, reduce; one rank's block for the others.
  if (!in_.arena) return networkCandidates(kind, bytes);
  const HostModel& m = in_.model;
  const double n = in_.ranks;
  const bool over = in_.ranksOnHost > m.cores;
  const double f = over ? static_cast<double>(in_.ranksOnHost) / m.cores : 1.0;  // work sharing a core
  const double S = over ? m.syncSleep : m.syncSpin;
  const double c = 1.0 / m.copyBw, g = 1.0 / m.reduceBw, k = 1.0 / m.cmaBw;
  // Copying b bytes this rank wrote or will read again itself: up to one chunk it stays in the L2
  // (small messages, mailboxes reused call after call); larger ones stream through memory. Bytes
  // another core wrote arrive at about the memory rate either way (c).
  const double cc = m.copyBwCache > 0 ? 1.0 / m.copyBwCache : c;
  auto copy = [&](double b) { return b * (b <= static_cast<double>(chunk_) ? cc : c); };
  // Reducing b bytes (each rank's share of a call, or one step's): up to one chunk the operands
  // and the result are cache lines, this rank's own or just written by a peer, and the sum runs at
  // its in-cache rate; the out-of-cache rate made one-shot all-reduces and reduces of a few KiB
  // look four times dearer than they are (4 ranks on 2 cores, 2 KiB reduce: the barriers of
  // direct/shm were chosen, 7.8 us a call, against 1.2 us one-shot).
  const double gc = m.reduceBwCache > 0 ? 1.0 / m.reduceBwCache : g;
  auto red = [&](double b) { return b * (b <= static_cast<double>(chunk_) ? gc : g); };
  const double mb = static_cast<double>(in_.mailboxBytes);
  const double B = static_cast<double>(bytes);
  auto calls = [&](double b) { return std::ceil(b / static_cast<double>(chunk_)); };
  // Cross-memory reads of b bytes, in chunks.
  auto cma = [&](double b) { return b * k + calls(b) * m.cmaCall; };
  // Reading b bytes of a peer's announced buffer into our own: a memcpy where the peers' buffers
  // are shared memory; an operand of a reduction is then read where it lies, at no extra cost.
  auto peerRead = [&](double b) { return shared ? b * c : cma(b); };
  auto peerOperand = [&](double b) { return shared ? 0.0 : cma(b); };
  // Chunk steps of the algorithms pipelined through the mailboxes (b bytes per segment).
  auto pipeSteps = [&](double b) {
    double k = static_cast<double>(std::min(chunk_, in_.mailboxBytes / (2 * static_cast<size_t>(in_.ranks))));
    return std::max(1.0, std::ceil(b / k));
  };
  std::vector<Candidate> out;
  auto add = [&](Algorithm a, Protocol p, bool applicable, double seconds) {
    out.push_back({Plan{a, p, chunk_}, applicable ? seconds : kInf, allowed(kind, a, p)});
  };
  const bool shm = in_.arena, rd = in_.arena && in_.cma;
  switch (kind) {
    case OpKind::kAllReduce: {
      double E = B / n;
      add(Algorithm::kOneShot, Protocol::kShm, shm && B <= mb, S + f * (B * c + (n - 1) * red(B)));
      // Pipelined in chunk steps through the mailboxes: two hand-offs per step.
      add(Algorithm::kTwoShot, Protocol::kShm, shm,
          2 * pipeSteps(E) * S + f * ((n - 1) * E * c + (n - 1) * red(E) + E * c + (n - 1) * E * c));
      add(Algorithm::kTwoShot, Protocol::kCma, rd,
          3 * S + f * ((n - 1) * peerOperand(E) + (n - 1) * red(E) + (n - 1) * peerRead(E)));
      add(Algorithm::kRing, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      add(Algorithm::kDoubling, Protocol::kMessages, true, kUnmodelled);  // only where FERRY_ALGO asks
      break;
    }
    case OpKind::kReduceScatter:
      add(Algorithm::kDirect, Protocol::kShm, shm, pipeSteps(B) * S + f * ((n - 1) * B * c + (n - 1) * red(B)));
      add(Algorithm::kDirect, Protocol::kCma, rd, 2 * S + f * ((n - 1) * peerOperand(B) + (n - 1) * red(B)));
      add(Algorithm::kRing, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      break;
    case OpKind::kAllGather:
      add(Algorithm::kDirect, Protocol::kShm, shm && B <= mb, S + f * (B * c + (n - 1) * B * c));
      add(Algorithm::kDirect, Protocol::kCma, rd, 2 * S + f * ((n - 1) * peerRead(B)));
      add(Algorithm::kRing, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      break;
    case OpKind::kAllToAll:
      add(Algorithm::kDirect, Protocol::kShm, shm && n * B <= mb, S + f * (2 * n * B * c));
      add(Algorithm::kDirect, Protocol::kCma, rd, 2 * S + f * ((n - 1) * peerRead(B) + B * c));
      add(Algorithm::kPairwise, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      break;
    case OpKind::kBroadcast: {
      // Through the root's mailbox. Up to one chunk the root leaves the data there (or in its
      // ring) and returns: one hand-off, and the root waits for nobody, so a stream of small
      // broadcasts flows. Larger: the entry barrier, then chunk steps through the mailbox halves,
      // the root's copies (into the mailbox and its own output) overlapping the readers'. The
      // root copies every byte twice; all ranks together copy n + 1 times, shared by the cores.
      const double kb = static_cast<double>(std::min(chunk_, in_.mailboxBytes / 2));
      const double work = std::max(2.0, (n + 1) / std::min<double>(n, m.cores));
      const double steps = std::max(1.0, std::ceil(B / kb));
      add(Algorithm::kDirect, Protocol::kShm, shm,
          B <= kb ? S + f * (copy(B) + B * c) : (1 + steps * (over ? 1 : 0.5)) * S + work * B * c + kb * c);
      // Single-copy reads of the root's buffer; the root waits until every reader is done. Readers
      // of one process's pages contend in the kernel (4 ranks on this 2-core host, 1 MiB: three
      // readers together read 3.2 GB/s, one alone 4.3 GB/s): their reads add up.
      // Mapped, the readers copy at the same time on their own cores.
      add(Algorithm::kDirect, Protocol::kCma, rd,
          shared ? 2 * S + (n - 1) / std::min<double>(n - 1, m.cores) * B * c : 2 * S + (n - 1) * cma(B));
      add(Algorithm::kChain, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      break;
    }
    case OpKind::kReduce: {
      double E = B / n;
      // One-shot: everyone drops its input in its mailbox; only the root waits, then reduces all.
      add(Algorithm::kOneShot, Protocol::kShm, shm && B <= mb, S + B * c + f * (n - 1) * red(B));
      add(Algorithm::kDirect, Protocol::kShm, shm,
          2 * pipeSteps(E) * S + f * ((n - 1) * E * c + (n - 1) * red(E)) + (n - 1) * E * c);
      // The others' reduced segments sit in their scratch, never shared: read across processes.
      add(Algorithm::kDirect, Protocol::kCma, rd,
          3 * S + f * ((n - 1) * peerOperand(E) + (n - 1) * red(E)) + (n - 1) * cma(E));
      add(Algorithm::kChain, Protocol::kMessages, true, shm ? kUnmodelled : 0);
      break;
    }
    default:
      add(Algorithm::kPairwise, Protocol::kMessages, true, 0);
      break;
  }
  return out;
}

Plan Tuner::choose(const coll::OpDesc& d, bool shared) {
  size_t bytes = d.count * dataTypeSize(d.type);
  auto key = std::make_tuple(static_cast<int>(d.kind), bytes, shared);
  // Calls in a loop repeat their key: the last answer first, before the map.
  if (hasLast_ && key == lastKey_) return lastPlan_;
  if (auto it = cache_.find(key); it != cache_.end()) {
    hasLast_ = true;
    lastKey_ = key;
    lastPlan_ = it->second;
    return it->second;
  }
  // Reading peers' buffers in place pays for small calls only with warm pages (sharedMinBytes).
  const bool perRank = d.kind == OpKind::kAllGather || d.kind == OpKind::kAllToAll || d.kind == OpKind::kReduceScatter;
  shared = shared && (perRank ? bytes * static_cast<size_t>(in_.ranks) : bytes) >= in_.sharedMinBytes;
  auto cands = candidates(d.kind, bytes, shared);
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
    FERRY_INFO(log::kTune, "%s of %zu B on %d ranks%s: %s/%s, chunk %zu B%s [predicted: %s]",
               coll::opKindName(d.kind), bytes, in_.ranks, shared ? " (buffers in shared memory)" : "",
               coll::algorithmName(plan.algorithm), coll::protocolName(plan.protocol),
               plan.chunkBytes, forcedOut ? " (FERRY_ALGO/FERRY_PROTO allow nothing that applies: ignored)" : "",
               why.c_str());
  }
  if (cache_.size() > 4096) cache_.clear();
  cache_.emplace(key, plan);
  return plan;
}

Tuner::Choice Tuner::select(const coll::OpDesc& d, bool shared) {
  const size_t bytes = d.count * dataTypeSize(d.type);
  const bool perRank = d.kind == OpKind::kAllGather || d.kind == OpKind::kAllToAll || d.kind == OpKind::kReduceScatter;
  const size_t moved = perRank ? bytes * static_cast<size_t>(in_.ranks) : bytes;
  const size_t output = d.kind == OpKind::kAllGather || d.kind == OpKind::kAllToAll ? moved : bytes;
  Choice c;
  // Measured: single-host calls, and calls of communicators with two levels (the network's
  // alpha and beta cannot say how a flat ring of processes sharing cores compares with the two
  // levels: on 2 namespace hosts of 2 ranks the model chose the ring, 1.4-5x slower).
  const bool measurable = in_.arena || (in_.hierarchy && in_.net.measured);
  if (in_.trials <= 0 || !measurable || in_.ranks < 2 || moved < kMeasureMinBytes || moved > in_.measureMaxBytes) {
    // Beyond the measured sizes two-level communicators keep the algorithm the largest measured
    // call of the collective settled on.
    if (!in_.arena && measurable && in_.trials > 0 && moved > in_.measureMaxBytes) {
      auto m = measuredPlans_.find(static_cast<int>(d.kind));
      if (m != measuredPlans_.end()) {
        c.plan = m->second.second;
        return c;
      }
    }
    c.plan = choose(d, shared);
    // Larger than anything measured: stream where the largest measured call of this kind did.
    if (in_.trials > 0 && moved > in_.measureMaxBytes && c.plan.protocol != Protocol::kMessages &&
        c.plan.stores == coll::Stores::kAuto) {
      auto m = measuredStores_.find(static_cast<int>(d.kind));
      if (m != measuredStores_.end() && m->second.second == coll::Stores::kStreaming && output >= m->second.first) {
        c.plan.stores = coll::Stores::kStreaming;
      }
    }
    return c;
  }
  auto key = std::make_tuple(static_cast<int>(d.kind), bytes, shared, static_cast<int>(d.type));
  auto it = trials_.find(key);
  if (held_) {
    c.plan = it != trials_.end() && it->second.settled ? it->second.chosen : choose(d, shared);
    return c;
  }
  if (it == trials_.end()) {
    if (trials_.size() >= 4096) trials_.clear();
    Trials t;
    t.chosen = choose(d, shared);
    // The model's candidates, as choose() weighs them, within kPrune of its best.
    auto cands = candidates(d.kind, bytes, shared && moved >= in_.sharedMinBytes);
    double best = kInf;
    for (const Candidate& x : cands) {
      if (x.allowed && x.seconds < kUnmodelled) best = std::min(best, x.seconds);
    }
    std::vector<Candidate> keep;
    for (const Candidate& x : cands) {
      if (x.allowed && x.seconds < kUnmodelled && x.seconds <= kPrune * best) keep.push_back(x);
    }
    std::stable_sort(keep.begin(), keep.end(), [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
    if (keep.size() > kMaxTrialPlans) keep.resize(kMaxTrialPlans);
    // Where each rank's output is large enough for the kind of store to matter, the best two
    // plans are tried with cached and with streaming stores (coll::Stores): whether the output
    // is still cached when the call writes it depends on what the application does between
    // calls, which only a measurement sees.
    t.kind = static_cast<int>(d.kind);
    t.moved = moved;
    if (in_.arena && output >= kStoreTrialBytes && !keep.empty()) {
      t.output = output;
      std::vector<Candidate> both;
      for (size_t i = 0; i < std::min<size_t>(keep.size(), kMaxTrialPlans / 2); ++i) {
        for (coll::Stores st : {coll::Stores::kCached, coll::Stores::kStreaming}) {
          both.push_back(keep[i]);
          both.back().plan.stores = st;
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
      char what[128];
      std::snprintf(what, sizeof(what), "%s of %zu B on %d ranks%s", coll::opKindName(d.kind), bytes, in_.ranks,
                    shared ? " (buffers in shared memory)" : "");
      t.what = what;
    }
    it = trials_.emplace(key, std::move(t)).first;
  }
  Trials& t = it->second;
  if (t.settled) {
    c.plan = t.chosen;
    return c;
  }
  c.trials = &t;
  if (t.next < static_cast<int>(t.ends.size())) {
    c.trial = t.next++;
    c.plan = t.plans[static_cast<size_t>(c.trial / (in_.trials + 1)) % t.plans.size()];
  } else {
    c.settle = true;
  }
  return c;
}

void Tuner::record(const Choice& c, int64_t endNs) {
  if (c.trials == nullptr || c.trial < 0 || static_cast<size_t>(c.trial) >= c.trials->ends.size()) return;
  c.trials->ends[static_cast<size_t>(c.trial)] = endNs;
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
  if (t == nullptr || t->settled) return;
  const size_t m = t->plans.size(), run = static_cast<size_t>(in_.trials + 1);
  // One host: the fastest call of each run (ends on the shared clock, the last rank's). Across
  // hosts: the mean of the second half of each run's calls (each the slowest rank's). There plans
  // that let ranks run ahead (a flat chain forwarding through socket buffers) finish most calls at
  // once from what is buffered and pay it back every few calls: 2 hosts of 2 ranks, broadcast
  // 1 MiB, the chain's calls took 160-230 us with one of 0.8-2.2 ms every four, 720 us a call in
  // all, where the fastest call said 161 and kept it over the two levels' 300. The first half goes
  // to what the plan before left in flight and to memory the new size touches first.
  // Across hosts the candidates also run twice in turn (A B A B) and each keeps its better run: a
  // stall of the VM (10-90 ms, now and then) spoils one run, not the plan; and the first run of a
  // new size pays for the memory the size touches first (on 2 hosts of 2 ranks, all-to-all of
  // 16 MiB: the first plan's run 33-67 ms a call, 8-12 ms once warm), which made the plan the
  // model ranks first lose its trial one time in three.
  std::vector<double> bestOf(m, kInf);
  for (size_t b = 0; b * run < times.size(); ++b) {
    const size_t j = b % m;
    double fastest = kInf, sum = 0;
    int n = 0;
    for (size_t k = b * run + 1; k < (b + 1) * run && k < times.size(); ++k) {
      const int64_t ns = areIntervals ? times[k] : times[k] - times[k - 1];
      const double s = std::max(static_cast<double>(ns) * 1e-9, 0.0);
      fastest = std::min(fastest, s);
      if (k - b * run > run / 2) {
        sum += s;
        ++n;
      }
    }
    bestOf[j] = std::min(bestOf[j], areIntervals && n > 0 ? sum / n : fastest);
  }
  size_t win = 0;
  for (size_t j = 1; j < m; ++j) {
    if (bestOf[j] < bestOf[win]) win = j;
  }
  t->chosen = t->plans[win];
  t->settled = true;
  if (t->output > 0 && t->chosen.stores != coll::Stores::kAuto) {
    auto& m = measuredStores_[t->kind];
    if (t->output >= m.first) m = {t->output, t->chosen.stores};
  }
  if (!in_.arena) {
    auto& m = measuredPlans_[t->kind];
    if (t->moved >= m.first) m = {t->moved, t->chosen};
  }
  if (log::enabled(log::Level::kInfo, log::kTune)) {
    std::string why;
    for (size_t j = 0; j < m; ++j) {
      char buf[128];
      std::snprintf(buf, sizeof(buf), "%s%s %.1f us (predicted %.1f)", j == 0 ? "" : ", ",
                    planName(t->plans[j]).c_str(), bestOf[j] * 1e6, t->predicted[j] * 1e6);
      why += buf;
    }
    const char* how = areIntervals ? "the better of two runs' means of their last half" : "best";
    FERRY_INFO(log::kTune, "%s: measured %s [per call in a stream, %s of %d: %s]", t->what.c_str(),
               planName(t->chosen).c_str(), how, in_.trials, why.c_str());
  }
  t->ends.clear();
  t->ends.shrink_to_fit();
}

}  // namespace ferry
