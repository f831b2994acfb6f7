// The CUDA runtime wrappers of cuda_api.hpp: one section with CUDA, one without.
#include "runtime/cuda/cuda_api.hpp"

#include <cstring>

#if FERRY_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace ferry::gpu {

namespace {
std::string where(Where w) {
  return "rank " + std::to_string(w.rank) + (w.device >= 0 ? ", device " + std::to_string(w.device) : "");
}
}  // namespace

#if FERRY_HAVE_CUDA

namespace {

// The Status of a failed call; clears CUDA's last error so the next call starts clean.
Status fail(cudaError_t e, const std::string& call, Where w) {
  (void)cudaGetLastError();
  return Status(ErrorCode::kUnhandledCudaError, call + " on " + where(w) + ": " + errorText(e));
}

#define FERRY_CUDA_CALL(expr, text, w)                                         \
  do {                                                                         \
    cudaError_t ferry_cuda_e_ = (expr);                                        \
    if (ferry_cuda_e_ != cudaSuccess) return fail(ferry_cuda_e_, (text), (w)); \
  } while (0)

cudaStream_t native(Stream s) { return reinterpret_cast<cudaStream_t>(s); }

}  // namespace

bool built() { return true; }

int deviceCount() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

MemKind pointerKind(const void* p) {
  if (p == nullptr || deviceCount() == 0) return MemKind::kHost;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return MemKind::kHost;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? MemKind::kDevice : MemKind::kHost;
}

Status setDevice(int device, Where w) {
  FERRY_CUDA_CALL(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")", w);
  return Status::ok();
}

Result<int> currentDevice(Where w) {
  int d = -1;
  FERRY_CUDA_CALL(cudaGetDevice(&d), "cudaGetDevice", w);
  return d;
}

Result<DeviceProps> deviceProps(int device, Where w) {
  DeviceProps p;
  FERRY_CUDA_CALL(cudaDeviceGetAttribute(&p.multiprocessors, cudaDevAttrMultiProcessorCount, device),
                  "cudaDeviceGetAttribute(multiprocessors, " + std::to_string(device) + ")", w);
  cudaDeviceProp prop{};
  FERRY_CUDA_CALL(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(" + std::to_string(device) + ")", w);
  static_assert(sizeof(prop.uuid) == sizeof(p.uuid));
  std::memcpy(p.uuid, &prop.uuid, sizeof(p.uuid));
  p.name = prop.name;
  return p;
}

int deviceByUuid(const uint8_t uuid[16]) {
  for (int d = 0; d < deviceCount(); ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (std::memcmp(&prop.uuid, uuid, 16) == 0) return d;
  }
  return -1;
}

bool canAccessPeer(int device, int peer) {
  if (device == peer) return true;
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, device, peer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return ok != 0;
}

Status enablePeerAccess(int peer, Where w) {
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return Status::ok();
  }
  FERRY_CUDA_CALL(e, "cudaDeviceEnablePeerAccess(peer device " + std::to_string(peer) + ")", w);
  return Status::ok();
}

Result<void*> deviceAlloc(size_t bytes, Where w) {
  void* p = nullptr;
  FERRY_CUDA_CALL(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)", w);
  return p;
}

void deviceFree(void* p) {
  if (p != nullptr && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

Status memsetZero(void* p, size_t bytes, Where w) {
  FERRY_CUDA_CALL(cudaMemset(p, 0, bytes), "cudaMemset(" + std::to_string(bytes) + " bytes)", w);
  return Status::ok();
}

Status copyToDevice(void* dst, const void* src, size_t bytes, Where w) {
  FERRY_CUDA_CALL(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                  "cudaMemcpy(" + std::to_string(bytes) + " bytes, host to device)", w);
  return Status::ok();
}

Status synchronizeDevice(Where w) {
  FERRY_CUDA_CALL(cudaDeviceSynchronize(), "cudaDeviceSynchronize", w);
  return Status::ok();
}

Result<void*> hostAlloc(size_t bytes, Where w) {
  void* p = nullptr;
  FERRY_CUDA_CALL(cudaMallocHost(&p, bytes), "cudaMallocHost(" + std::to_string(bytes) + " bytes)", w);
  return p;
}

Result<MappedHost> hostAllocMapped(size_t bytes, Where w) {
  void* p = nullptr;
  FERRY_CUDA_CALL(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                  "cudaHostAlloc(" + std::to_string(bytes) + " bytes, mapped)", w);
  std::memset(p, 0, bytes);
  void* d = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&d, p, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(p);
    return fail(e, "cudaHostGetDevicePointer", w);
  }
  return MappedHost{p, d};
}

bool isLegacyDefaultStream(Stream s) { return s == nullptr || native(s) == cudaStreamLegacy; }

void hostFree(void* p) {
  if (p != nullptr && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

Result<IpcHandle> ipcHandle(void* devicePtr, Where w) {
  cudaIpcMemHandle_t h{};
  FERRY_CUDA_CALL(cudaIpcGetMemHandle(&h, devicePtr), "cudaIpcGetMemHandle", w);
  IpcHandle out;
  static_assert(sizeof(h) == sizeof(out.bytes));
  std::memcpy(out.bytes, &h, sizeof(h));
  return out;
}

Result<void*> ipcOpen(const IpcHandle& handle, int peerRank, Where w) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.bytes, sizeof(h));
  void* p = nullptr;
  FERRY_CUDA_CALL(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                  "cudaIpcOpenMemHandle(rank " + std::to_string(peerRank) + "'s resources)", w);
  return p;
}

void ipcClose(void* p) {
  if (p != nullptr && cudaIpcCloseMemHandle(p) != cudaSuccess) (void)cudaGetLastError();
}

Status streamSynchronize(Stream s, Where w) {
  FERRY_CUDA_CALL(cudaStreamSynchronize(native(s)), "cudaStreamSynchronize", w);
  return Status::ok();
}

Result<bool> streamCapturing(Stream s, Where w) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  FERRY_CUDA_CALL(cudaStreamIsCapturing(native(s), &st), "cudaStreamIsCapturing", w);
  return st != cudaStreamCaptureStatusNone;
}

