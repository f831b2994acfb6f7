// ferry's CUDA collective kernel: one __global__ function that runs a DevWorkList in order.
//
// Vocabulary
//   channel   one block of the launch (blockIdx.x); it owns its own connections, FIFOs and
//             pointer-exchange slot, and moves its part of every work (a work's data is split over
//             the gridDim.x channels; every rank must launch the same number of blocks).
//   connection the (this rank, peer) pair on one channel, both directions; data always lands in
//             the receiver's memory (dev_comm.hpp has the layout).
//   slot      one entry of a connection's FIFO: slotBytes (simple) or llSlotBytes of payload (LL).
//   step      one slot's worth of transfer; every connection direction counts its steps in a
//             persistent counter in the rank resources, so launches (and graph replays) continue
//             where the previous one stopped and nothing depends on kernel arguments.
//   head/tail simple protocol: head = steps the sender has posted, stored by the sender in the
//             receiver's memory; tail = steps the receiver has consumed, stored by the receiver in
//             the sender's memory. A sender writes slot (step % slots) once tail + slots > step.
//   LL flag   LL protocol: every 8-byte word carries 4 data bytes and the flag 1 + step mod (2^32-1),
//             written by one 8-byte store, so the receiver knows the data is there when the flag is.
//
// Memory ordering (prims.cuh and direct_kernels.cuh say it at each access):
//   - data before a simple head: block barrier, then thread 0's __threadfence_system(), then a
//     volatile store of head. Readers poll with volatile loads and fence (system scope) before they
//     read data: every reading thread polls and fences itself, which also keeps stale L1 lines of a
//     reused slot from being read.
//   - slot reuse (tail, llTail): the receiver's reads happen before its barrier, thread 0 fences and
//     stores tail; the sender polls tail and fences before it writes the slot again.
//   - LL words need no fence: data and flag are one single-copy-atomic 8-byte store.
//   - direct: pointers before seq (fence), peers' reads/writes before done (barrier + fence).
//   System scope everywhere, because peers may be other GPUs or other processes (CUDA IPC).
//
// Assumptions: the runtime makes every block of every rank's launch co-resident (residentBlocksPerSm
// is there for that check), since blocks wait for blocks of other ranks and no order of scheduling
// between ranks is assumed. All ranks run the same collectives in the same order with the same
// counts, types, algorithms and protocols (NCCL's contract); p2p works pair up by peer and order.
//
// Algorithms: kRing (all-reduce = reduce-scatter then all-gather with recvReduceCopySend at the
// turn, reduce-scatter, all-gather, chain broadcast and reduce; ring_kernels.cuh), FIFO all-to-all
// and send/recv (p2p_kernels.cuh; used for those kinds whatever the algorithm), kDirect (single
// copy; direct_kernels.cuh). Each over the simple or LL protocol (direct ignores it). Type and op
// are run-time values of the reduction policy (RedRt): each step calls one out-of-line reduce-copy
// of its type and op, so every algorithm is instantiated once per protocol.
#include <cstdint>

#include "kernels/cuda/simt.hpp"
#include "kernels/cuda/reduce_copy.cuh"
// dtypes.cuh and ring_math.hpp both define FERRY_HOST_DEVICE, differently; dtypes.cuh is fully
// parsed here, so ring_math.hpp (through dev_comm.hpp) may define its own.
#undef FERRY_HOST_DEVICE
#include "collectives/cuda/dev_comm.hpp"
#include "collectives/cuda/direct_kernels.cuh"
#include "collectives/cuda/p2p_kernels.cuh"
#include "collectives/cuda/prims.cuh"
#include "collectives/cuda/ring_kernels.cuh"

#if !FERRY_SIMT_EMULATED
#include <cuda_runtime.h>
#else
#include "collectives/cuda/kernel_figures.hpp"  // generated: launch_fit.py header
#endif

