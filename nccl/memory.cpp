// Memory entry points: ncclMemAlloc / ncclMemFree and ncclCommRegister / ncclCommDeregister.
// Without a GPU, buffers are host memory: allocation is ferry::hostAlloc (shared memory the ranks
// of a host map) and registration only records the buffer (registrations.hpp).
#include "ferry/memory.hpp"
#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"

namespace ferry::nccl {

void* Registrations::add(void* buffer, size_t bytes) {
  auto e = std::make_unique<Entry>(Entry{buffer, bytes});
  void* handle = e.get();
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace(handle, std::move(e));
  return handle;
}

bool Registrations::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.erase(handle) == 1;
}

}  // namespace ferry::nccl

using namespace ferry::nccl;
using ferry::Status;

extern "C" ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  constexpr const char* fn = "ncclMemAlloc";
  return entry(fn, [&]() -> Status {
    if (ptr == nullptr) return argError(fn, "ptr is NULL (it receives the allocation)");
    *ptr = nullptr;
    // With a GPU, NCCL's contract: device memory on the current device (what callers then pass as
    // device buffers). Without one, page-aligned host memory (ferry's host extension).
    if (ferry::gpu::deviceCount() > 0) {
      auto device = ferry::gpu::currentDevice(ferry::gpu::Where{});
      FERRY_TRY(device);
      auto mem = ferry::gpu::deviceAlloc(size > 0 ? size : 1, ferry::gpu::Where{-1, *device});
      FERRY_TRY(mem);
      *ptr = *mem;
      return Status::ok();
    }
    // Host memory the other ranks of this host map (ferry::hostAlloc): collectives on it read
    // peers' buffers in place, as NCCL's registered buffers let peers do on GPUs.
    auto p = ferry::hostAlloc(size);
    if (!p.isOk()) return Status(p.status().code(), std::string(fn) + ": " + p.status().message());
    *ptr = *p;
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclMemAlloc)

extern "C" ncclResult_t pncclMemFree(void* ptr) {
  return entry("ncclMemFree", [&]() -> Status {
    if (ptr != nullptr && ferry::gpu::pointerKind(ptr) == ferry::gpu::MemKind::kDevice) {
      ferry::gpu::deviceFree(ptr);
      return Status::ok();
    }
    Status st = ferry::hostFree(ptr);
    if (!st.isOk())
      return argError("ncclMemFree", "ptr %p was not returned by ncclMemAlloc (or was freed already)", ptr);
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclMemFree)

extern "C" ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  constexpr const char* fn = "ncclCommRegister";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (handle == nullptr) return argError(fn, "handle is NULL (it receives the registration)");
    if (buff == nullptr && size > 0) return argError(fn, "buff is NULL with size %zu", size);
    *handle = comm->registrations.add(buff, size);
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommRegister)

extern "C" ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  constexpr const char* fn = "ncclCommDeregister";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (!comm->registrations.remove(handle)) {
      return argError(fn,
                      "handle %p was not returned by ncclCommRegister on this communicator (or was "
                      "deregistered already)",
                      handle);
    }
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommDeregister)
