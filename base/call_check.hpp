// A call's arguments checked once, from one table, for every front end: the C++ API (and through
// it Python and torch.distributed) and the NCCL C API run the same checks and give the same text.
//
// What is checked, in order: the data type and reduction against their tables; the root or peer
// against the communicator's size; the buffers' byte sizes (count x element size x the rank
// multiple the collective gives each buffer) for overflow and against the process's address
// space; null buffers a rank needs; overlapping send and receive buffers, which are allowed only
// exactly in place as NCCL defines it per collective; and for host buffers of 1 MiB or more that
// their first and last pages are mapped (a count far beyond the buffer fails here, not in a copy).
#pragma once

#include <cstddef>

#include "ferry/call.hpp"
#include "ferry/status.hpp"

namespace ferry {

/// What a front end allows beyond the Call itself.
struct CheckOptions {
  bool peerMayBeSelf = false;  ///< send/recv: a transfer to this rank (a copy) is allowed
  bool hostBuffers = true;     ///< the buffers are host memory: their pages may be probed
};

/// Ok, or kInvalidArgument naming the call (call.name()), `rank`, the first invalid argument, its
/// value and what would be valid (for a communicator of `size` ranks). The one validation of
/// every front end's calls.
Status checkCall(const Call& call, int rank, int size, CheckOptions options = {});

}  // namespace ferry
