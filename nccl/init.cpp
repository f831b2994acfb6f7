// Entry points that create communicators: ncclGetVersion, ncclGetUniqueId, ncclCommInitRank,
// ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll, ncclCommSplit and ncclCommShrink.
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"
#include "nccl/comm_init.hpp"
#include "nccl/group.hpp"

using namespace ferry::nccl;
using ferry::Status;

namespace {

// Checks shared by ncclCommInitRank and ncclCommInitRankConfig, then the join itself: queued in a
// group, in the background for a non-blocking config, else here.
Outcome initRank(const char* fn, ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                 const ncclConfig_t* config) {
  if (comm == nullptr) return argError(fn, "comm is NULL (it receives the new communicator)");
  *comm = nullptr;
  if (nranks < 1) return argError(fn, "nranks %d is invalid (expected nranks >= 1)", nranks);
  if (rank < 0 || rank >= nranks) {
    return argError(fn, "rank %d is out of range (expected 0 <= rank < nranks = %d)", rank, nranks);
  }
  auto blocking = readBlocking(fn, config, true);
  if (!blocking.isOk()) return blocking.status();
  InitRequest r;
  static_assert(sizeof(r.id.bytes) == sizeof(id.internal));
  std::memcpy(r.id.bytes, id.internal, sizeof(r.id.bytes));
  r.rank = rank;
  r.size = nranks;
  // NCCL's rule: the rank drives the calling thread's current device.
  int device = 0;
  if (ferry::gpu::deviceCount() > 0) {
    auto current = ferry::gpu::currentDevice(ferry::gpu::Where{rank, -1});
    if (!current.isOk()) return current.status();
    device = *current;
  }
  r.handle = new ncclComm(rank, nranks, device, *blocking);
  *comm = r.handle;
  if (inGroup()) {
    enqueueInit(r);
    return Status::ok();
  }
  if (!*blocking) {
    launchInit(r);
    return Outcome::inProgress();
  }
  Status st = runInit(r);
  if (!st.isOk()) {
    delete r.handle;
    *comm = nullptr;
  }
  return st;
}

}  // namespace

extern "C" ncclResult_t pncclGetVersion(int* version) {
  return entry("ncclGetVersion", [&]() -> Status {
    if (version == nullptr) return argError("ncclGetVersion", "version is NULL");
    *version = NCCL_VERSION_CODE;
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclGetVersion)

extern "C" ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  return entry("ncclGetUniqueId", [&]() -> Status {
    if (uniqueId == nullptr) return argError("ncclGetUniqueId", "uniqueId is NULL");
    auto id = makeUniqueId();
    if (!id.isOk()) return id.status();
    std::memcpy(uniqueId->internal, id->bytes, sizeof(uniqueId->internal));
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclGetUniqueId)

extern "C" ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return entry("ncclCommInitRank", [&] { return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr); });
}
FERRY_NCCL_ALIAS(ncclCommInitRank)

extern "C" ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommInitRankConfig";
  return entry(fn, [&] { return initRank(fn, comm, nranks, commId, rank, config); });
}
FERRY_NCCL_ALIAS(ncclCommInitRankConfig)

extern "C" ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommInitRankScalable";
  return entry(fn, [&]() -> Outcome {
    if (newcomm != nullptr) *newcomm = nullptr;
    if (nId < 1 || nId > nranks) {
      return argError(fn, "nId %d is invalid on rank %d (expected 1 <= nId <= nranks = %d)", nId, myrank, nranks);
    }
    if (commIds == nullptr) return argError(fn, "commIds is NULL on rank %d (expected %d ids)", myrank, nId);
    // NCCL spreads its rendezvous over the ids to speed up large jobs; ferry's needs one root, and
    // every rank holds the same first id, so all join through it.
    return initRank(fn, newcomm, nranks, commIds[0], myrank, config);
  });
}
FERRY_NCCL_ALIAS(ncclCommInitRankScalable)

