// Ring reduce-scatter, all-gather and all-reduce.
//
// With n ranks the vector is cut into n segments (ring_math.hpp). Reduce-scatter takes n-1 steps:
// at each, every rank sends one segment's partial result to rank+1 and folds the segment arriving
// from rank-1 into its own contribution; after the last step rank r holds the full reduction of
// segment r. All-gather then circulates the finished segments for n-1 more steps. Each rank sends
// and receives 2(n-1)/n of the vector, the bandwidth optimum. Segments are cut into slices so the
// transfer of one slice overlaps the reduction of the previous one (pipeline.hpp).
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/ring_math.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {
namespace {

// Segment boundaries: equal blocks (reduce-scatter, all-gather) or a near-even split (all-reduce),
// as segmentBegin/segmentCount with the division done once: the loops below ask for every one of
// the n segments, and at thousands of ranks the divisions were most of a small call's work.
struct Segments {
  Segments(size_t total, int ranks, size_t blockElems)
      : count(total), n(ranks), block(blockElems), base(total / ranks), rem(total % ranks) {}
  size_t count;  // total elements
  int n;
  size_t block;  // > 0: every segment has exactly `block` elements
  size_t base, rem;
  size_t begin(int i) const {
    const auto u = static_cast<size_t>(i);
    return block > 0 ? block * u : base * u + std::min(u, rem);
  }
  size_t length(int i) const { return block > 0 ? block : base + (static_cast<size_t>(i) < rem ? 1 : 0); }
  // Segments counting down from i (wrapping) before a non-empty one: 0 when i is non-empty. Only
  // a vector shorter than n has empty segments, [rem, n), so the loops below jump over them
  // instead of visiting all n at every rank (at thousands of ranks most of a small call's work).
  int emptyBelow(int i) const { return length(i) > 0 ? 0 : i - static_cast<int>(rem) + 1; }
};

// Reduce-scatter over `seg`: partials of segment i go to acc + begin(i), the final segment of this
// rank to `final`. Waits for every send before returning, so the caller may reuse acc.
Status reduceScatterCore(Exec& ex, const Segments& seg, const uint8_t* in, uint8_t* acc, uint8_t* final, DataType type,
                         RedOp op) {
  const int n = ex.size(), r = ex.rank(), prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  ex.setPhase("reduce-scatter", 0, n - 1);
  int first = rsSendSegment(r, n, 0);
  FERRY_TRY(sendSlices(ex, next, in + seg.begin(first) * es, seg.length(first), type));
  std::vector<ReduceTask> tasks;
  // g: rsRecvSegment(r, n, s), one lower each step.
  for (int s = 0, g = rsRecvSegment(r, n, 0); s < n - 1; ++s, g = g == 0 ? n - 1 : g - 1) {
    if (const int skip = seg.emptyBelow(g); skip > 0) {  // on to step s + skip, segment rem - 1
      s += skip - 1;
      g -= skip - 1;
      continue;
    }
    bool last = s == n - 2;
    size_t len = seg.length(g), base = seg.begin(g);
    for (size_t k = 0, ks = sliceCount(len, se); k < ks; ++k) {
      size_t off = sliceBegin(k, se);
      uint8_t* dst = last ? final + off * es : acc + (base + off) * es;
      tasks.push_back({in + (base + off) * es, dst, sliceLength(len, k, se), !last, last, s});
    }
  }
  FERRY_TRY(recvReduceForward(ex, prev, next, tasks, type, op, static_cast<uint32_t>(n), "reduce-scatter", n - 1));
  return ex.waitAll();
}

// All-gather over `seg` in `out`, where this rank's segment is already in place.
Status allGatherCore(Exec& ex, const Segments& seg, uint8_t* out, DataType type) {
  const int n = ex.size(), r = ex.rank(), prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  std::vector<CopyTask> tasks;
  // g: agRecvSegment(r, n, t), one lower each step.
  for (int t = 0, g = agRecvSegment(r, n, 0); t < n - 1; ++t, g = g == 0 ? n - 1 : g - 1) {
    if (const int skip = seg.emptyBelow(g); skip > 0) {
      t += skip - 1;
      g -= skip - 1;
      continue;
    }
    size_t len = seg.length(g), base = seg.begin(g);
    for (size_t k = 0, ks = sliceCount(len, se); k < ks; ++k) {
      tasks.push_back({out + (base + sliceBegin(k, se)) * es, sliceLength(len, k, se), t < n - 2, t});
    }
  }
  ex.setPhase("all-gather", 0, n - 1);
  FERRY_TRY(sendSlices(ex, next, out + seg.begin(r) * es, seg.length(r), type));
  FERRY_TRY(recvForward(ex, prev, next, tasks, type, "all-gather", n - 1));
  return ex.waitAll();
}

void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

}  // namespace

Status ringAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  if (ex.size() == 1 || count == 0) {
    copyIfDistinct(out, in, count * es);
    return Status::ok();
  }
  Segments seg{count, ex.size(), 0};
  auto* o = static_cast<uint8_t*>(out);
  FERRY_TRY(reduceScatterCore(ex, seg, static_cast<const uint8_t*>(in), o, o + seg.begin(ex.rank()) * es, type, op));
  return allGatherCore(ex, seg, o, type);
}

