// Comm::Impl: the parts one communicator composes, and how one call runs on them (plan, deadline,
// sticky error). Private to the runtime: comm_build.cpp makes it, communicator.cpp runs the calls.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

#include "collectives/reproducible.hpp"
#include "collectives/table.hpp"
#include "ferry/comm.hpp"
#include "base/call_check.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/cuda/device_context.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/cuda/group.hpp"
#include "runtime/launch_env.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime/hierarchy.hpp"
#include "runtime/host_layout.hpp"
#include "runtime/host_model.hpp"
#include "runtime/net_devices.hpp"
#include "runtime/net_probe.hpp"
#include "runtime/tuner.hpp"
#include "runtime/shrink.hpp"
#include "runtime/state_dump.hpp"
#include "runtime/topology.hpp"
#include "runtime/watchdog.hpp"
#include "runtime/work_queue.hpp"
#include "transports/shm/shared_memory.hpp"
#include "transports/shm/shm_arena.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace ferry {

using coll::OpDesc;
using coll::Plan;

/// Rounds of every communicator's init (3 for the host, 2 for the GPU half); split() runs them on
/// every parent rank, so fixed.
constexpr int kInitRounds = 5;

struct Comm::Impl {
  int rank = 0;
  int size = 1;
  uint64_t id = 0;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<transport::Arena> arena;  ///< every rank on this host: the single-host algorithms
  std::unique_ptr<Tuner> tuner;
  /// With two levels: the intra-host level as every rank prices it (host 0's model and size).
  std::unique_ptr<Tuner> levelTuner;
  std::unique_ptr<Watchdog> watchdog;
  coll::Scratch scratch;
  coll::Scratch staging;
  coll::Context ctx;
  uint64_t seq = 0;
  uint64_t p2pSeq = 0;
  Status error;
  coll::CallTrace trace;
  std::unique_ptr<StateDumpRegistration> dumpRegistration;
  WorkQueue queue;
  int device = -1;                          ///< the CUDA device this rank drives, or -1
  std::unique_ptr<gpu::DeviceContext> gpu;  ///< null without a device
  HostLayout layout;                        ///< which ranks share a host
  std::unique_ptr<Hierarchy> hier;          ///< the two levels, when the ranks span hosts
  uint64_t measuredCalls = 0;               ///< calls the tuner measured (Comm::measuredCalls)
  bool reproducible = false;                ///< Comm::setReproducible (FERRY_REPRODUCIBLE by default)
  coll::ReproScratch repro;                 ///< the reproducible mode's buffers
  /// Where this rank listens for shrink(), and where every rank does (runtime/shrink.hpp).
  std::unique_ptr<ShrinkListener> shrinkListener;
  std::vector<ShrinkContact> shrinkContacts;
  /// The RDMA ports this rank's transport uses between hosts (rdmaPortsOf; ReadyRecord tells the others).
  std::string rdmaPorts;

  ~Impl() {
    dumpRegistration.reset();  // its GPU line reads gpu, which goes before it
    queue.shutdown(Status(ErrorCode::kAborted, "the communicator was destroyed before this operation ran"));
    // The sub-communicators' watchdogs point at this one's.
    hier.reset();
    // The transport goes first: requests it may still complete (the control receive, those
    // parked by failed calls) must outlive it.
    if (watchdog) watchdog->stop();
    // A root may still wait for this rank's acknowledgement of its last broadcasts.
    if (transport && error.isOk()) (void)coll::sendOwedAck(ctx);
    if (transport) transport->close(1.0, !error.isOk());
    transport.reset();
    arena.reset();
    watchdog.reset();
    ctx.graveyard.clear();
  }

  /// Whether sticky() can fail: checked inline on every call, sticky() itself only when it can.
  bool mayBeSticky() const { return !error.isOk() || gpu || (watchdog && watchdog->aborted()); }
  Status sticky() const {
    if (!error.isOk()) return error;
    // A device wait that timed out (its kernel trapped) fails every later call.
    if (gpu) {
      Status st = gpu->deviceError();
      if (!st.isOk()) return st;
    }
    return watchdog ? watchdog->abortStatus() : Status::ok();
  }

