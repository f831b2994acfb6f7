// Entry points about an existing communicator: ncclCommFinalize, ncclCommRevoke, ncclCommDestroy,
// ncclCommAbort, ncclCommGetAsyncError, ncclCommCount, ncclCommCuDevice and ncclCommUserRank.
#include "nccl/comm_handle.hpp"

using namespace ferry::nccl;
using ferry::Status;

namespace {

// The body of the three queries: check both pointers, then write the field.
template <typename Field>
ncclResult_t query(const char* fn, ncclComm_t comm, int* out, const char* outName, Field field) {
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (out == nullptr) return argError(fn, "%s is NULL", outName);
    *out = field(*comm);
    return Status::ok();
  });
}

}  // namespace

extern "C" ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  constexpr const char* fn = "ncclCommFinalize";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    return comm->finalize(fn);
  });
}
FERRY_NCCL_ALIAS(ncclCommFinalize)

extern "C" ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  constexpr const char* fn = "ncclCommRevoke";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
      return argError(fn, "revokeFlags %d on rank %d is not valid (expected NCCL_REVOKE_DEFAULT = 0)", revokeFlags,
                      comm->rank);
    }
    return comm->revoke(fn);
  });
}
FERRY_NCCL_ALIAS(ncclCommRevoke)

extern "C" ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  constexpr const char* fn = "ncclCommDestroy";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return Status::ok();  // as NCCL: destroying nothing succeeds
    Status st = ncclComm::close(comm, false);
    return st.isOk() ? st : usageError(fn, "%s", st.message().c_str());
  });
}
FERRY_NCCL_ALIAS(ncclCommDestroy)

extern "C" ncclResult_t pncclCommAbort(ncclComm_t comm) {
  constexpr const char* fn = "ncclCommAbort";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return Status::ok();
    Status st = ncclComm::close(comm, true);
    return st.isOk() ? st : usageError(fn, "%s", st.message().c_str());
  });
}
FERRY_NCCL_ALIAS(ncclCommAbort)

extern "C" ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  constexpr const char* fn = "ncclCommGetAsyncError";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (asyncError == nullptr) return argError(fn, "asyncError is NULL");
    Status st = comm->asyncStatus();
    *asyncError = toResult(st);
    // The caller's next ncclGetLastError should explain a failure it has just been told of.
    if (!st.isOk() && st.code() != ferry::ErrorCode::kInProgress) setLastError(st.message());
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommGetAsyncError)

extern "C" ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return query("ncclCommCount", comm, count, "count", [](const ncclComm& c) { return c.size; });
}
FERRY_NCCL_ALIAS(ncclCommCount)

extern "C" ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return query("ncclCommCuDevice", comm, device, "device", [](const ncclComm& c) { return c.device; });
}
FERRY_NCCL_ALIAS(ncclCommCuDevice)

extern "C" ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return query("ncclCommUserRank", comm, rank, "rank", [](const ncclComm& c) { return c.rank; });
}
FERRY_NCCL_ALIAS(ncclCommUserRank)