Status copyAsync(void* dst, const void* src, size_t bytes, Stream s, Where w) {
  FERRY_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, native(s)),
                  "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)", w);
  return Status::ok();
}

Status launchHostFunc(Stream s, void (*fn)(void*), void* arg, Where w) {
  FERRY_CUDA_CALL(cudaLaunchHostFunc(native(s), fn, arg), "cudaLaunchHostFunc", w);
  return Status::ok();
}

std::string errorText(int error) {
  auto e = static_cast<cudaError_t>(error);
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

#undef FERRY_CUDA_CALL

#else  // built without CUDA

namespace {
Status noCuda(const char* what, Where w) {
  return Status(ErrorCode::kInvalidUsage,
                std::string(what) + " on " + where(w) + ": ferry was built without CUDA (no nvcc at configure time)");
}
}  // namespace

bool built() { return false; }
int deviceCount() { return 0; }
MemKind pointerKind(const void*) { return MemKind::kHost; }
Status setDevice(int, Where w) { return noCuda("cudaSetDevice", w); }
Result<int> currentDevice(Where w) { return noCuda("cudaGetDevice", w); }
Result<DeviceProps> deviceProps(int, Where w) { return noCuda("cudaGetDeviceProperties", w); }
int deviceByUuid(const uint8_t*) { return -1; }
bool canAccessPeer(int, int) { return false; }
Status enablePeerAccess(int, Where w) { return noCuda("cudaDeviceEnablePeerAccess", w); }
Result<void*> deviceAlloc(size_t, Where w) { return noCuda("cudaMalloc", w); }
void deviceFree(void*) {}
Status memsetZero(void*, size_t, Where w) { return noCuda("cudaMemset", w); }
Status copyToDevice(void*, const void*, size_t, Where w) { return noCuda("cudaMemcpy", w); }
Status synchronizeDevice(Where w) { return noCuda("cudaDeviceSynchronize", w); }
Result<void*> hostAlloc(size_t, Where w) { return noCuda("cudaMallocHost", w); }
void hostFree(void*) {}
Result<MappedHost> hostAllocMapped(size_t, Where w) { return noCuda("cudaHostAlloc", w); }
bool isLegacyDefaultStream(Stream s) { return s == nullptr; }
Result<IpcHandle> ipcHandle(void*, Where w) { return noCuda("cudaIpcGetMemHandle", w); }
Result<void*> ipcOpen(const IpcHandle&, int, Where w) { return noCuda("cudaIpcOpenMemHandle", w); }
void ipcClose(void*) {}
Status streamSynchronize(Stream, Where w) { return noCuda("cudaStreamSynchronize", w); }
Result<bool> streamCapturing(Stream, Where w) { return noCuda("cudaStreamIsCapturing", w); }
Status copyAsync(void*, const void*, size_t, Stream, Where w) { return noCuda("cudaMemcpyAsync", w); }
Status launchHostFunc(Stream, void (*)(void*), void*, Where w) { return noCuda("cudaLaunchHostFunc", w); }
std::string errorText(int error) { return "CUDA error " + std::to_string(error) + " (ferry was built without CUDA)"; }

#endif

Status launchError(int error, const std::string& what, Where w) {
  return Status(ErrorCode::kUnhandledCudaError,
                "launching the collective kernel for " + what + " on " + where(w) + ": " + errorText(error));
}

Status checkDeviceRequest(const char* fn, int rank, int device) {
  if (device < -1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "%s on rank %d: device %d is invalid (expected a CUDA device >= 0, "
                     "or -1 for none)",
                     fn, rank, device);
  }
  if (device >= 0 && !built()) {
    return makeError(ErrorCode::kInvalidUsage,
                     "%s on rank %d: device %d was requested but ferry was built without "
                     "CUDA (reconfigure with nvcc on PATH, -Dcuda=enabled)",
                     fn, rank, device);
  }
  return Status::ok();
}

}  // namespace ferry::gpu
