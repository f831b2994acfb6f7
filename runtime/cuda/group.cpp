// Groups of stream-ordered calls (see group.hpp).
#include "runtime/cuda/group.hpp"

#include <thread>
#include <utility>

#include "base/log.hpp"

namespace ferry {
namespace gpu {
namespace {

struct Recorded {
  Comm* comm = nullptr;
  DeviceContext* ctx = nullptr;
  StreamCall call;
};

struct GroupState {
  int depth = 0;
  std::vector<Recorded> calls;
  Status error;
};

thread_local GroupState tGroup;

Status issueGroup(std::vector<Recorded> recorded) {
  std::vector<std::pair<Recorded, std::vector<StreamCall>>> perComm;
  for (const Recorded& r : recorded) {
    auto it = perComm.begin();
    while (it != perComm.end() && it->first.comm != r.comm) ++it;
    if (it == perComm.end()) it = perComm.insert(perComm.end(), {r, {}});
    it->second.push_back(r.call);
  }
  // Route every communicator's share first: a call that cannot run stops the whole group here.
  std::vector<RoutedCalls> routed;
  for (auto& [first, calls] : perComm) {
    auto r = routeCalls(*first.comm, first.ctx, calls);
    FERRY_TRY(r);
    routed.push_back(std::move(*r));
  }
  // Two ranks of one communicator on one stream would wait for each other forever (the second
  // kernel queues behind the first): refused before anything is enqueued.
  for (size_t i = 0; i < perComm.size(); ++i) {
    for (size_t j = i + 1; j < perComm.size(); ++j) {
      const DeviceContext* a = perComm[i].first.ctx;
      const DeviceContext* b = perComm[j].first.ctx;
      if (a == nullptr || b == nullptr || a->commId() != b->commId() || a->path() != DevicePath::kKernel) continue;
      for (Stream s : routed[i].deviceStreams) {
        for (Stream t : routed[j].deviceStreams) {
          if (s != t || isLegacyDefaultStream(s)) continue;  // the legacy stream: issueDevice says why
          return makeError(ErrorCode::kInvalidUsage,
                           "%s: ranks %d and %d of one communicator issue on the same stream %p (devices %d and %d); "
                           "each kernel waits for the other, and one stream runs them one after the other. Give "
                           "each rank a stream of its own",
                           describe(routed[i].deviceWorks[0][0], false).c_str(), perComm[i].first.comm->rank(),
                           perComm[j].first.comm->rank(), s, a->device(), b->device());
        }
      }
    }
  }
  // Device work is only enqueued: one thread issues it all, in order.
  for (size_t i = 0; i < perComm.size(); ++i)
    FERRY_TRY(issueDevice(*perComm[i].first.comm, perComm[i].first.ctx, routed[i]));
  // Host work blocks until the peers arrive: one thread per communicator that has some.
  std::vector<size_t> withHost;
  for (size_t i = 0; i < routed.size(); ++i) {
    if (!routed[i].hostWorks.empty()) withHost.push_back(i);
  }
  std::vector<Status> results(withHost.size());
  {
    std::vector<std::jthread> threads;
    for (size_t k = 1; k < withHost.size(); ++k) {
      threads.emplace_back([&, k] { results[k] = runHost(*perComm[withHost[k]].first.comm, routed[withHost[k]]); });
    }
    if (!withHost.empty()) results[0] = runHost(*perComm[withHost[0]].first.comm, routed[withHost[0]]);
  }
  for (Status& s : results) {
    if (!s.isOk()) return s;
  }
  return Status::ok();
}

}  // namespace

int groupDepth() { return tGroup.depth; }

Status submit(Comm& comm, DeviceContext* ctx, const Status& checked, const DevWork& work, Stream stream) {
  if (tGroup.depth > 0) {
    if (!checked.isOk()) {
      if (tGroup.error.isOk()) tGroup.error = checked;
      return checked;
    }
    tGroup.calls.push_back({&comm, ctx, {work, stream}});
    return Status::ok();
  }
  FERRY_TRY(checked);
  return issueCalls(comm, ctx, {StreamCall{work, stream}});
}

}  // namespace gpu

Status groupStart() {
  ++gpu::tGroup.depth;
  return Status::ok();
}

Status groupEnd() {
  auto& g = gpu::tGroup;
  if (g.depth == 0) {
    return Status(ErrorCode::kInvalidUsage, "groupEnd: no group is open on this thread (groupStart was not called)");
  }
  if (--g.depth > 0) return Status::ok();
  gpu::GroupState done = std::move(g);
  g = gpu::GroupState{};
  if (!done.error.isOk()) {
    return Status(done.error.code(), "groupEnd: a call in the group failed, so none of its " +
                                         std::to_string(done.calls.size()) +
                                         " recorded calls ran: " + done.error.message());
  }
  FERRY_TRACE(log::kColl, "group end: %zu stream-ordered calls", done.calls.size());
  Status st = gpu::issueGroup(std::move(done.calls));
  if (!st.isOk()) return Status(st.code(), "groupEnd: " + st.message());
  return st;
}

}  // namespace ferry