extern "C" ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  constexpr const char* fn = "ncclCommInitAll";
  return entry(fn, [&]() -> Status {
    if (comms == nullptr) return argError(fn, "comm is NULL (it receives ndev communicators)");
    if (ndev < 1) return argError(fn, "ndev %d is invalid (expected ndev >= 1)", ndev);
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    auto id = makeUniqueId();
    if (!id.isOk()) return id.status();
    // Every rank's join blocks until all ranks joined: one thread per rank.
    std::vector<InitRequest> requests(static_cast<size_t>(ndev));
    std::vector<Status> results(static_cast<size_t>(ndev));
    for (int i = 0; i < ndev; ++i) {
      requests[i] = InitRequest{new ncclComm(i, ndev, devlist != nullptr ? devlist[i] : i, true), *id, i, ndev};
    }
    {
      std::vector<std::jthread> threads;
      for (int i = 1; i < ndev; ++i) threads.emplace_back([&, i] { results[i] = runInit(requests[i]); });
      results[0] = runInit(requests[0]);
    }
    Status first;
    for (const Status& s : results) {
      if (!s.isOk() && first.isOk()) first = s;
    }
    for (int i = 0; i < ndev; ++i) {
      if (first.isOk()) {
        comms[i] = requests[i].handle;
      } else {
        delete requests[i].handle;
      }
    }
    return first;
  });
}
FERRY_NCCL_ALIAS(ncclCommInitAll)

extern "C" ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommSplit";
  return entry(fn, [&]() -> Outcome {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (newcomm == nullptr) return argError(fn, "newcomm is NULL (it receives the new communicator)");
    *newcomm = nullptr;
    auto blocking = readBlocking(fn, config, comm->blocking);
    if (!blocking.isOk()) return blocking.status();
    // Runs at once, also inside a group and for a non-blocking config: the split is a collective
    // on the parent, and the new communicator is ready when it returns.
    std::unique_ptr<ferry::Comm> child;
    Outcome o = comm->call(fn, [&](ferry::Comm& c) -> Status {
      auto r = c.split(color, key);
      if (!r.isOk()) return r.status();
      child = std::move(r.value());
      return Status::ok();
    });
    if (!o.status.isOk() || !child) return o;  // NCCL_SPLIT_NOCOLOR: no communicator
    auto* h = new ncclComm(child->rank(), child->size(), comm->device, *blocking);
    h->finishInit(std::move(child));
    *newcomm = h;
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommSplit)

extern "C" ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  constexpr const char* fn = "ncclCommShrink";
  return entry(fn, [&]() -> Outcome {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (newcomm == nullptr) return argError(fn, "newcomm is NULL (it receives the new communicator)");
    *newcomm = nullptr;
    if (excludeRanksCount < 0) return argError(fn, "excludeRanksCount is %d (expected >= 0)", excludeRanksCount);
    if (excludeRanksCount > 0 && excludeRanksList == nullptr) {
      return argError(fn, "excludeRanksList is NULL with excludeRanksCount %d", excludeRanksCount);
    }
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
      return argError(fn, "shrinkFlags is %d (expected NCCL_SHRINK_DEFAULT = 0 or NCCL_SHRINK_ABORT = 1)", shrinkFlags);
    }
    auto blocking = readBlocking(fn, config, comm->blocking);
    if (!blocking.isOk()) return blocking.status();
    // A call blocked on the dead ranks holds the communicator: abort it first when asked to.
    if (shrinkFlags == NCCL_SHRINK_ABORT) comm->abortCalls("ncclCommShrink with NCCL_SHRINK_ABORT");
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    std::unique_ptr<ferry::Comm> child;
    Outcome o = comm->call(fn, [&](ferry::Comm& c) -> Status {
      auto r = c.shrink(exclude);
      if (!r.isOk()) return r.status();
      child = std::move(r.value());
      return Status::ok();
    });
    if (!o.status.isOk()) return o;
    auto* h = new ncclComm(child->rank(), child->size(), comm->device, *blocking);
    h->finishInit(std::move(child));
    *newcomm = h;
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommShrink)
