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

// A ring's order: position p holds rank at(p), rank r sits at position pos(r). The plain ring is
// the identity; rail c of the rails ring walks the hosts in order and each host's ranks from local
// index c (Context::hostOrder numbers the ranks host by host; L ranks per host).
struct RingOrder {
  const std::vector<int>* order = nullptr;  // position -> rank before the shift; null: identity
  const std::vector<int>* where = nullptr;  // rank -> position before the shift (with `order`)
  int L = 1;
  int shift = 0;
  int at(int p) const {
    const int q = shift == 0 ? p : p / L * L + (p % L + shift) % L;
    return order != nullptr ? (*order)[static_cast<size_t>(q)] : q;
  }
  int pos(int r) const {
    const int q = order != nullptr ? (*where)[static_cast<size_t>(r)] : r;
    return shift == 0 ? q : q / L * L + (q % L - shift + L) % L;
  }
};

// Segment boundaries: equal blocks (reduce-scatter, all-gather) or a near-even split (all-reduce),
// as segmentBegin/segmentCount with the division done once: the loops below ask for every one of
// the n segments, and at thousands of ranks the divisions were most of a small call's work.
// Segment i is the one position i ends with. A rail of the rails ring takes one part of the
// vector (all-reduce: `offset` onward) or of every rank's block (`offset` within blocks `stride`
// apart, `block` elements of each: segment i is then in the block of the rank at position i).
struct Segments {
  Segments(size_t total, int ranks, size_t blockElems)
      : count(total), n(ranks), block(blockElems), stride(blockElems), base(total / ranks), rem(total % ranks) {}
  size_t count;  // total elements
  int n;
  size_t block;  // > 0: every segment has exactly `block` elements
  size_t stride;
  size_t base, rem;
  size_t offset = 0;
  const RingOrder* order = nullptr;  // null: the identity
  size_t begin(int i) const {
    const auto u = static_cast<size_t>(i);
    if (block > 0) return offset + stride * static_cast<size_t>(order != nullptr ? order->at(i) : i);
    return offset + base * u + std::min(u, rem);
  }
  size_t length(int i) const { return block > 0 ? block : base + (static_cast<size_t>(i) < rem ? 1 : 0); }
  // Segments counting down from i (wrapping) before a non-empty one: 0 when i is non-empty. Only
  // a vector shorter than n has empty segments, [rem, n), so the loops below jump over them
  // instead of visiting all n at every rank (at thousands of ranks most of a small call's work).
  int emptyBelow(int i) const { return length(i) > 0 ? 0 : i - static_cast<int>(rem) + 1; }
};

// One ring of a call: its segments, this rank's position and neighbours, and (reduce-scatter)
// where this rank's finished segment goes.
struct Ring {
  Segments seg;
  int me, prev, next;
  uint8_t* final = nullptr;
};

Ring makeRing(const Exec& ex, Segments seg, const RingOrder* order) {
  const int n = ex.size();
  seg.order = order;
  const int me = order != nullptr ? order->pos(ex.rank()) : ex.rank();
  const int prev = ringMod(me - 1, n), next = ringMod(me + 1, n);
  return Ring{seg, me, order != nullptr ? order->at(prev) : prev, order != nullptr ? order->at(next) : next};
}

// Tasks of several rings in one order, by step first: each pair of ranks then posts its receives
// in the order they are sent, whichever rings the pair shares (pipeline.hpp).
template <typename Task>
void byStep(std::vector<Task>& tasks, size_t rings) {
  if (rings > 1)
    std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.step < b.step; });
}

// Reduce-scatter over `rings` at once: partials of segment i go to acc + begin(i), this rank's
// final segment of each ring to its `final`. Waits for every send before returning, so the caller
// may reuse acc.
Status reduceScatterCore(Exec& ex, const std::vector<Ring>& rings, const uint8_t* in, uint8_t* acc, DataType type,
                         RedOp op) {
  const int n = ex.size();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  ex.setPhase("reduce-scatter", 0, n - 1);
  std::vector<ReduceTask> tasks;
  for (const Ring& ring : rings) {
    const Segments& seg = ring.seg;
    const int r = ring.me;
    int first = rsSendSegment(r, n, 0);
    FERRY_TRY(sendSlices(ex, ring.next, in + seg.begin(first) * es, seg.length(first), type));
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
        uint8_t* dst = last ? ring.final + off * es : acc + (base + off) * es;
        tasks.push_back({in + (base + off) * es, dst, sliceLength(len, k, se), !last, last, s, ring.prev, ring.next});
      }
    }
  }
  byStep(tasks, rings.size());
  FERRY_TRY(recvReduceForward(ex, -1, -1, tasks, type, op, static_cast<uint32_t>(n), "reduce-scatter", n - 1));
  return ex.waitAll();
}

