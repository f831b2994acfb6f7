// The boundary between the runtime and ferry's CUDA collective kernels (collectives/cuda/*.cu).
//
// The runtime allocates one zero-filled block of device memory per rank ("rank resources": FIFOs,
// LL buffers, counters, pointer-exchange slots), makes every peer's block addressable from this rank
// (same process: the pointer itself; other processes of the node: CUDA IPC), and calls
// buildDevComm() to get the trivially copyable DevComm the kernels read, which it copies to device
// memory once. Each collective is then one DevWork; a launch runs a list of them in order (NCCL's
// group fusion), on the caller's stream, without any host synchronisation, so that it can be
// captured in a CUDA graph: every counter the kernels need lives in the rank resources.
//
// The same code runs under the SIMT emulation (kernels/cuda/simt.hpp): rank resources are then
// host memory and launchWorkList runs the grid on host threads before returning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ferry/types.hpp"

namespace ferry::gpu {

/// What one DevWork does (its CallKind; never kBarrier). Counts are in elements of `type`, with NCCL's meanings:
///   kAllReduce      count = elements of send and recv
///   kReduceScatter  count = elements of recv (send has nRanks * count)
///   kAllGather      count = elements of send (recv has nRanks * count)
///   kAllToAll       count = elements sent to each peer (send and recv have nRanks * count)
///   kBroadcast      count = elements; root's send is copied to every rank's recv
///   kReduce         count = elements; recv written on root only
///   kSend / kRecv   count = elements; peer = the other rank

/// How data moves. kRing passes chunks around the ring through the neighbours' FIFOs (works
/// wherever the FIFOs are mapped, including across processes by CUDA IPC); kDirect reads and writes
/// the peers' user buffers themselves (single copy: needs every peer's buffers mapped in this
/// address space, i.e. ranks of one process).
enum class DevAlgo : uint8_t { kRing = 0, kDirect = 1 };
/// kSimple: bulk chunks with head/tail counters and fences (bandwidth). kLL: every 8-byte word
/// carries 4 bytes of data and a 4-byte flag, stored together, so a receiver needs no fence
/// (latency). kDirect ignores the protocol.
enum class DevProto : uint8_t { kSimple = 0, kLL = 1 };

struct DevWork {
  CallKind kind = CallKind::kAllReduce;
  DevAlgo algo = DevAlgo::kRing;
  DevProto proto = DevProto::kSimple;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;  ///< kAvg: sum, then divide by nRanks once
  int root = 0;            ///< broadcast/reduce root; send/recv peer
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
};

/// Largest number of works one launch runs (a longer group is split into several launches).
inline constexpr int kMaxWorksPerLaunch = 16;
/// Most ranks and channels a DevComm describes.
inline constexpr int kMaxDevRanks = 16;
inline constexpr int kMaxChannels = 32;

struct DevWorkList {
  int nWorks = 0;
  DevWork works[kMaxWorksPerLaunch];
};

/// Threads per block of every collective launch, on the GPU and under the emulation alike. The
/// kernels are compiled for it (__launch_bounds__), so ptxas keeps their registers within what one
/// block of this size may hold; launch_fit.py checks ptxas's figures against it for every
/// architecture built.
inline constexpr int kBlockThreads = 512;
/// Blocks of kBlockThreads one multiprocessor must hold (the __launch_bounds__ minimum): the
/// co-residency check plans channels with at least this many.
inline constexpr int kMinBlocksPerSm = 1;
/// A list whose largest work moves at most this many bytes per rank runs on one channel: one block
/// per rank has the fewest pointer exchanges and flags, and small messages are latency-bound.
inline constexpr size_t kOneChannelMaxBytes = 64 << 10;

/// What a device wait was waiting for when its deadline passed (DevError::what).
enum class DevWait : uint32_t {
  kNone = 0,
  kHead,        ///< simple protocol: the sender's post of a step (head)
  kTail,        ///< simple protocol: the receiver's release of a slot (tail)
  kLLTail,      ///< LL protocol: the receiver's release of a slot
  kLLFlag,      ///< LL protocol: the sender's words of a step
  kDirectSeq,   ///< direct: a peer's pointers for this work
  kDirectDone,  ///< direct: a peer's end of this work
};
/// "head", "tail", ... for messages.
const char* devWaitName(DevWait w);

/// The record a timed-out device wait leaves for the host, in host-mapped pinned memory (one per
/// rank). The first thread to time out claims it (atomicCAS on DirectSlot::trapClaim, in device
/// memory: atomics on host memory are not portable over PCIe), writes the fields, fences
/// (system scope) and stores state = 1 last; the host reads the fields only after it sees state 1.
struct DevError {
  uint32_t reserved;  ///< zero; keeps state and the fields at their offsets
  uint32_t state;
  int32_t rank;
  int32_t channel;
  int32_t peer;
  DevWait what;
  uint64_t step;      ///< the connection's step (or the direct work's sequence number)
  uint64_t seen;      ///< the counter (or LL flag) value last read
  uint64_t awaited;   ///< the value the wait needed
  uint64_t waitedNs;  ///< how long it waited
};

/// Sizes of one rank's resources. Every rank of a communicator uses the same values.
struct DevConfig {
  int nRanks = 1;
  int nChannels = 1;                        ///< blocks per launch; each channel has its own connections
  int slots = 8;                            ///< simple protocol: FIFO depth per connection
  size_t slotBytes = 1 << 17;               ///< simple protocol: bytes per FIFO slot (multiple of 16)
  int llSlots = 8;                          ///< LL protocol: FIFO depth per connection
  size_t llSlotBytes = 1 << 14;             ///< LL protocol: payload bytes per slot (the buffer holds twice that)
  uint64_t timeoutNs = 300'000'000'000ull;  ///< how long any device wait may last (FERRY_TIMEOUT)
  bool oneDevice = false;                   ///< every rank runs on one GPU: fences at .gpu scope suffice
};

/// Device view of a communicator (defined in dev_comm.hpp, trivially copyable).
struct DevComm;

/// Bytes of the rank resources for `config` (one allocation per rank, 256-byte aligned, filled with
/// zeros before buildDevComm is called).
size_t rankResourceBytes(const DevConfig& config);

/// Fill `out` for rank `rank`: `rankBases[r]` is rank r's resource block as this rank addresses it;
/// `error` is this rank's DevError as the device addresses it (host-mapped, zero-filled).
void buildDevComm(const DevConfig& config, int rank, const std::vector<void*>& rankBases, DevError* error,
                  DevComm* out);

/// sizeof(DevComm), for the runtime to allocate the device copy.
size_t devCommBytes();

/// Threads per block the kernels are built for: kBlockThreads, in both builds.
int maxThreadsPerBlock();

/// Launch `list` on `stream` (a cudaStream_t) with nBlocks blocks (at most the DevComm's channels)
/// of nThreads threads. `devComm` is the DevComm in device memory. Returns a cudaError_t (0 =
/// success). Under the emulation, runs the grid to completion on host threads (stream is ignored)
/// and returns 0, 719 (cudaErrorLaunchFailure) when a wait timed out and trapped, or, like the
/// GPU, 701 (cudaErrorLaunchOutOfResources) when the build's ptxas figures say the block cannot
/// hold nThreads threads and 9 (cudaErrorInvalidConfiguration) above kBlockThreads.
int launchWorkList(const DevComm* devComm, const DevWorkList& list, int nBlocks, int nThreads, void* stream);

/// What the device (cudaFuncGetAttributes) says of the collective kernel as loaded on the current
/// GPU: registers per thread, local memory (stack) per thread, most threads per block. Returns a
/// cudaError_t; the emulation answers from the build's figures.
int kernelAttributes(int* registers, size_t* localBytes, int* maxThreads);

/// Blocks of the collective kernel one multiprocessor can hold with nThreads threads per block
/// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), for the co-residency check; 0 on error. The
/// emulation computes it from the build's ptxas figures for its first architecture and the
/// occupancy rules of launch_fit.hpp (a large number where the build has no figures: no nvcc).
int residentBlocksPerSm(int nThreads);

}  // namespace ferry::gpu
