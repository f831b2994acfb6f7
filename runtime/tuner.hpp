// The tuner: which row of the algorithm table (collectives/table.hpp), with which chunk size and
// kind of store, each call uses.
//
// The model: every row of the call's collective prices the call (collectives/cost_model.hpp); the
// cheapest that applies and that FERRY_ALGO / FERRY_PROTO allow wins. Choices are cached per
// (collective, bytes, shared buffers) and logged once each with FERRY_DEBUG_SUBSYS=TUNE. Every
// rank computes the same plan from the same inputs (rank 0's host model).
//
// Measured selection (select()): calls moving from 64 KiB to FERRY_TUNE_MEASURE_BYTES, on one host
// or across hosts with two levels, run every candidate the model puts within kPrune of its best for
// FERRY_TUNE_TRIALS + 1 calls in a row; then the ranks agree on what they saw (an internal
// all-reduce of the calls' end times) and keep the fastest. On one host the ranks meet in a
// barrier after each run's first call (opensRun) and a run counts as its mean call from there, so
// a plan whose ranks run ahead of each other pays in its trials for the work it hides. A few
// constants cannot place a host's crossovers between plans, so they are measured
// (docs/ARCHITECTURE.md, "The tuner"). Every rank runs the same trials at the same calls and
// settles at the same call: there is no plan to disagree on. Beyond the measured sizes a call keeps
// the algorithm and protocol of its collective's largest measured call, and the kind of store
// follows that call's store trials.
//
// Watching a kept plan (one host; plans of kWatchMinSeconds a call or more): a plan measured once
// can stop being the fastest when the machine changes under it (docs/PERFORMANCE.md, "Watching
// the kept plan"). Every watchEvery-th call of a kept plan starts a watch: trials + 1 calls, each
// timed since the call before or from the last rank's entry where that is shorter (work between
// calls does not count), then an agreement. A plan found kDrift times slower than it is held to
// (its trials' time, or since, the fastest it was watched at) is timed against its rival (the
// fastest trial plan of another algorithm or protocol) and the faster kept; once the two have
// changed places every watch times both, so the plan can follow the machine back.
// Quiet watches space out (to kWatchMax calls; kCompareMax where both run). Every rank watches the
// same calls and agrees on the same times, so the ranks switch together. Calls beyond the measured
// sizes are watched likewise, held to the largest measured call's time scaled by size.
//
// The tuner at scale: a communicator spanning more than FERRY_TUNE_MODEL_HOSTS hosts (modelOnly())
// runs no trials: a trial's calls wait for the slowest of all ranks, each candidate runs 26 calls
// per size, and the measured selection was only ever checked up to the namespace cluster's 16
// hosts (docs/SCALE.md, "The tuner at scale"). Its plans are the model's first choice.
//
// Run-to-run stability: a floating-point sum, prod or avg gets different bits from plans that
// combine the ranks in different orders (coll::reductionOrder). For those calls a deterministic
// rule (stableOrder: the communicator's shape, the call's size and fixed constants, never a
// timing) picks the order class first, and the model and the trials choose only among the plans of
// that class, so two runs of a job give the same bits (docs/RELIABILITY.md, "Run-to-run
// stability"). Min, max and integer types, and the data movers, may take any plan.
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

