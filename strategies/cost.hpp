// Communication cost formulas: the bytes each strategy should move per step, in closed form.
//
// The strategies count the bytes of every transfer they hand to ferry; the tests and ferry-train
// compare those counts with these formulas. P is the number of parameters, n the world size,
// and every element is a 4-byte float.
//
// ferry's all-reduce is a ring: the vector is split into n segments that differ by at most one
// element; in the reduce-scatter half rank r sends every segment but its own (r), in the
// all-gather half every segment but the one its successor ends up owning (r+1). Over all ranks
// that is exactly 2(n-1)·count elements, about 2(n-1)/n·count per rank.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::train {

/// Elements in ring segment `i` of `count` elements split over `n` ranks.
constexpr size_t ringSegment(size_t count, int n, int i) {
  return count / static_cast<size_t>(n) + (static_cast<size_t>(i) < count % static_cast<size_t>(n) ? 1 : 0);
}

/// Bytes rank `rank` sends in a ring all-reduce of `count` floats over `n` ranks.
constexpr uint64_t ringAllReduceBytesSent(size_t count, int n, int rank) {
  if (n <= 1) return 0;
  const size_t elems = (count - ringSegment(count, n, rank)) + (count - ringSegment(count, n, (rank + 1) % n));
  return static_cast<uint64_t>(elems) * sizeof(float);
}

/// Bytes rank `rank` receives in that all-reduce: what its ring predecessor sends.
constexpr uint64_t ringAllReduceBytesReceived(size_t count, int n, int rank) {
  return ringAllReduceBytesSent(count, n, (rank + n - 1) % n);
}

/// Bytes all ranks together send in a ring all-reduce of `count` floats: 2(n-1)·count·4.
constexpr uint64_t ringAllReduceBytesTotal(size_t count, int n) {
  return n <= 1 ? 0 : 2ull * static_cast<uint64_t>(n - 1) * count * sizeof(float);
}

/// Parameter server, one server and w = n-1 workers: the server sends P floats to each worker
/// (pull) and receives P floats from each (push); a worker sends and receives P floats.
constexpr uint64_t psServerBytesSent(size_t params, int workers) {
  return static_cast<uint64_t>(workers) * params * sizeof(float);
}
constexpr uint64_t psWorkerBytesSent(size_t params) { return static_cast<uint64_t>(params) * sizeof(float); }
/// Everything a parameter-server step moves: 2·w·P floats, all through the server's link.
constexpr uint64_t psBytesTotal(size_t params, int workers) {
  return 2ull * static_cast<uint64_t>(workers) * params * sizeof(float);
}

}  // namespace ferry::train

namespace ferry::train {

/// Bytes rank `rank` sends in a ring all-gather (or reduce-scatter) of `chunk` floats per rank:
/// every step forwards one chunk, n-1 steps.
constexpr uint64_t ringGatherBytesSent(size_t chunk, int n) {
  return n <= 1 ? 0 : static_cast<uint64_t>(n - 1) * chunk * sizeof(float);
}

/// FSDP shard of a unit of `count` floats: ⌈count/n⌉.
constexpr size_t fsdpShard(size_t count, int n) {
  return (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
}

}  // namespace ferry::train
