// Issuing stream-ordered calls: each call takes one of three routes, chosen from its buffers.
//
//   host    every buffer it uses is host memory: the host algorithm runs now, in the calling thread,
//           after the work already queued on the stream (cudaStreamSynchronize; a null stream is
//           not waited on, so host-only programs never touch CUDA).
//   device  every buffer is device memory, on a communicator with a GPU: on the kernel path the
//           call becomes a DevWork, launched with launchWorkList on the stream; on the staged path
//           it becomes copies to pinned memory, a host function running the host algorithm, and
//           copies back (staged_call.hpp). Neither waits for the GPU, allocates device memory or
//           copies synchronously, so both can be captured in a CUDA graph. On the kernel path in
//           the reproducible mode, a group with a call the mode changes is staged as a whole
//           (stageForReproducibility): its bits are the host mode's, since the host code runs.
//   (error) host and device buffers mixed in one call, or device buffers on a communicator that
//           has no GPU or no usable path: the message names the pointers and the reason.
// A count of 0 does nothing on any route (every rank passes the same count).
//
// Checks that need every rank's arguments (same count, type, op, root) cannot run in stream order
// without a round trip, so device calls do not make them: ranks that disagree corrupt data or hang
// in the kernel. The host route keeps the host API's checks (FERRY_CHECK_MISMATCH).
#pragma once

#include <vector>

#include "runtime/cuda/device_context.hpp"
#include "runtime/cuda/work_extent.hpp"

namespace ferry::gpu {

/// One stream-ordered call of a communicator, already checked (arguments valid for this rank).
struct StreamCall {
  DevWork work;
  Stream stream = nullptr;
};

/// One communicator's calls, sorted by route.
struct RoutedCalls {
  std::vector<Stream> deviceStreams;              ///< distinct, in order of first use
  std::vector<std::vector<DevWork>> deviceWorks;  ///< per entry of deviceStreams, in order
  bool staged = false;                            ///< the device works take the staged route
  std::vector<DevWork> hostWorks;                 ///< in order
  /// Streams the host works wait for: their own (non-null), and those of staged device works.
  std::vector<Stream> hostStreams;
};

/// Whether one group's device calls on the kernel path take the staged route, for the reproducible
/// mode: when `reproducible` and some call of `works` (the communicator's every call in the group,
/// whatever its buffers) is one the mode changes (coll::reproducibleApplies), all of them do, since
/// the kernels sum in floating point and the host runs the mode. It reads only what every rank passes
/// alike (the mode, each call's kind, count, type and op; never buffers or streams, each rank's own),
/// so no call runs the kernels on one rank and the host algorithm on another. Fails with
/// kInvalidUsage, naming `rank` and the call, where some process holds several ranks
/// (`mostRanksInOneProcess` > 1): their host functions would wait for each other (staged_call.hpp).
Result<bool> stageForReproducibility(bool reproducible, int mostRanksInOneProcess, int rank,
                                     const std::vector<DevWork>& works);

/// Route every call of `comm` (`ctx` is null for a rank without a GPU); fails on the first call
/// that cannot run, before anything is issued.
Result<RoutedCalls> routeCalls(Comm& comm, const DeviceContext* ctx, const std::vector<StreamCall>& calls);
/// Enqueue the device calls: per stream, launches of up to kMaxWorksPerLaunch works in order (kernel
/// path) or staged copies and host functions. Never waits for the GPU.
Status issueDevice(Comm& comm, DeviceContext* ctx, const RoutedCalls& routed);
/// Run the host calls once their streams are drained, sends and receives as one batch. Blocks
/// until the peers have taken part.
Status runHost(Comm& comm, const RoutedCalls& routed);

/// All three, for one communicator's calls outside a group.
Status issueCalls(Comm& comm, DeviceContext* ctx, const std::vector<StreamCall>& calls);

}  // namespace ferry::gpu