namespace ferry::gpu {
namespace {

__device__ __forceinline__ bool isP2p(CallKind k) { return k == CallKind::kSend || k == CallKind::kRecv; }

/// One rank: every collective is a copy of send into recv (this channel's part).
__device__ void localCopy(const DevWork& w, int c, int nChannels) {
  const Part part = bytePart(w.count * elemBytes(w.type), nChannels, c);
  void* to = static_cast<uint8_t*>(w.recv) + part.off;
  const uint8_t* from = static_cast<const uint8_t*>(w.send) + part.off;
  if (part.len > 0 && to != from) gpu::copyBytes(1, &to, from, part.len);
  __syncthreads();
}

#if FERRY_SIMT_EMULATED
constexpr int kInvalidConfiguration = 9;    // cudaErrorInvalidConfiguration
constexpr int kLaunchOutOfResources = 701;  // cudaErrorLaunchOutOfResources
#endif

__device__ void runWork(const DevComm& comm, const DevWork& w, int c, int nChannels) {
  if (w.count == 0) return;
  if (comm.nRanks == 1) {
    localCopy(w, c, nChannels);
    return;
  }
  const size_t es = elemBytes(w.type);
  switch (w.kind) {
    case CallKind::kAllReduce:
    case CallKind::kReduceScatter:
    case CallKind::kReduce: {
      // Type and op are run-time values of the policy (prims.cuh, RedRt): one instantiation per
      // algorithm and protocol keeps nvcc's time in minutes.
      const RedRt red{w.type, w.op, static_cast<uint32_t>(es)};
      if (w.algo == DevAlgo::kDirect) {
        directReduceWork(comm, w, c, nChannels, red);
      } else if (w.proto == DevProto::kLL) {
        ringReduceWork<DevProto::kLL>(comm, w, c, nChannels, red);
      } else {
        ringReduceWork<DevProto::kSimple>(comm, w, c, nChannels, red);
      }
      break;
    }
    case CallKind::kAllGather:
    case CallKind::kBroadcast:
      if (w.algo == DevAlgo::kDirect) {
        directCopyWork(comm, w, es, c, nChannels);
      } else if (w.proto == DevProto::kLL) {
        ringCopyWork<DevProto::kLL>(comm, w, es, c, nChannels);
      } else {
        ringCopyWork<DevProto::kSimple>(comm, w, es, c, nChannels);
      }
      break;
    case CallKind::kAllToAll:
      if (w.algo == DevAlgo::kDirect) {
        directCopyWork(comm, w, es, c, nChannels);
      } else {
        p2pRun(comm, &w, 1, c, nChannels);
      }
      break;
    default: break;
  }
}

}  // namespace

/// The collective kernel: block b is channel b; works run in list order, a run of consecutive
/// send/recv works runs as one p2p schedule (p2p_kernels.cuh). The list stays in the kernel's
/// parameter space (__grid_constant__: works are read where they are, never copied to a stack
/// frame) and the DevComm in global memory; __launch_bounds__ holds ptxas to registers that let
/// kMinBlocksPerSm blocks of kBlockThreads share a multiprocessor.
__global__ void __launch_bounds__(kBlockThreads, kMinBlocksPerSm)
    collectiveKernel(const DevComm* __restrict__ devComm, const __grid_constant__ DevWorkList list) {
  const DevComm& comm = *devComm;
  const int c = static_cast<int>(blockIdx.x), nChannels = static_cast<int>(gridDim.x);
  if (c >= comm.nChannels) return;
  for (int i = 0; i < list.nWorks;) {
    __syncthreads();  // the previous work's counters are saved
    if (isP2p(list.works[i].kind)) {
      int e = i;
      while (e < list.nWorks && isP2p(list.works[e].kind)) ++e;
      p2pRun(comm, &list.works[i], e - i, c, nChannels);
      i = e;
    } else {
      runWork(comm, list.works[i], c, nChannels);
      ++i;
    }
  }
}

int maxThreadsPerBlock() { return kBlockThreads; }

int launchWorkList(const DevComm* devComm, const DevWorkList& list, int nBlocks, int nThreads, void* stream) {
#if FERRY_SIMT_EMULATED
  (void)stream;
  // Refuse what the GPU would refuse, from the build's ptxas figures (launch_fit.hpp).
  if (nThreads < 1 || nThreads > kBlockThreads || nBlocks < 1) return kInvalidConfiguration;
  if (!launchFits(kEmulatedFigures, nThreads)) return kLaunchOutOfResources;
  return simt::launch(dim3(static_cast<unsigned>(nBlocks)), dim3(static_cast<unsigned>(nThreads)), collectiveKernel,
                      devComm, list);
#else
  // clang-format 14 splits this launch's >>> into > > >, which nvcc rejects.
  // clang-format off
  collectiveKernel<<<nBlocks, nThreads, 0, static_cast<cudaStream_t>(stream)>>>(devComm, list);
  // clang-format on
  return static_cast<int>(cudaGetLastError());
#endif
}

int kernelAttributes(int* registers, size_t* localBytes, int* maxThreads) {
#if FERRY_SIMT_EMULATED
  *registers = kEmulatedFigures.registers;
  *localBytes = static_cast<size_t>(kEmulatedFigures.stackBytes);
  *maxThreads = kEmulatedFigures.maxThreads > 0 ? kEmulatedFigures.maxThreads : kBlockThreads;
  return 0;
#else
  cudaFuncAttributes a{};
  const cudaError_t e = cudaFuncGetAttributes(&a, collectiveKernel);
  if (e != cudaSuccess) return static_cast<int>(e);
  *registers = a.numRegs;
  *localBytes = a.localSizeBytes;
  *maxThreads = a.maxThreadsPerBlock;
  return 0;
#endif
}

int residentBlocksPerSm(int nThreads) {
#if FERRY_SIMT_EMULATED
  return residentBlocks(kEmulatedFigures, nThreads);
#else
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, collectiveKernel, nThreads, 0) != cudaSuccess) return 0;
  return blocks;
#endif
}

}  // namespace ferry::gpu