// All-gather over `rings` at once in `out`, where this rank's segment of each is already in place.
Status allGatherCore(Exec& ex, const std::vector<Ring>& rings, uint8_t* out, DataType type) {
  const int n = ex.size();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  std::vector<CopyTask> tasks;
  for (const Ring& ring : rings) {
    const Segments& seg = ring.seg;
    // g: agRecvSegment(r, n, t), one lower each step.
    for (int t = 0, g = agRecvSegment(ring.me, n, 0); t < n - 1; ++t, g = g == 0 ? n - 1 : g - 1) {
      if (const int skip = seg.emptyBelow(g); skip > 0) {
        t += skip - 1;
        g -= skip - 1;
        continue;
      }
      size_t len = seg.length(g), base = seg.begin(g);
      for (size_t k = 0, ks = sliceCount(len, se); k < ks; ++k) {
        tasks.push_back(
            {out + (base + sliceBegin(k, se)) * es, sliceLength(len, k, se), t < n - 2, t, ring.prev, ring.next});
      }
    }
  }
  byStep(tasks, rings.size());
  ex.setPhase("all-gather", 0, n - 1);
  for (const Ring& ring : rings) {
    FERRY_TRY(sendSlices(ex, ring.next, out + ring.seg.begin(ring.me) * es, ring.seg.length(ring.me), type));
  }
  FERRY_TRY(recvForward(ex, -1, -1, tasks, type, "all-gather", n - 1));
  return ex.waitAll();
}

void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

// The rings of a call: one over the ranks in order, or the rails (railsAllReduce).
class Rings {
 public:
  // `rails` false: the plain ring. `segment`: a rank's bytes in each step (railsFor).
  Rings(const Exec& ex, bool rails, double segment) {
    const Context& ctx = ex.context();
    if (!rails) return;
    const int n = ex.size();
    count_ = railsFor(ctx.rails, ctx.hostRanks, n, segment, ctx.sliceBytes);
    const std::vector<int>* order = ctx.hostOrder.size() == static_cast<size_t>(n) ? &ctx.hostOrder : nullptr;
    if (order != nullptr) {
      where_.resize(static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) where_[static_cast<size_t>((*order)[static_cast<size_t>(p)])] = p;
    }
    for (int c = 0; c < count_; ++c) orders_.push_back(RingOrder{order, &where_, ctx.hostRanks, c});
  }
  Rings(const Rings&) = delete;
  Rings& operator=(const Rings&) = delete;
  int count() const { return count_; }
  const RingOrder* order(int c) const { return orders_.empty() ? nullptr : &orders_[static_cast<size_t>(c)]; }
  // Rail c's part of `total` elements: [first, first + length).
  size_t first(size_t total, int c) const {
    const auto u = static_cast<size_t>(c), k = static_cast<size_t>(count_);
    return total / k * u + std::min(u, total % k);
  }
  size_t length(size_t total, int c) const {
    return total / static_cast<size_t>(count_) + (static_cast<size_t>(c) < total % static_cast<size_t>(count_) ? 1 : 0);
  }

 private:
  int count_ = 1;
  std::vector<int> where_;
  std::vector<RingOrder> orders_;
};

Status allReduceRings(Exec& ex, bool rails, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  if (ex.size() == 1 || count == 0) {
    copyIfDistinct(out, in, count * es);
    return Status::ok();
  }
  const Rings rings(ex, rails, static_cast<double>(count * es) / ex.size());
  auto* o = static_cast<uint8_t*>(out);
  std::vector<Ring> parts;
  for (int c = 0; c < rings.count(); ++c) {
    Segments seg{rings.length(count, c), ex.size(), 0};
    if (seg.count == 0) continue;
    seg.offset = rings.first(count, c);
    parts.push_back(makeRing(ex, seg, rings.order(c)));
    parts.back().final = o + parts.back().seg.begin(parts.back().me) * es;
  }
  FERRY_TRY(reduceScatterCore(ex, parts, static_cast<const uint8_t*>(in), o, type, op));
  return allGatherCore(ex, parts, o, type);
}

