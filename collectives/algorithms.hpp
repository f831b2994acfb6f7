// The host algorithms: one free function per collective, each a schedule of sends, receives and
// reductions over the transport-neutral primitives of Exec.
//
// Buffers follow NCCL's conventions: counts are elements, in-place means the output buffer is the
// input (all-gather: in == out + rank*count; reduce-scatter: in + rank*count == out). Every
// function supports count 0 and any world size from 1.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/context.hpp"
#include "ferry/types.hpp"

namespace ferry::coll {

/// Ring all-reduce: ring reduce-scatter of `count` elements into segments, then ring all-gather.
/// Avg sums and divides once, on the rank that completes each segment.
Status ringAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);

/// Ring reduce-scatter: rank r receives the reduction of every rank's r-th block of `recvCount`.
Status ringReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op);

/// Ring all-gather: out holds every rank's `sendCount` elements, in rank order.
Status ringAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type);

/// Pairwise all-to-all: block j of rank i's input becomes block i of rank j's output.
Status pairwiseAllToAll(Exec& ex, const void* in, void* out, size_t count, DataType type);

/// Pipelined chain broadcast from `root`, sliced so every link is busy at once.
Status chainBroadcast(Exec& ex, const void* in, void* out, size_t count, DataType type, int root);

/// Pipelined chain reduce toward `root` (root+1 starts, root finishes).
Status chainReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op, int root);

/// For a call that moves no data (count 0): one empty message around the ring, so a rank whose
/// peers called with a different count or collective learns it at once instead of at its deadline.
Status ringPresence(Exec& ex);

/// Dissemination barrier: ceil(log2 n) rounds of empty messages.
Status disseminationBarrier(Exec& ex);

/// One transfer of a batch; `desc` describes it for mismatch checks (kind kSend, count, type).
struct P2pItem {
  bool isSend;
  void* buf;
  size_t bytes;
  int peer;
  OpDesc desc;
};
/// Post every transfer, then wait for all. Transfers to this rank itself are copies paired in order.
Status batchSendRecv(Exec& ex, const std::vector<P2pItem>& items);

/// Point-to-point transfer of `bytes` to / from `peer`.
Status sendTo(Exec& ex, const void* buf, size_t bytes, int peer);
Status recvFrom(Exec& ex, void* buf, size_t bytes, int peer);

}  // namespace ferry::coll
