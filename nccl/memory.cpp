// Memory entry points: ncclMemAlloc / ncclMemFree, ncclCommRegister / ncclCommDeregister and
// ncclCommWindowRegister / ncclCommWindowDeregister.
// Without a GPU, buffers are host memory: allocation is ferry::hostAlloc (shared memory the ranks
// of a host map) and registration makes a host buffer shared in place (registrations.hpp).
#include "ferry/memory.hpp"
#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"

namespace ferry::nccl {

Registrations::~Registrations() {
  for (auto& [handle, e] : entries_) {
    if (e->hostHandle != nullptr) (void)ferry::hostDeregister(e->hostHandle);
  }
}

void* Registrations::add(void* buffer, size_t bytes, bool window, void* hostHandle) {
  auto e = std::make_unique<Entry>(Entry{buffer, bytes, window, hostHandle});
  void* handle = e.get();
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace(handle, std::move(e));
  return handle;
}

bool Registrations::remove(void* handle, bool window) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end() || it->second->window != window) return false;
  if (it->second->hostHandle != nullptr) (void)ferry::hostDeregister(it->second->hostHandle);
  entries_.erase(it);
  return true;
}

namespace {
// ferry::hostRegister's handle for a host buffer, null for device memory or where the pages cannot
// be shared (a shared file mapping, read-only memory): NCCL's registration succeeds either way, and
// such a buffer takes the plain path.
void* registerHost(const char* fn, int rank, void* buff, size_t size) {
  if (buff == nullptr || size == 0 || ferry::gpu::pointerKind(buff) == ferry::gpu::MemKind::kDevice) return nullptr;
  auto h = ferry::hostRegister(buff, size);
  if (h.isOk()) return *h;
  FERRY_INFO(ferry::log::kInit, "%s on rank %d: %s; the buffer stays unshared", fn, rank, h.status().message().c_str());
  return nullptr;
}
}  // namespace

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
    *handle = comm->registrations.add(buff, size, false, registerHost(fn, comm->rank, buff, size));
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

extern "C" ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int winFlags) {
  constexpr const char* fn = "ncclCommWindowRegister";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (win == nullptr) return argError(fn, "win is NULL on rank %d (it receives the window)", comm->rank);
    *win = nullptr;
    if (buff == nullptr && size > 0) return argError(fn, "buff is NULL with size %zu on rank %d", size, comm->rank);
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
      return argError(
          fn, "winFlags %d on rank %d is not valid (expected NCCL_WIN_DEFAULT = 0 or NCCL_WIN_COLL_SYMMETRIC = 1)",
          winFlags, comm->rank);
    }
    // A host window is shared in place like a registration; a device window is recorded (the
    // stream-ordered path maps peers' buffers itself; NCCL's symmetric kernels have no counterpart).
    *win =
        static_cast<ncclWindow_t>(comm->registrations.add(buff, size, true, registerHost(fn, comm->rank, buff, size)));
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommWindowRegister)

extern "C" ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  constexpr const char* fn = "ncclCommWindowDeregister";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (!comm->registrations.remove(win, true)) {
      return argError(fn,
                      "win %p on rank %d was not returned by ncclCommWindowRegister on this communicator (or was "
                      "deregistered already)",
                      static_cast<void*>(win), comm->rank);
    }
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclCommWindowDeregister)
