// Groups (ncclGroupStart / ncclGroupEnd): this thread's queue of calls issued together.
//
// Between the outermost start and its end, collectives and point-to-point calls are checked and
// queued, and ncclCommInitRank creates its handle without joining yet. At the end:
//   1. every queued init starts on its own thread; the end waits for those of blocking configs;
//   2. the queued calls are split by communicator, keeping their order; each communicator runs its
//      collectives in order, then all its sends and receives as one Comm::sendRecv batch (ranks may
//      list them in any order and interleave them with collectives in any way: nothing deadlocks);
//   3. when the group spans several communicators, each runs on its own thread (one process may
//      drive several ranks, as with ncclCommInitAll), since every ferry call blocks until done.
// Calls on device buffers are queued too and, at the end (after the inits), replayed inside one
// ferry::groupStart()/groupEnd() (runtime/cuda/group.hpp), which fuses each communicator's kernels
// per stream; they are enqueued before the host calls run.
// A call that fails its checks inside a group returns its error at once, and the group's end
// returns it again without running anything.
#pragma once

#include "nccl/comm_init.hpp"
#include "nccl/ops.hpp"

namespace ferry::nccl {

/// True between ncclGroupStart and its matching outermost ncclGroupEnd on this thread.
bool inGroup();
/// Queue `op` (already checked) for the group's end.
void enqueue(ncclComm_t comm, Op op);
/// Queue an init for the group's end.
void enqueueInit(const InitRequest& request);
/// Remember an error of a call inside the group; the group's end returns the first one.
void noteGroupError(const Status& status);

}  // namespace ferry::nccl
