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

/// Register [ptr, ptr + bytes) of ordinary host memory (malloc, new, numpy, torch CPU tensors) for
/// collectives: its pages become shared memory in place, at the same address with the same bytes,
/// so later calls on buffers inside it read peers' buffers in place as on hostAlloc memory. What
/// a training loop does with buffers it reuses every step; registering costs about one copy of
/// the range (docs/PERFORMANCE.md). Whole pages are swapped, so the caller must not write the
/// range, nor other data on its first and last pages, while this runs; after it the pages are
/// shared with forked children too. A range inside a registered or hostAlloc range adds a
/// reference. kInvalidArgument for a null or empty range, a partial overlap with a registered
/// range, or memory that is not private and writable. Returns the handle for hostDeregister;
/// deregister before freeing the memory.
Result<void*> hostRegister(void* ptr, size_t bytes);
/// Drop a registration; the last one gives the range private pages again (same bytes).
/// kInvalidArgument for a handle hostRegister did not return (or one deregistered already).
Status hostDeregister(void* handle);

}  // namespace ferry
