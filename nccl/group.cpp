// ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd and what the outermost end runs (see group.hpp).
#include "nccl/group.hpp"

#include <cstddef>
#include <thread>
#include <utility>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"

namespace ferry::nccl {
namespace {

constexpr unsigned kSimInfoMagic = 0x74685283;

struct Queued {
  ncclComm_t comm;
  Op op;
};

struct GroupState {
  int depth = 0;
  std::vector<Queued> ops;
  std::vector<InitRequest> inits;
  Status error;
};

thread_local GroupState tGroup;

// One communicator's share of the group: collectives in order, then one point-to-point batch.
Outcome runOnComm(ncclComm_t comm, const std::vector<const Op*>& ops) {
  return comm->call("ncclGroupEnd", [&](Comm& c) -> Status {
    std::vector<const Op*> p2p;
    for (const Op* op : ops) {
      if (op->pointToPoint()) {
        p2p.push_back(op);
      } else {
        FERRY_TRY(runCollective(c, *op));
      }
    }
    if (!p2p.empty()) FERRY_TRY(runPointToPoint(c, p2p));
    return Status::ok();
  });
}

Outcome startInits(const std::vector<InitRequest>& inits) {
  for (const InitRequest& r : inits) launchInit(r);
  Status first;
  for (const InitRequest& r : inits) {
    if (!r.handle->blocking) continue;  // the application polls ncclCommGetAsyncError
    Status st = r.handle->waitInit();
    if (!st.isOk() && first.isOk()) first = st;
  }
  return first;
}

// Calls on device buffers: recorded in one ferry group, whose end fuses each communicator's
// kernels (runtime/cuda/group.hpp).
Outcome runDeviceOps(const std::vector<const Queued*>& queued) {
  if (queued.empty()) return Status::ok();
  (void)ferry::groupStart();
  Outcome first(Status::ok());
  for (const Queued* q : queued) {
    Outcome o = q->comm->call("ncclGroupEnd", [&](Comm& c) { return runOnStream(c, q->op); });
    if (!o.status.isOk() && first.status.isOk()) first = o;
  }
  Status end = ferry::groupEnd();
  if (!first.status.isOk()) return first;
  return end;
}

Outcome runOps(const std::vector<Queued>& queued) {
  std::vector<const Queued*> device;
  for (const Queued& q : queued) {
    if (q.op.device()) device.push_back(&q);
  }
  Outcome d = runDeviceOps(device);
  if (!d.status.isOk()) return d;
  // Split by communicator, in order of first appearance.
  std::vector<std::pair<ncclComm_t, std::vector<const Op*>>> perComm;
  for (const Queued& q : queued) {
    if (q.op.device()) continue;
    auto it = perComm.begin();
    while (it != perComm.end() && it->first != q.comm) ++it;
    if (it == perComm.end()) it = perComm.insert(perComm.end(), {q.comm, {}});
    it->second.push_back(&q.op);
  }
  std::vector<Outcome> results(perComm.size(), Outcome(Status::ok()));
  {
    std::vector<std::jthread> threads;
    for (size_t i = 1; i < perComm.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = runOnComm(perComm[i].first, perComm[i].second); });
    }
    if (!perComm.empty()) results[0] = runOnComm(perComm[0].first, perComm[0].second);
  }
  for (Outcome& r : results) {
    if (!r.status.isOk()) return r;
  }
  return Status::ok();
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void enqueue(ncclComm_t comm, Op op) { tGroup.ops.push_back({comm, std::move(op)}); }

void enqueueInit(const InitRequest& request) { tGroup.inits.push_back(request); }

void noteGroupError(const Status& status) {
  if (tGroup.error.isOk()) tGroup.error = status;
}

}  // namespace ferry::nccl

using namespace ferry::nccl;
using ferry::Status;

extern "C" ncclResult_t pncclGroupStart(void) {
  return entry("ncclGroupStart", []() -> Status {
    ++tGroup.depth;
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclGroupStart)

extern "C" ncclResult_t pncclGroupEnd(void) {
  constexpr const char* fn = "ncclGroupEnd";
  return entry(fn, []() -> Outcome {
    if (tGroup.depth == 0) return usageError(fn, "no group is open on this thread (ncclGroupStart was not called)");
    if (--tGroup.depth > 0) return Status::ok();
    GroupState g = std::move(tGroup);
    tGroup = GroupState{};
    if (!g.error.isOk()) {
      // Nothing runs; the handles of queued inits learn why.
      for (const InitRequest& r : g.inits) {
        Status why(ferry::ErrorCode::kInvalidUsage, "not initialized: its group failed: " + g.error.message());
        if (r.handle->finishInit(why)) delete r.handle;
      }
      return Status(g.error.code(), std::string(fn) + ": a call in the group failed: " + g.error.message());
    }
    FERRY_TRACE(ferry::log::kColl, "group end: %zu calls, %zu inits", g.ops.size(), g.inits.size());
    Outcome inits = startInits(g.inits);
    if (!inits.status.isOk()) return inits;
    return runOps(g.ops);
  });
}
FERRY_NCCL_ALIAS(ncclGroupEnd)

extern "C" ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  constexpr const char* fn = "ncclGroupSimulateEnd";
  return entry(fn, [&]() -> Outcome {
    if (simInfo == nullptr) return argError(fn, "simInfo is NULL (it receives the estimate)");
    if (simInfo->magic != kSimInfoMagic || simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)) {
      return argError(fn, "simInfo was not initialized with NCCL_SIM_INFO_INITIALIZER (magic 0x%x, size %zu)",
                      simInfo->magic, simInfo->size);
    }
    if (tGroup.depth == 0) return usageError(fn, "no group is open on this thread (ncclGroupStart was not called)");
    if (--tGroup.depth > 0) return Status::ok();
    GroupState g = std::move(tGroup);
    tGroup = GroupState{};
    if (!g.error.isOk()) {
      return Status(g.error.code(), std::string(fn) + ": a call in the group failed: " + g.error.message());
    }
    // Communicators are joined as ncclGroupEnd would: they exist afterwards. Calls only get priced.
    Outcome inits = startInits(g.inits);
    if (!inits.status.isOk()) return inits;
    double seconds = 0;
    for (const Queued& q : g.ops) {
      Outcome o = q.comm->call(fn, [&](ferry::Comm& c) -> Status {
        seconds += predictSeconds(c, q.op);
        return Status::ok();
      });
      if (!o.status.isOk()) return o;
    }
    simInfo->estimatedTime = static_cast<float>(seconds * 1e6);
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclGroupSimulateEnd)
