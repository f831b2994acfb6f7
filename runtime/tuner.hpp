// The tuner: which algorithm, protocol and chunk size each call uses.
//
// An alpha-beta-gamma model over the measured host constants (host_model.hpp): each candidate's
// time is its synchronisations times the flag hand-off latency, plus the bytes each rank copies,
// reads across processes and reduces, divided by the measured rates, with a penalty per
// cross-memory call; when ranks outnumber cores the per-rank work is multiplied by ranks/cores and
// hand-offs cost a kernel wake-up. Where the ranks' buffers are shared memory (ferry::hostAlloc),
// reading a peer's buffer costs a copy at the memory rate and reducing from it nothing extra.
// The cheapest allowed candidate wins. Choices are cached per
// (collective, bytes) and, with FERRY_DEBUG_SUBSYS=TUNE, logged once each with every candidate's
// predicted time. Every rank computes the same plan from the same inputs (rank 0's model).
//
// Measured selection (select()): a model of a few constants cannot know where a host's caches,
// its scheduler and other processes put the crossover between plans (on a 2-core VM it was off
// by 2-7x between 64 KiB and 4 MiB with four ranks). So calls on one host moving from 64 KiB to
// FERRY_TUNE_MEASURE_BYTES are measured: the first calls of each (collective, bytes, type,
// shared) run every candidate the model puts within kPrune of its best, each for
// FERRY_TUNE_TRIALS + 1 calls in a row; then the ranks agree on what they saw and keep the
// fastest. A trial is the interval between two consecutive calls' ends on the last rank to finish
// them (the ranks of one host share one monotonic clock): the time a stream of such calls takes
// per call, with the overlap a plan allows between one call and the next, and not charged for a
// rank that came late. The first call of each run of calls only starts the clock, so it absorbs
// the switch from the previous plan. A candidate's time is its best trial (other processes only
// ever add time). All ranks call the same collectives in the same order, so every rank's tuner
// runs the same trials at the same calls and settles at the same call: there is no plan to
// disagree on. Results do not depend on the plan (every reduction combines ranks in the same
// order), so trials change nothing but time.
//
// Beyond FERRY_TUNE_MEASURE_BYTES the kind of store follows the largest measured call of the same
// collective: if streaming stores won there, larger outputs stream too (the larger the output,
// the less of it a cache keeps for its reader); otherwise the default rule (coll::Stores::kAuto)
// stands. Without it, a 2-rank all-gather of 64 MiB on a VM whose reported last-level cache (260
// MiB) exceeds its real share wrote with cached stores, 30% slower than at 32 and 128 MiB.
// Every rank settles the same trials at the same call, so every rank extrapolates alike.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/op.hpp"
#include "ferry/status.hpp"
#include "runtime/host_model.hpp"

namespace ferry {

struct TunerInputs {
  int ranks = 1;
  bool arena = false;       ///< every rank on this host, shared memory attached
  bool cma = false;         ///< single-copy reads work between every pair
  size_t mailboxBytes = 0;  ///< bytes of one mailbox
  size_t sharedMinBytes = size_t{32} << 20;  ///< FERRY_SHARED_MIN_BYTES (coll::Context::sharedMinBytes)
  int ranksOnHost = 1;
  HostModel model;
  int trials = 0;               ///< FERRY_TUNE_TRIALS: measured calls per candidate; 0: the model alone
  size_t measureMaxBytes = 0;   ///< FERRY_TUNE_MEASURE_BYTES: largest call (bytes moved) select() measures
  // Communicators over the network (no arena).
  NetLevel net;                 ///< measured between hosts; unmeasured: the transport algorithms are not modelled
  int ranksPerHost = 1;         ///< ranks sharing a host's link (the most on any host)
  size_t sliceBytes = 256 * 1024;  ///< FERRY_SLICE_BYTES: the pipelined chains' slices
  // Communicators spanning hosts with the two levels of runtime/hierarchy.hpp built.
  bool hierarchy = false;
  int hosts = 1;
  bool evenHosts = false;       ///< every host has as many ranks
  /// Predicted seconds of one call of (kind, bytes) on this rank's intra-host communicator.
  std::function<double(coll::OpKind, size_t)> localCost;
  double localCopyBw = 0;       ///< memcpy bytes per second on this host (blocks permuted between levels)
};

class Tuner {
 public:
  /// `algo` and `proto` as the FERRY_ALGO and FERRY_PROTO knobs; `chunkBytes` 0 for automatic.
  /// Errors name the knob and the value it did not understand.
  static Result<Tuner> create(const TunerInputs& in, const std::string& algo, const std::string& proto,
                              int64_t chunkBytes);

  /// The plan for one call (count > 0). `shared`: the ranks' buffers were all in shared memory
  /// in the last call that looked (coll::Context::peersShared), so peers' buffers map.
  coll::Plan choose(const coll::OpDesc& d, bool shared = false);