// Rail c's part of every rank's block of `block` elements, as a ring over the blocks.
std::vector<Ring> blockRings(const Exec& ex, const Rings& rings, size_t block) {
  std::vector<Ring> parts;
  for (int c = 0; c < rings.count(); ++c) {
    Segments seg{block * ex.size(), ex.size(), rings.length(block, c)};
    if (seg.block == 0) continue;
    seg.stride = block;
    seg.offset = rings.first(block, c);
    parts.push_back(makeRing(ex, seg, rings.order(c)));
  }
  return parts;
}

Status reduceScatterRings(Exec& ex, bool rails, const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  const size_t es = dataTypeSize(type);
  if (ex.size() == 1 || recvCount == 0) {
    copyIfDistinct(out, in, recvCount * es);
    return Status::ok();
  }
  const size_t total = recvCount * static_cast<size_t>(ex.size());
  auto* acc = static_cast<uint8_t*>(ex.context().scratch->get(total * es));
  if (acc == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", total * es);
  }
  const Rings rings(ex, rails, static_cast<double>(recvCount * es));
  std::vector<Ring> parts = blockRings(ex, rings, recvCount);
  for (Ring& part : parts) part.final = static_cast<uint8_t*>(out) + part.seg.offset * es;
  return reduceScatterCore(ex, parts, static_cast<const uint8_t*>(in), acc, type, op);
}

Status allGatherRings(Exec& ex, bool rails, const void* in, void* out, size_t sendCount, DataType type) {
  const size_t es = dataTypeSize(type);
  auto* o = static_cast<uint8_t*>(out);
  copyIfDistinct(o + static_cast<size_t>(ex.rank()) * sendCount * es, in, sendCount * es);
  if (ex.size() == 1 || sendCount == 0) return Status::ok();
  const Rings rings(ex, rails, static_cast<double>(sendCount * es));
  return allGatherCore(ex, blockRings(ex, rings, sendCount), o, type);
}

}  // namespace

Status ringAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  return allReduceRings(ex, false, in, out, count, type, op);
}
Status ringReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  return reduceScatterRings(ex, false, in, out, recvCount, type, op);
}
Status ringAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type) {
  return allGatherRings(ex, false, in, out, sendCount, type);
}
Status railsAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  return allReduceRings(ex, true, in, out, count, type, op);
}
Status railsReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op) {
  return reduceScatterRings(ex, true, in, out, recvCount, type, op);
}
Status railsAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type) {
  return allGatherRings(ex, true, in, out, sendCount, type);
}

// Rows of the algorithm table (table.hpp). Over messages a ring step moves one of n blocks per
// rank; on one host the arena's rows move fewer bytes with fewer hand-offs, so the ring is not
// priced there. The rails ring applies where its rails cross through NICs of their own: hosts of
// as many ranks, two or more of them, and two or more NICs per host.
namespace {
bool always(const Pricing&) { return true; }
bool railed(const Pricing& p) {
  return !p.arena && p.in.hosts >= 2 && p.in.evenHosts && std::min(p.in.nicsPerHost, p.in.ranksPerHost) >= 2;
}
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

namespace {
// The rails rows: all-reduce steps 2(n-1) times with a rank's segment of the vector, reduce-scatter
// and all-gather n-1 times with a block.
double railsAllReduceCost(const Pricing& p) { return p.flat(2 * (p.n - 1) * p.railsHop(p.B / p.n)); }
double railsBlocksCost(const Pricing& p) { return p.flat((p.n - 1) * p.railsHop(p.B)); }
Status runRailsAllReduce(Exec& ex, const Plan&, const Call& c) {
  return railsAllReduce(ex, c.send, c.recv, c.count, c.type, c.op);
}
Status runRailsReduceScatter(Exec& ex, const Plan&, const Call& c) {
  return railsReduceScatter(ex, c.send, c.recv, c.count, c.type, c.op);
}
Status runRailsAllGather(Exec& ex, const Plan&, const Call& c) {
  return railsAllGather(ex, c.send, c.recv, c.count, c.type);
}
}  // namespace

extern const AlgorithmRow kRailsAllReduce{CallKind::kAllReduce, Algorithm::kRails, Protocol::kMessages, railed,
                                          railsAllReduceCost,   runRailsAllReduce};
extern const AlgorithmRow kRailsReduceScatter{CallKind::kReduceScatter, Algorithm::kRails,
                                              Protocol::kMessages,      railed,
                                              railsBlocksCost,          runRailsReduceScatter};
extern const AlgorithmRow kRailsAllGather{CallKind::kAllGather, Algorithm::kRails, Protocol::kMessages, railed,
                                          railsBlocksCost,      runRailsAllGather};

}  // namespace ferry::coll
