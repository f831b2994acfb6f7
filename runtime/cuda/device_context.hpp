// A communicator's GPU half: what init sets up on the rank's device and what every stream-ordered
// call reads.
//
// Setup takes two rounds of the communicator's rendezvous, on every rank (with or without a
// device, so that the rounds match):
//   A. each rank sets its device and publishes it (ordinal, GPU uuid, multiprocessors, blocks per
//      multiprocessor), or why it could not. Every rank then decides the same things from the same
//      table: the path (below), the channel count, the DevConfig.
//   B. on the kernel path each rank allocates its zeroed rank resources and publishes how peers
//      reach them: the raw pointer (peers in this process) and a CUDA IPC handle (peers in other
//      processes of the host), and whether it can map every peer's GPU. Each rank then maps its
//      peers' blocks, builds the DevComm and copies it to device memory once.
//
// Paths for device buffers:
//   kKernel  every rank has a GPU on this host, every pair can map each other's memory, and the
//            blocks of all ranks sharing a GPU can be resident at once (the kernels wait on each
//            other). Ranks of different processes on one GPU are time-sliced by the driver, so they
//            never take this path unless FERRY_GPU_CORESIDENT=1 (MPS).
//   kStaged  otherwise, when this rank is the only rank of its process: copies through pinned host
//            memory and the host algorithms, in stream order (staged_call.hpp).
//   kNone    otherwise (several ranks in one process that cannot run the kernels): device buffers
//            fail with the reason.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/cuda/device.hpp"
#include "base/deadline.hpp"
#include "runtime/cuda/cuda_api.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime/peer_info.hpp"

namespace ferry::gpu {

enum class DevicePath { kKernel, kStaged, kNone };

class StagingPool;

class DeviceContext {
 public:
  /// Run setup rounds A and B for rank `rank` driving `device` (-1: none). Returns null for a
  /// rank without a device; fails on every rank when any rank's device setup failed.
  static Result<std::unique_ptr<DeviceContext>> create(Rendezvous& rv, const std::vector<PeerInfo>& peers, int rank,
                                                       int size, int device, uint64_t commId, Deadline deadline);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return where_.device; }
  Where where() const { return where_; }
  DevicePath path() const { return path_; }
  /// Why the kernels do not run here (empty on the kernel path).
  const std::string& whyNotKernel() const { return whyNot_; }
  /// Device memory held: rank resources and the DevComm.
  size_t memoryBytes() const { return memoryBytes_; }

  /// Kernel path: launch parameters.
  const gpu::DevComm* devComm() const { return devComm_; }
  int channels() const { return config_.nChannels; }
  int threads() const { return threads_; }
  /// The algorithm and protocol for a message of `bytes` per rank (knobs first).
  gpu::DevAlgo algo() const { return algo_; }
  gpu::DevProto proto(size_t bytes) const;

  /// Staged path: the pinned buffers of one stream.
  StagingPool& staging() { return *staging_; }

  uint64_t commId() const { return commId_; }
  /// Kernel path with peers in other processes: this rank's memory is mapped by them (CUDA IPC).
  bool sharedAcrossProcesses() const { return path_ == DevicePath::kKernel && crossProcess_; }
  /// Ranks of this communicator in this process (itself included).
  int ranksInProcess() const { return ranksInProcess_; }
  /// The most ranks of this communicator that any one process holds: the same on every rank.
  int mostRanksInOneProcess() const { return mostRanksInOneProcess_; }
  /// Kernel launches this rank has made (ranks make the same launches in the same order).
  uint64_t nextLaunch() { return launches_++; }
  /// Ranks of this communicator in this process that drive this rank's GPU (itself included).
  int ranksSharingGpuInProcess() const { return sharingGpuInProcess_; }
  /// The error a device wait left when its deadline passed (the kernel trapped), or ok. Reads the
  /// host-mapped record: cheap, safe from any thread, callable while kernels run.
  Status deviceError() const;

 private:
  struct Setup;  // the steps of create() and the state they pass on
  DeviceContext() = default;

  Where where_;
  DevicePath path_ = DevicePath::kNone;
  std::string whyNot_;
  gpu::DevConfig config_;
  int threads_ = 0;
  gpu::DevAlgo algo_ = gpu::DevAlgo::kRing;
  int forcedProto_ = -1;  ///< FERRY_GPU_PROTO as a DevProto, or -1
  size_t llMaxBytes_ = 0;
  void* resources_ = nullptr;
  std::vector<void*> opened_;  ///< peers' blocks mapped by CUDA IPC, closed at destruction
  gpu::DevComm* devComm_ = nullptr;
  MappedHost errorRecord_;  ///< gpu::DevError, host-mapped
  int sharingGpuInProcess_ = 1;
  uint64_t commId_ = 0;
  bool crossProcess_ = false;
  int ranksInProcess_ = 1;
  int mostRanksInOneProcess_ = 1;
  uint64_t launches_ = 0;
  size_t memoryBytes_ = 0;
  std::unique_ptr<StagingPool> staging_;
};

}  // namespace ferry::gpu