  struct Trials;
  /// What select() decided for one call.
  struct Choice {
    coll::Plan plan;
    /// Non-null with trial >= 0: this call is measured; report when it ended with record().
    Trials* trials = nullptr;
    int trial = -1;
    /// The trials of this call's kind are complete: the ranks must agree on their times
    /// (callEnds(), reduced with max over every rank) and settle() before calling select() again.
    bool settle = false;
  };
  /// The plan for one call, measured where that pays (see above); the model's choice otherwise.
  Choice select(const coll::OpDesc& d, bool shared = false);
  /// While held, select() measures nothing: a call whose trials have settled gets the plan they
  /// kept, any other the model's choice, and no trials start. A communicator holds its two levels'
  /// tuners while it times a two-level plan, so that trial runs the levels' kept (or modelled)
  /// plans and is not charged for their own trials. Every rank of the communicator holds alike.
  void holdTrials(bool held) { held_ = held; }
  /// When this rank finished measured call `c.trial` (steady clock, ns).
  void record(const Choice& c, int64_t endNs);
  /// When this rank finished each measured call of `c`, in order.
  std::vector<int64_t> callEnds(const Choice& c) const;
  /// Keep the fastest candidate of `c`, given each measured call's end maximised over the ranks
  /// (ranks sharing a clock), or with `areIntervals` each call's own time (intervals()) maximised
  /// over the ranks (ranks on several hosts, whose clocks differ).
  void settle(const Choice& c, const std::vector<int64_t>& times, bool areIntervals = false);
  /// A rank's measured call ends as the time each call took after the one before it in its run
  /// (0 for the first call of each run, which only starts the clock).
  static std::vector<int64_t> intervals(const std::vector<int64_t>& ends, int trials);

  /// One candidate and its predicted time, for logs and tests.
  struct Candidate {
    coll::Plan plan;
    double seconds;  ///< predicted; infinity when not applicable
    bool allowed;
  };
  std::vector<Candidate> candidates(coll::OpKind kind, size_t bytes, bool shared = false) const;
  /// The best allowed candidate's predicted seconds for (kind, bytes): what a call on this
  /// communicator costs, for the tuner of a communicator built on top of it.
  double predict(coll::OpKind kind, size_t bytes) const;
  /// New inputs (the network measured, the two levels built): forgets every choice made so far.
  /// Every rank must call it at the same point, with the same inputs.
  void update(const TunerInputs& in);
  const TunerInputs& inputs() const { return in_; }
  /// Whether FERRY_ALGO allows `a` for some collective.
  bool allowsSomewhere(coll::Algorithm a) const;

 private:
  Tuner() = default;
  bool allowed(coll::OpKind kind, coll::Algorithm a, coll::Protocol p) const;
  /// candidates() of a communicator without an arena: the transport algorithms by the measured
  /// network (runtime/host_model.hpp NetLevel), and the two-level schedules where they exist.
  std::vector<Candidate> networkCandidates(coll::OpKind kind, size_t bytes) const;

  TunerInputs in_;
  size_t chunk_ = 0;
  // Allowed algorithms per collective (bit per Algorithm value); 0 = any. Index 0: every collective.
  uint32_t algoMask_[9] = {};
  uint32_t protoMask_ = 0;
  std::map<std::tuple<int, size_t, bool>, coll::Plan> cache_;
  bool hasLast_ = false;  // choose()'s last answer, for calls that repeat it
  std::tuple<int, size_t, bool> lastKey_;
  coll::Plan lastPlan_;
  std::map<std::tuple<int, size_t, bool, int>, Trials> trials_;
  bool held_ = false;  // holdTrials()
  // Per collective kind: the largest output whose store trials settled, and the stores that won.
  std::map<int, std::pair<size_t, coll::Stores>> measuredStores_;
  // Communicators without an arena, per collective kind: the largest measured call (bytes moved)
  // and the plan that won it.
  std::map<int, std::pair<size_t, coll::Plan>> measuredPlans_;
};

/// The candidates of one (collective, bytes, type, shared) under measurement.
struct Tuner::Trials {
  std::vector<coll::Plan> plans;   ///< best predicted first
  std::vector<double> predicted;   ///< seconds, as plans
  std::vector<int64_t> ends;       ///< this rank's end of each measured call: plans[(i / (trials + 1)) % plans] ran call i
  int next = 0;                    ///< trials handed out
  bool settled = false;
  coll::Plan chosen;
  std::string what;                ///< "allReduce of 1048576 B on 4 ranks", for the log
  int kind = 0;                    ///< the collective (coll::OpKind)
  size_t output = 0;               ///< each rank's output bytes where stores were tried; 0: not tried
  size_t moved = 0;                ///< bytes the call moves (as FERRY_TUNE_MEASURE_BYTES counts them)
};

}  // namespace ferry
