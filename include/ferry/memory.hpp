// Host memory for collective buffers that the other ranks of this host can map.
//
// A buffer from hostAlloc is shared memory: when every rank's send and receive buffers of a
// collective come from here, ranks on one host read their peers' buffers in place (a memcpy, or a
// reduction straight from the peer's input) where ordinary memory needs a cross-memory-attach
// copy or a copy through shared mailboxes. Nothing else changes: any buffer works with any call,
// and a call whose buffers are not all shared takes the usual path. The analogue of NCCL's
// ncclMemAlloc for host memory (ferry's ncclMemAlloc returns it when there is no GPU).
#pragma once

#include <cstddef>

#include "ferry/status.hpp"

namespace ferry {

/// `bytes` (0 counts as 1) of zero-filled, page-aligned host memory peers on this host can map.
/// Needs no communicator; release with hostFree. kSystemError when the system refuses it.
Result<void*> hostAlloc(size_t bytes);
/// Release what hostAlloc returned (null is accepted); kInvalidArgument for any other pointer.
/// Every collective that uses the buffer must have completed on every rank.
Status hostFree(void* ptr);

}  // namespace ferry