  /// The plan of a collective call: the tuner's choice for data-moving calls; barriers and calls
  /// that move no data synchronise through the arena when there is one. Where the tuner's trials
  /// of this call's kind are complete, the ranks first agree on their times (an internal all-reduce
  /// with its own sequence number, at the same call on every rank: their tuners run in step).
  Result<Tuner::Choice> plan(const OpDesc& desc) {
    if (desc.kind == CallKind::kBarrier || desc.count == 0) {
      static const coll::AlgorithmRow* const kNetworkBarrier =
          coll::findRow(CallKind::kBarrier, coll::Algorithm::kPairwise, coll::Protocol::kMessages);
      const coll::AlgorithmRow& row =
          desc.kind == CallKind::kBarrier && !arena ? *kNetworkBarrier : coll::emptyCallRow(arena != nullptr);
      Tuner::Choice c;
      c.plan = Plan{row.algorithm, row.protocol, 0, coll::Stores::kAuto, &row};
      return c;
    }
    if (desc.root == coll::kReproducibleRoot) {
      // The mailbox pipeline of arenaReproducible, in the tuner's chunks, whatever it would measure.
      Tuner::Choice c;
      c.plan.algorithm = desc.kind == CallKind::kReduceScatter ? coll::Algorithm::kDirect : coll::Algorithm::kTwoShot;
      c.plan.protocol = coll::Protocol::kMailbox;
      c.plan.chunkBytes = tuner->chunkBytes();
      return c;
    }
    Tuner::Choice c = tuner->select(desc, ctx.peersShared);
    if (c.trial >= 0 || c.settle) ++measuredCalls;
    if (c.settle) {
      // On one host the ranks share a clock: the trials are judged by the last rank's ends.
      // Across hosts each rank measures its own intervals, and the slowest rank's count.
      std::vector<int64_t> v = tuner->callEnds(c);
      if (!arena) v = Tuner::intervals(v, tuner->inputs().trials);
      FERRY_TRY(agreeMax(v));
      tuner->settle(c, v, arena == nullptr);
      c = tuner->select(desc, ctx.peersShared);
    }
    return c;
  }

  /// v = the element-wise max of every rank's v: through the arena (one-shot: a few bytes), or
  /// by recursive doubling over the transport.
  Status agreeMax(std::vector<int64_t>& v) {
    OpDesc d{CallKind::kAllReduce, v.size(), DataType::kInt64, RedOp::kMax, coll::kTunerAgreementRoot};
    coll::Exec ex(ctx, d, ++seq, coll::TagClass::kCollective, config().timeout);
    static const coll::AlgorithmRow* const kOnHost =
        coll::findRow(CallKind::kAllReduce, coll::Algorithm::kOneShot, coll::Protocol::kMailbox);
    static const coll::AlgorithmRow* const kOverNetwork =
        coll::findRow(CallKind::kAllReduce, coll::Algorithm::kDoubling, coll::Protocol::kMessages);
    const coll::AlgorithmRow& row = arena ? *kOnHost : *kOverNetwork;
    if (arena) ex.post(0);
    Status st = row.run(ex, Plan{row.algorithm, row.protocol, 0, coll::Stores::kAuto, &row},
                        Call::allReduce(v.data(), v.data(), v.size(), DataType::kInt64, RedOp::kMax));
    return st.isOk() ? st : fail(ex, st);
  }

  /// Run a validated collective call: in the reproducible mode, the calls it changes through
  /// integer collectives (collectives/reproducible.hpp); the others as planned.
  Status runCollective(const Call& call) {
    if (reproducible && coll::reproducibleApplies(call)) {
      std::function<Status(const Call&)> pipelined;
      if (arena) pipelined = [this](const Call& c) { return runReproducibleOnArena(c); };
      return coll::runReproducible(
          call, rank, size, repro, [this](const Call& c) { return runPlanned(c); }, pipelined);
    }
    return runPlanned(call);
  }

  /// The reproducible mode's one-call all-reduce or reduce-scatter on one host
  /// (coll::arenaReproducible): its plan is fixed (plan()), so the tuner neither prices nor times it.
  Status runReproducibleOnArena(const Call& call) {
    const OpDesc desc{call.kind, call.count, call.type, call.op, coll::kReproducibleRoot};
    return run(desc, coll::TagClass::kCollective,
               [&](coll::Exec& ex, const Plan& p) { return coll::arenaReproducible(ex, p, call); });
  }

  /// Run a validated collective call through the row of the algorithm its plan chose.
  Status runPlanned(const Call& call) {
    const bool rooted = call.kind == CallKind::kBroadcast || call.kind == CallKind::kReduce;
    const OpDesc desc{call.kind, call.count, call.type, call.op, rooted ? call.root : -1};
    return run(desc, coll::TagClass::kCollective, [&](coll::Exec& ex, const Plan& p) -> Status {
      const coll::AlgorithmRow* row = p.row != nullptr ? p.row : coll::findRow(call.kind, p.algorithm, p.protocol);
      if (row == nullptr) {
        return makeError(ErrorCode::kInternalError, "%s on rank %d: the algorithm table has no row %s/%s", call.name(),
                         rank, coll::algorithmName(p.algorithm), coll::protocolName(p.protocol));
      }
      return row->run(ex, p, call);
    });
  }

