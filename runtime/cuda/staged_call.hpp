// The staged route for device buffers where the kernels cannot run (ranks on several hosts, or
// processes sharing one GPU): in stream order, copy every input to the stream's pinned input
// buffer, run the host algorithms from a host function (cudaLaunchHostFunc) into the pinned output
// buffer, and copy every output back. All of it is stream-ordered and may be captured in a graph
// (the host function's arguments then live as long as the communicator).
//
// CUDA runs every host function of a process on one thread, so two ranks of one process would
// wait for each other there forever: the staged route is only taken by a rank that is alone in its
// process (DeviceContext enforces it). A host function that fails cannot return its error: it is
// logged, the communicator's error becomes sticky, and every later call returns it.
#pragma once

#include <vector>

#include "runtime/cuda/device_context.hpp"
#include "runtime/cuda/work_extent.hpp"

namespace ferry::gpu {

/// Enqueue `works` (all device buffers, in order) on `stream` through the staging buffers.
Status issueStaged(Comm& comm, DeviceContext& ctx, const std::vector<DevWork>& works, Stream stream);

}  // namespace ferry::gpu
