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

#include "ferry/status.hpp"

namespace ferry {

/// The calls whose arguments checkCall() knows.
enum class CallKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kReduce, kSend, kRecv };

/// One call's arguments as the caller passed them (integers not yet cast to the enums).
struct CallArgs {
  CallKind kind = CallKind::kAllReduce;
  const void* send = nullptr;
  const void* recv = nullptr;  ///< send and recv: the one buffer goes in `send` or `recv`
  size_t count = 0;            ///< the count the API takes (per rank for allGather/reduceScatter/allToAll)
  int type = 0;
  int op = 0;                  ///< only read for the reductions
  int root = 0;                ///< the root of broadcast and reduce, the peer of send and recv
  bool peerMayBeSelf = false;  ///< send/recv: a transfer to this rank (a copy) is allowed
  bool hostBuffers = true;     ///< the buffers are host memory: their pages may be checked
};

/// Ok, or kInvalidArgument naming `fn`, `rank`, the first invalid argument, its value and what
/// would be valid (for a communicator of `size` ranks).
Status checkCall(const char* fn, const CallArgs& args, int rank, int size);

/// The collective's name as the C++ API spells it ("allReduce").
const char* callKindName(CallKind kind);

}  // namespace ferry