/// What the tuner prices calls with (collectives/cost_model.hpp).
using TunerInputs = coll::ModelInputs;

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
  /// Where `d` repeats the last call the model alone planned (below the measured sizes, where no
  /// trial or measured plan can reach), that call's plan, which select() would give again; else
  /// null. Inline: loops of small calls ask it every call.
  const coll::Plan* repeatsModelled(const coll::OpDesc& d, bool shared) const {
    const bool same = hasLastModelled_ && shared == lastModelledShared_ && d.kind == lastModelled_.kind &&
                      d.count == lastModelled_.count && d.type == lastModelled_.type && d.op == lastModelled_.op &&
                      d.root == lastModelled_.root;
    return same ? &lastModelledPlan_ : nullptr;
  }
  /// While held, select() measures nothing: a call whose trials have settled gets the plan they
  /// kept, any other the model's choice, and no trials start. A communicator holds its two levels'
  /// tuners while it times a two-level plan, so that trial runs the levels' kept (or modelled)
  /// plans and is not charged for their own trials. Every rank of the communicator holds alike.
  void holdTrials(bool held) { held_ = held; }
  /// When this rank finished measured call `c.trial` (steady clock, ns).
  void record(const Choice& c, int64_t endNs);
  /// Whether measured call `c` opens a trial run on one host: the ranks must all have finished it
  /// (a barrier) before it is recorded, so that no rank starts the run's timed calls early.
  bool opensRun(const Choice& c) const;
  /// When this rank started measured call `c.trial`, just before its data moves (steady clock, ns).
  void recordStart(const Choice& c, int64_t startNs);
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
  std::vector<Candidate> candidates(CallKind kind, size_t bytes, bool shared = false) const;
  /// The best allowed candidate's predicted seconds for (kind, bytes): what a call on this
  /// communicator costs, for the tuner of a communicator built on top of it.
  double predict(CallKind kind, size_t bytes) const;
  /// New inputs (the network measured, the two levels built): forgets every choice made so far.
  /// Every rank must call it at the same point, with the same inputs.
  void update(const TunerInputs& in);
  const TunerInputs& inputs() const { return in_; }
  /// Bytes per chunk of the single-host plans: FERRY_CHUNK_BYTES, or sized to the L2.
  size_t chunkBytes() const { return chunk_; }
  /// A communicator spanning more hosts than FERRY_TUNE_MODEL_HOSTS: select() measures nothing and
  /// every plan is the model's first (choose()), logged with each candidate's prediction.
  bool modelOnly() const { return !in_.arena && in_.hosts > in_.modelHosts; }
  /// Whether FERRY_ALGO allows `a` for some collective.
  bool allowsSomewhere(coll::Algorithm a) const;

 private:
  Tuner() = default;
  bool allowed(CallKind kind, coll::Algorithm a, coll::Protocol p) const;
  /// The order class (coll::reductionOrder) of every plan a call of (kind, bytes) whose bits
  /// depend on the order may run: from the communicator's shape, the call's size, FERRY_ALGO and
  /// fixed constants, never from a measurement; -1 where no row applies.
  int stableOrder(CallKind kind, size_t bytes) const;
  /// Whether a call of `kind` beyond the measured sizes, `output` bytes per rank, streams its
  /// stores: where the largest measured call of the kind whose stores were tried streamed.
  bool streamsBeyond(CallKind kind, size_t output) const {
    auto m = measuredStores_.find(static_cast<int>(kind));
    return m != measuredStores_.end() && m->second.second == coll::Stores::kStreaming && output >= m->second.first;
  }

  TunerInputs in_;
  size_t chunk_ = 0;
  // Allowed algorithms per collective (bit per Algorithm value); 0 = any. Index 0: every collective.
  uint32_t algoMask_[9] = {};
  uint32_t protoMask_ = 0;
  std::map<std::tuple<int, size_t, bool>, coll::Plan> cache_;
  bool hasLast_ = false;  // choose()'s last answer, for calls that repeat it
  std::tuple<int, size_t, bool> lastKey_;
  coll::Plan lastPlan_;
  bool hasLastModelled_ = false;  // select()'s last call planned by the model alone, below the measured sizes
  coll::OpDesc lastModelled_;
  bool lastModelledShared_ = false;
  coll::Plan lastModelledPlan_;
  std::map<std::tuple<int, size_t, bool, int>, Trials> trials_;
  bool held_ = false;  // holdTrials()
  // Per collective kind: the largest output whose store trials settled, and the stores that won.
  std::map<int, std::pair<size_t, coll::Stores>> measuredStores_;
  // Per collective kind (sensitiveKey, and on one host whether the buffers were shared): the
  // largest measured call and the plan that won it.
  struct MeasuredPlan {
    size_t moved = 0;  ///< bytes the call moved
    coll::Plan plan;
    coll::Plan rival;  ///< valid where hasRival
    bool hasRival = false;
    double seconds = 0;  ///< the plan's time per call in a stream, in its trials
  };
  std::map<int, MeasuredPlan> measuredPlans_;
  /// A call of settled `t`: its kept plan, or a call of a watch (tuner.hpp's top).
  Choice watchOrKeep(Trials& t);
  /// A watch of settled `t` ends: `times` as settle() takes them.
  void settleWatch(Trials& t, const std::vector<int64_t>& times);
};

/// The candidates of one (collective, bytes, type, shared) under measurement.
struct Tuner::Trials {
  std::vector<coll::Plan> plans;  ///< best predicted first
  std::vector<double> predicted;  ///< seconds, as plans
  std::vector<int64_t> ends;  ///< this rank's end of each measured call: plans[(i / (trials + 1)) % plans] ran call i
  int next = 0;               ///< trials handed out
  bool settled = false;
  coll::Plan chosen;
  std::string what;   ///< "allReduce of 1048576 B on 4 ranks", for the log
  int kind = 0;       ///< the collective (CallKind)
  int planKey = 0;    ///< measuredPlans_'s key: the collective, whether the order of reduction is fixed, shared buffers
  size_t output = 0;  ///< each rank's output bytes where stores were tried; 0: not tried
  size_t moved = 0;   ///< bytes the call moves (as FERRY_TUNE_MEASURE_BYTES counts them)
  // Watching the settled plan (see the top of this file).
  coll::Plan rival;  ///< the fastest trial plan of another algorithm or protocol than chosen
  bool hasRival = false;
  double fastestSeen = 0;      ///< what chosen is held to: its time when kept, or since watched
  int watchEvery = 0;          ///< calls between watches
  int sinceWatch = 0;          ///< calls since the last watch
  int watchRuns = 0;           ///< 0: not watching; 1: the kept plan is timed; 2: it and its rival
  bool compareNext = false;    ///< the next watch times both (the kept plan drifted)
  bool changedPlaces = false;  ///< the rival was kept once: every watch times both
};

}  // namespace ferry
