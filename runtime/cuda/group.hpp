// Groups of stream-ordered calls (ferry::groupStart / groupEnd, and ncclGroupStart / ncclGroupEnd
// for device buffers).
//
// Each thread has its own group depth. While it is above 0, a stream-ordered call is checked and
// recorded with its communicator; a call that fails its checks returns its error and the group
// remembers it. At the outermost groupEnd() the recorded calls are split by communicator (in order
// of first appearance) and each communicator's share is issued (stream_issue.hpp): its device
// calls fused, per stream, into launches of up to kMaxWorksPerLaunch works; its host calls run
// together, sends and receives as one batch. Host calls block until their peers arrive, so when the
// group spans several communicators (several ranks of this process) each is issued on its own
// thread. groupEnd() returns the first error: a recorded check failure (then nothing is issued), or
// the first communicator's issue failure.
#pragma once

#include "runtime/cuda/stream_issue.hpp"

namespace ferry::gpu {

/// Issue `work` on `comm` now, or record it when this thread is inside a group. `checked` is the
/// outcome of the caller's argument checks (an error is returned, and remembered by the group).
Status submit(Comm& comm, DeviceContext* ctx, const Status& checked, const DevWork& work, Stream stream);

/// This thread's group depth (0: outside any group).
int groupDepth();

}  // namespace ferry::gpu
