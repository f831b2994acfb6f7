// Ring collectives on the device: reduce-scatter, all-gather, all-reduce, and the chain broadcast
// and reduce, as short loops over the ring verbs of prims.cuh. Index math is ring_math.hpp's, the
// host executor's (collectives/ring.cpp), so a segment is reduced in the same order on both:
// v = in[g+1] op in[g+2] op ... op in[g], the avg's divide fused into the last step.
//
// Work split: every segment is cut into nChannels parts (segmentBegin over the segment); channel c
// moves part c of every segment, one step (slot) at a time. All channels of a segment hold the
// same number of steps per part up to one element, so every rank computes the same number of
// slices K for a channel (from the largest part) and sends empty slices where a part is shorter.
#pragma once

#include "collectives/cuda/prims.cuh"
#include "collectives/ring_math.hpp"

namespace ferry::gpu {

// The index math the host executor shares (ferry::coll), by the names the device loops use.
using coll::agRecvSegment;
using coll::chainPosition;
using coll::ringMod;
using coll::rsRecvSegment;
using coll::rsSendSegment;
using coll::segmentBegin;
using coll::segmentCount;
using coll::sliceCount;

/// One channel's part of a range of `elems` elements: [off, off + len).
struct Part {
  size_t off;
  size_t len;
};
__device__ __forceinline__ Part channelPart(size_t elems, int nChannels, int c) {
  return {segmentBegin(elems, nChannels, c), segmentCount(elems, nChannels, c)};
}
/// Slice k (at most se elements) of a part: offset inside the part, and length (0 past the end).
__device__ __forceinline__ Part slicePart(const Part& p, size_t k, size_t se) {
  const size_t b = k * se;
  return {p.off + b, b < p.len ? (p.len - b < se ? p.len - b : se) : 0};
}

/// Segment g of the work as this channel sees it: all-reduce and the chains split the vector
/// near-evenly (segmentBegin), reduce-scatter and all-gather use blocks of `count`.
struct RingSegments {
  size_t count;
  int n;
  bool blocks;
  int c, nChannels;
  __device__ Part part(int g) const {
    if (blocks) {
      Part p = channelPart(count, nChannels, c);
      return {count * g + p.off, p.len};
    }
    const size_t sc = segmentCount(count, n, g);
    Part p = channelPart(sc, nChannels, c);
    return {segmentBegin(count, n, g) + p.off, p.len};
  }
};

/// All-reduce, reduce-scatter and reduce (chain) for reduction policy R over protocol P.
template <DevProto P, class R>
FERRY_DEVICE_NOINLINE __device__ void ringReduceWork(const DevComm& comm, const DevWork& w, int c, int nChannels,
                                                     const R& red) {
  const int n = comm.nRanks, r = comm.rank;
  const size_t es = red.elemBytes();
  const uint32_t div = w.op == RedOp::kAvg ? static_cast<uint32_t>(n) : 0u;
  const auto* in = static_cast<const uint8_t*>(w.send);
  auto* out = static_cast<uint8_t*>(w.recv);
  Prims<P> prims(comm, c, ringMod(r - 1, n), ringMod(r + 1, n));
  const size_t se = prims.stepBytes() / es;

  if (w.kind == CallKind::kReduce) {
    // Chain root+1 -> root+2 -> ... -> root: each adds its own input, the root writes the result.
    const Part part = channelPart(w.count, nChannels, c);
    const int pos = ringMod(r - w.root - 1, n);
    for (size_t k = 0, ks = sliceCount(part.len, se); k < ks; ++k) {
      const Part s = slicePart(part, k, se);
      const uint8_t* own = in + s.off * es;
      if (pos == 0) {
        prims.op(red, false, true, own, nullptr, s.len * es, 0);
      } else if (pos < n - 1) {
        prims.op(red, true, true, own, nullptr, s.len * es, 0);
      } else {
        prims.op(red, true, false, own, out + s.off * es, s.len * es, div);
      }
    }
    prims.save();
    return;
  }

  const bool allReduce = w.kind == CallKind::kAllReduce;
  const RingSegments seg{w.count, n, !allReduce, c, nChannels};
  // The largest part: segment 0's (all-reduce) or any block's (reduce-scatter).
  const size_t ks = sliceCount(seg.part(0).len, se);
  for (size_t k = 0; k < ks; ++k) {
    // Reduce-scatter: n-1 steps, the partial of one segment moving forward at each.
    Part s = slicePart(seg.part(rsSendSegment(r, n, 0)), k, se);
    prims.op(red, false, true, in + s.off * es, nullptr, s.len * es, 0);  // send
    for (int step = 0; step < n - 2; ++step) {
      s = slicePart(seg.part(rsRecvSegment(r, n, step)), k, se);
      prims.op(red, true, true, in + s.off * es, nullptr, s.len * es, 0);  // recvReduceSend
    }
    s = slicePart(seg.part(r), k, se);
    if (!allReduce) {
      // recvReduceCopy into this rank's block of the output.
      const Part mine = slicePart(channelPart(w.count, nChannels, c), k, se);
      prims.op(red, true, false, in + s.off * es, out + mine.off * es, s.len * es, div);
      continue;
    }
    // The turn: the final value of segment r (divided once for avg) goes to out and onward.
    prims.op(red, true, true, in + s.off * es, out + s.off * es, s.len * es, div);  // recvReduceCopySend
    // All-gather of the finished segments: n-1 more steps.
    for (int t = 0; t < n - 1; ++t) {
      s = slicePart(seg.part(agRecvSegment(r, n, t)), k, se);
      prims.op(RedCopy{}, true, t < n - 2, nullptr, out + s.off * es, s.len * es, 0);  // recvCopySend / recv
    }
  }
  prims.save();
}

/// All-gather (blocks of count) and broadcast (chain from the root): copies, no element type.
template <DevProto P>
FERRY_DEVICE_NOINLINE __device__ void ringCopyWork(const DevComm& comm, const DevWork& w, size_t es, int c,
                                                   int nChannels) {
  const int n = comm.nRanks, r = comm.rank;
  const auto* in = static_cast<const uint8_t*>(w.send);
  auto* out = static_cast<uint8_t*>(w.recv);
  Prims<P> prims(comm, c, ringMod(r - 1, n), ringMod(r + 1, n));
  const size_t se = prims.stepBytes() / es;
  const Part part = channelPart(w.count, nChannels, c);
  const size_t ks = sliceCount(part.len, se);
  if (w.kind == CallKind::kBroadcast) {
    const int pos = chainPosition(r, n, w.root);
    for (size_t k = 0; k < ks; ++k) {
      const Part s = slicePart(part, k, se);
      const size_t off = s.off * es, bytes = s.len * es;
      if (pos == 0) {
        prims.op(RedCopy{}, false, true, in + off, out + off, bytes, 0);  // send (and copy)
      } else {
        prims.op(RedCopy{}, true, pos < n - 1, nullptr, out + off, bytes, 0);  // recvCopySend / recv
      }
    }
  } else {
    for (size_t k = 0; k < ks; ++k) {
      const Part s = slicePart(part, k, se);
      const size_t bytes = s.len * es;
      prims.op(RedCopy{}, false, true, in + s.off * es, out + (w.count * r + s.off) * es, bytes, 0);
      for (int t = 0; t < n - 1; ++t) {
        const size_t off = (w.count * agRecvSegment(r, n, t) + s.off) * es;
        prims.op(RedCopy{}, true, t < n - 2, nullptr, out + off, bytes, 0);
      }
    }
  }
  prims.save();
}

}  // namespace ferry::gpu