Status ringReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  if (ex.size() == 1 || recvCount == 0) {
    copyIfDistinct(out, in, recvCount * es);
    return Status::ok();
  }
  Segments seg{recvCount * ex.size(), ex.size(), recvCount};
  auto* acc = static_cast<uint8_t*>(ex.context().scratch->get(seg.count * es));
  if (acc == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", seg.count * es);
  }
  return reduceScatterCore(ex, seg, static_cast<const uint8_t*>(in), acc, static_cast<uint8_t*>(out), type, op);
}

Status ringAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type) {
  const size_t es = dataTypeSize(type);
  auto* o = static_cast<uint8_t*>(out);
  copyIfDistinct(o + static_cast<size_t>(ex.rank()) * sendCount * es, in, sendCount * es);
  if (ex.size() == 1 || sendCount == 0) return Status::ok();
  return allGatherCore(ex, Segments{sendCount * ex.size(), ex.size(), sendCount}, o, type);
}

// Rows of the algorithm table (table.hpp). Over messages a ring step moves one of n blocks per
// rank; on one host the arena's rows move fewer bytes with fewer hand-offs, so the ring is not
// priced there.
namespace {
bool always(const Pricing&) { return true; }
}  // namespace

extern const AlgorithmRow kRingAllReduce{CallKind::kAllReduce,
                                         Algorithm::kRing,
                                         Protocol::kMessages,
                                         always,
                                         [](const Pricing& p) {
                                           return p.arena ? kUnmodelled : p.flat(2 * (p.n - 1) * p.ringHop(p.B / p.n));
                                         },
                                         [](Exec& ex, const Plan&, const Call& c) {
                                           return ringAllReduce(ex, c.send, c.recv, c.count, c.type, c.op);
                                         }};

extern const AlgorithmRow kRingReduceScatter{CallKind::kReduceScatter,
                                             Algorithm::kRing,
                                             Protocol::kMessages,
                                             always,
                                             [](const Pricing& p) {
                                               return p.arena ? kUnmodelled : p.flat((p.n - 1) * p.ringHop(p.B));
                                             },
                                             [](Exec& ex, const Plan&, const Call& c) {
                                               return ringReduceScatter(ex, c.send, c.recv, c.count, c.type, c.op);
                                             }};

extern const AlgorithmRow kRingAllGather{CallKind::kAllGather,
                                         Algorithm::kRing,
                                         Protocol::kMessages,
                                         always,
                                         [](const Pricing& p) {
                                           return p.arena ? kUnmodelled : p.flat((p.n - 1) * p.ringHop(p.B));
                                         },
                                         [](Exec& ex, const Plan&, const Call& c) {
                                           return ringAllGather(ex, c.send, c.recv, c.count, c.type);
                                         }};

}  // namespace ferry::coll
