// Index math of the ring and chain algorithms, in one place.
//
// Shared by the host executor and (later) the CUDA kernels, hence constexpr and free of anything
// host-only. Vocabulary:
//   segment  the part of the vector one rank owns at the end of a reduce-scatter (n per vector);
//            count elements are split so that segments differ by at most one element.
//   step     one hop of the ring: at step s every rank sends one segment to rank+1 and receives
//            one from rank-1.
//   slice    a piece of a segment moved as one message, so that transfer and reduction overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define FERRY_HOST_DEVICE __host__ __device__
#else
#define FERRY_HOST_DEVICE
#endif

namespace ferry::coll {

/// Elements of segment `i` when `count` elements are split over `n` ranks.
FERRY_HOST_DEVICE constexpr size_t segmentCount(size_t count, int n, int i) {
  return count / n + (static_cast<size_t>(i) < count % n ? 1 : 0);
}
/// First element of segment `i`.
FERRY_HOST_DEVICE constexpr size_t segmentBegin(size_t count, int n, int i) {
  size_t base = count / n, rem = count % n;
  return base * i + (static_cast<size_t>(i) < rem ? i : rem);
}
/// (a mod n) for a possibly negative a.
FERRY_HOST_DEVICE constexpr int ringMod(int a, int n) { return ((a % n) + n) % n; }

/// Ring reduce-scatter, steps s = 0..n-2: rank r sends segment (r-1-s) to rank r+1 and receives
/// segment (r-2-s) from rank r-1, reduces it with its own contribution and sends that at step s+1.
/// The segment received at the last step is (r-n) = r: rank r ends owning segment r.
FERRY_HOST_DEVICE constexpr int rsSendSegment(int r, int n, int s) { return ringMod(r - 1 - s, n); }
FERRY_HOST_DEVICE constexpr int rsRecvSegment(int r, int n, int s) { return ringMod(r - 2 - s, n); }

/// Ring all-gather: at step t (0..n-2) rank r sends segment (r - t) and receives segment (r - t - 1).
FERRY_HOST_DEVICE constexpr int agSendSegment(int r, int n, int t) { return ringMod(r - t, n); }
FERRY_HOST_DEVICE constexpr int agRecvSegment(int r, int n, int t) { return ringMod(r - t - 1, n); }

/// Slices of a segment of `elems` elements with at most `sliceElems` per slice.
FERRY_HOST_DEVICE constexpr size_t sliceCount(size_t elems, size_t sliceElems) {
  return (elems + sliceElems - 1) / sliceElems;
}
FERRY_HOST_DEVICE constexpr size_t sliceBegin(size_t k, size_t sliceElems) { return k * sliceElems; }
FERRY_HOST_DEVICE constexpr size_t sliceLength(size_t elems, size_t k, size_t sliceElems) {
  size_t b = k * sliceElems;
  return elems - b < sliceElems ? elems - b : sliceElems;
}

/// Chain (pipeline) position of rank r for a broadcast from `root`: 0 is the root, n-1 the tail.
FERRY_HOST_DEVICE constexpr int chainPosition(int r, int n, int root) { return ringMod(r - root, n); }

}  // namespace ferry::coll