  /// Run one call: `body(ex, plan)` under the communicator's deadline, with a sticky error, a
  /// drain of what a failed call left in flight and a report to the other ranks.
  template <typename Body>
  Status run(const OpDesc& desc, coll::TagClass cls, Body&& body) {
    auto exclusive = queue.acquire();
    if (mayBeSticky()) FERRY_TRY(sticky());
    Tuner::Choice choice;
    if (cls == coll::TagClass::kCollective) {
      // A call that repeats the last one the model alone planned: that plan, without the call.
      if (const Plan* repeated = tuner->repeatsModelled(desc, ctx.peersShared)) {
        choice.plan = *repeated;
      } else {
        // Before this call's sequence number: choosing may run the tuner's agreement call first.
        auto c = plan(desc);
        FERRY_TRY(c);
        choice = *c;
      }
    }
    uint64_t s = cls == coll::TagClass::kCollective ? ++seq : ++p2pSeq;
    FERRY_TRACE(log::kColl, "comm %016llx %s #%llu", static_cast<unsigned long long>(id), coll::describe(desc).c_str(),
                static_cast<unsigned long long>(s));
    coll::Exec ex(ctx, desc, s, cls, config().timeout);
    // "Entered this call": what claimMailbox() waits for before a rank reuses a mailbox, and
    // what Exec::begin may wait for on the peers.
    if (arena && cls == coll::TagClass::kCollective) ex.post(0);
    // Earlier calls that waited on nobody are compared first (Exec::begin).
    Status st = ex.begin();
    if (st.isOk() && cls == coll::TagClass::kCollective) {
      const Plan p = choice.plan;
      if (p.protocol == coll::Protocol::kMessages) {
        // Announced even when the data goes by messages, so a peer that chose differently (or
        // runs another call) is named at once by whichever side waits.
        ex.announce(static_cast<uint32_t>(p.algorithm), static_cast<uint32_t>(p.protocol), nullptr, nullptr);
      }
      // A two-level plan under trial is timed with its levels' kept (or modelled) plans: their
      // own trials, run in the same calls, would be charged to it (Tuner::holdTrials).
      const bool hold = choice.trial >= 0 && p.algorithm == coll::Algorithm::kHierarchical && hier;
      if (hold) holdLevelTrials(true);
      if (choice.trial >= 0) tuner->recordStart(choice, steadyNs());
      st = body(ex, p);
      if (hold) holdLevelTrials(false);
      if (!st.isOk() && p.algorithm == coll::Algorithm::kHierarchical) {
        // The levels' calls have numbers and counts of their own: name the caller's call first.
        st = makeError(st.code(), "%s #%llu on rank %d: %s", coll::describe(desc).c_str(),
                       static_cast<unsigned long long>(s), rank, st.message().c_str());
      }
      // A rank that waited on no peer compares its call with theirs (call logs, acknowledgements).
      if (st.isOk()) st = ex.finish();
      if (st.isOk() && tuner->opensRun(choice)) {
        // The run's timed calls start together (Tuner::opensRun): a rank that ran ahead into them
        // would do part of their work before the clock starts.
        std::vector<int64_t> fence{0};
        FERRY_TRY(agreeMax(fence));  // agreeMax reports its own failure
      }
      if (st.isOk() && choice.trial >= 0) tuner->record(choice, steadyNs());
    } else if (st.isOk()) {
      st = body(ex, Plan{});
    }
    return st.isOk() ? st : fail(ex, st);
  }

  void holdLevelTrials(bool held) {
    hier->local().impl_->tuner->holdTrials(held);
    hier->cross().impl_->tuner->holdTrials(held);
  }

  /// A call failed: the error becomes sticky and the other ranks hear of it.
  Status fail(coll::Exec& ex, const Status& st) {
    error = st;
    if (st.code() == ErrorCode::kTimeout && !arena && watchdog && ex.tagClass() == coll::TagClass::kCollective &&
        st.message().find("have not reached") == std::string::npos) {
      // Over messages nothing shows where the other ranks are: ask them (those blocked in ferry
      // answer within milliseconds; the rest are named as not answering).
      bool mismatch = false;
      Status reported;
      std::string where = watchdog->whoIsBehind(ex.seq(), 1.0, ex.desc(), &mismatch, &reported);
      error = !reported.isOk() ? Status(st.code(), st.message() + "; " + reported.message())
                               : Status(mismatch ? ErrorCode::kMismatch : st.code(), st.message() + "; " + where);
    }
    FERRY_WARN(log::kColl, "%s", error.message().c_str());
    // Retire what the failed call posted before its buffers go back to the caller.
    if (!ex.drain(0.2)) FERRY_INFO(log::kColl, "transfers of the failed call still in flight after 0.2 s");
    if (watchdog) watchdog->report(error);
    // Other ranks may still be trying to reach this one: close now so they see it fail fast.
    if (transport) transport->close(0.2, true);
    return error;
  }

  static int64_t steadyNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace ferry
