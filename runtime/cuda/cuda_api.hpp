// The runtime's only door to the CUDA runtime API. Every call the runtime makes goes through these
// wrappers, which turn a cudaError_t into a Status whose message names the CUDA call, its main
// argument, the rank and the device ("cudaMalloc(1048576 bytes) on rank 2, device 1: out of memory
// (cudaErrorMemoryAllocation)"). Nothing else in ferry includes cuda_runtime.h on the host side.
//
// Built without CUDA (no nvcc at configure time), the same functions exist and fail with "ferry was
// built without CUDA"; deviceCount() is 0 and every pointer is host memory, so the rest of the
// runtime needs no #if. Built with CUDA on a machine without a driver or a GPU (CI), the CUDA
// runtime itself reports the failure and deviceCount() is 0 as well: ferry stays on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/comm.hpp"
#include "ferry/status.hpp"

namespace ferry::gpu {

/// Who makes a call, for error messages (device -1: none yet).
struct Where {
  int rank = -1;
  int device = -1;
};

/// True when ferry was built with the CUDA backend.
bool built();
/// Checks a rank's device request (`fn`'s argument): -1 for none, or a device >= 0 in a build with
/// CUDA. Whether that device exists is for the CUDA calls that use it to say.
Status checkDeviceRequest(const char* fn, int rank, int device);
/// Devices the driver shows this process; 0 without CUDA, driver or GPU (computed once).
int deviceCount();

/// Where a pointer's memory lives, as far as the kernels are concerned.
enum class MemKind {
  kHost,    ///< ordinary or pinned host memory: the host algorithms read it
  kDevice,  ///< device or managed memory: only kernels (or copies) may touch it
};
/// The kind of `p`; kHost whenever CUDA cannot tell (no driver, no device, unknown pointer).
MemKind pointerKind(const void* p);

/// The properties the runtime plans with.
struct DeviceProps {
  int multiprocessors = 0;
  uint8_t uuid[16] = {};  ///< identifies the GPU across processes (device ordinals do not)
  std::string name;
};

Status setDevice(int device, Where w);
/// The calling thread's current device.
Result<int> currentDevice(Where w);
Result<DeviceProps> deviceProps(int device, Where w);
/// The ordinal of the GPU with `uuid` in this process, or -1 when this process cannot see it.
int deviceByUuid(const uint8_t uuid[16]);
/// Whether `device` can map memory of `peer` (both ordinals of this process).
bool canAccessPeer(int device, int peer);
/// Let the current device map `peer`'s memory (already enabled counts as success).
Status enablePeerAccess(int peer, Where w);

/// Device memory on the current device.
Result<void*> deviceAlloc(size_t bytes, Where w);
void deviceFree(void* p);
Status memsetZero(void* p, size_t bytes, Where w);
/// Synchronous host-to-device copy (init only).
Status copyToDevice(void* dst, const void* src, size_t bytes, Where w);
Status synchronizeDevice(Where w);

/// Pinned host memory (staging).
Result<void*> hostAlloc(size_t bytes, Where w);
void hostFree(void* p);
/// Pinned host memory the device addresses too (zero-filled): the host pointer and the device's.
struct MappedHost {
  void* host = nullptr;
  void* device = nullptr;
};
Result<MappedHost> hostAllocMapped(size_t bytes, Where w);
/// True for the legacy default stream (null or cudaStreamLegacy), which waits for every other
/// blocking stream of its device: two ranks of one GPU issuing on it serialise each other.
bool isLegacyDefaultStream(Stream s);

/// cudaIpcMemHandle_t, as bytes.
struct IpcHandle {
  uint8_t bytes[64] = {};
};
Result<IpcHandle> ipcHandle(void* devicePtr, Where w);
/// Map a peer process's allocation into this process (on the current device).
Result<void*> ipcOpen(const IpcHandle& handle, int peerRank, Where w);
void ipcClose(void* p);

/// Stream-ordered pieces (capture-safe).
Status streamSynchronize(Stream s, Where w);
/// True while `s` is being captured into a graph.
Result<bool> streamCapturing(Stream s, Where w);
Status copyAsync(void* dst, const void* src, size_t bytes, Stream s, Where w);
Status launchHostFunc(Stream s, void (*fn)(void*), void* arg, Where w);

/// "out of memory (cudaErrorMemoryAllocation)" for a cudaError_t value.
std::string errorText(int error);
/// The Status for a failed launch (error is a cudaError_t from launchWorkList).
Status launchError(int error, const std::string& what, Where w);

}  // namespace ferry::gpu
