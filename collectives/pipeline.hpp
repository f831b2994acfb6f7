// Two pipelined building blocks every ring and chain algorithm is made of.
//
// recvReduceForward: for each task in order, receive a slice from `prev` into a staging slot,
//   combine it with this rank's own slice into `dst`, and send `dst` on to `next` unless the task
//   is the last hop. Up to `depth` receives are posted ahead, so the transfer of slice k+1
//   overlaps the reduction of slice k; staging slots are reused only after their reduction.
// recvForward: every receive is posted up front straight into its final place; each slice is sent
//   on as soon as it lands.
// Neither blocks on a send before posting later receives, so no ring of ranks can wait on itself.
// A task may name its own peers (several rings interleaved): every rank then lists its tasks in
// one order, by step first, so each pair of ranks posts its receives in the order they are sent.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/context.hpp"
#include "ferry/types.hpp"

namespace ferry::coll {

struct ReduceTask {
  const uint8_t* own;  ///< this rank's contribution
  uint8_t* dst;        ///< where own ⊕ received goes (may equal own)
  size_t elems;
  bool forward;   ///< send dst to next afterwards
  bool last;      ///< final hop: apply avg's division here
  int step;       ///< for error messages
  int from = -1;  ///< where the slice comes from and goes to, when not the call's prev and next
  int to = -1;    ///< (several rings at once: the rails ring)
};

struct CopyTask {
  uint8_t* dst;  ///< received bytes land here
  size_t elems;
  bool forward;
  int step;
  int from = -1;  ///< as ReduceTask's
  int to = -1;
};

/// `phase` and `steps` name the phase in errors; `divisor` is the avg divisor (0: not avg).
Status recvReduceForward(Exec& ex, int prev, int next, const std::vector<ReduceTask>& tasks, DataType type, RedOp op,
                         uint32_t divisor, const char* phase, int steps);
Status recvForward(Exec& ex, int prev, int next, const std::vector<CopyTask>& tasks, DataType type, const char* phase,
                   int steps);
/// Post sends of [buf, buf + elems) to `peer` in slices of the context's slice size.
Status sendSlices(Exec& ex, int peer, const uint8_t* buf, size_t elems, DataType type);
/// Elements per slice for `type` under the context's FERRY_SLICE_BYTES.
size_t sliceElems(const Exec& ex, DataType type);

}  // namespace ferry::coll
