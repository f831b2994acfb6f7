// Tree algorithms: all-reduce over a double binary tree, broadcast and reduce over a pipelined
// binary tree (algorithms.hpp has the contracts).
//
// Vocabulary:
//   in-order tree  ranks labelled 1..n; label i with lowest set bit b has children i - b/2 and
//                  i + b/2 and its root is the largest power of two <= n. Labels above n are cut
//                  and their one surviving (left) subtree takes their place. Every odd label is a
//                  leaf, so half the ranks are leaves and the depth is floor(log2 n).
//   double tree    tree A labels rank r as r + 1; tree B as n - r (n even) or r + 2 wrapped to
//                  1..n (n odd): A's leaves are B's interior nodes (but for one rank at odd n).
//                  Half the vector goes up and down A, the other half up and down B, so every rank
//                  sends about as much as in a ring but in O(log n) hops.
//   heap tree      virtual rank v = r - root (mod n), children 2v + 1 and 2v + 2: the broadcast's
//                  and reduce's tree, rooted at the call's root.
//   chunk          one message of FERRY_SLICE_BYTES; chunk j climbs a tree (each node sums its own
//                  contribution with its children's) and then descends it with the result.
//   height         of a label: log2 of its lowest set bit (leaves 0, the root the tree's depth);
//                  a parent is higher than its children, cut trees included.
//   step           every rank walks steps s = 0, 1, ...; at step s a node of height h in a tree
//                  of depth D climbs chunk s - h and descends chunk s - 2D + h, first in tree A,
//                  then in tree B. So each chunk moves one level a step, up and then down, and a
//                  step waits only for messages a peer sent at an earlier step: every edge is
//                  busy every step, where a schedule without the skew moves each chunk through
//                  the whole tree within one step. Messages between two ranks are matched in the
//                  order they were posted: a rank posts its receives in the order its peers send
//                  them, by the sender's step and then its events (climbs A, B; descents A, B).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/ring_math.hpp"
#include "collectives/table.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {
namespace {

int lowBit(int i) { return i & -i; }

// The uncut tree's parent of label i (not the root).
int rawParent(int i) {
  const int b = lowBit(i);
  return (i & (2 * b)) != 0 ? i - b : i + b;
}

// One rank's place in one tree: ranks, -1 where there is none.
struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
};

// Rank r's node in the in-order tree over labels 1..n, where rank r has label label(r) and
// label l belongs to rank rankOf(l).
template <typename Label, typename RankOf>
TreeNode inOrderNode(int r, int n, Label label, RankOf rankOf) {
  TreeNode t;
  const int i = label(r), b = lowBit(i);
  int top = 1;
  while (top * 2 <= n) top *= 2;
  if (i != top) {
    int p = rawParent(i);
    while (p > n) p = rawParent(p);
    t.parent = rankOf(p);
  }
  if (b >= 2) {
    t.child[0] = rankOf(i - b / 2);
    int c = i + b / 2;
    while (c > n && lowBit(c) >= 2) c -= lowBit(c) / 2;
    if (c <= n) t.child[1] = rankOf(c);
  }
  return t;
}

// Rank r's label in tree A or B of the double tree (file comment), and the rank of label l.
int doubleTreeLabel(int r, int n, int tree) {
  if (tree == 0) return r + 1;
  return n % 2 == 0 ? n - r : (r + 1) % n + 1;
}
int doubleTreeRank(int l, int n, int tree) {
  if (tree == 0) return l - 1;
  return n % 2 == 0 ? n - l : (l + n - 2) % n;
}

// Trees A and B of the double tree.
TreeNode doubleTreeNode(int r, int n, int tree) {
  return inOrderNode(
      r, n, [n, tree](int x) { return doubleTreeLabel(x, n, tree); },
      [n, tree](int l) { return doubleTreeRank(l, n, tree); });
}

int inOrderDepth(int n) {
  int d = 0;
  while ((2 << d) <= n) ++d;
  return d;
}

// Rank r's height in tree A or B of the double tree (file comment).
int doubleTreeHeight(int r, int n, int tree) {
  return std::countr_zero(static_cast<unsigned>(doubleTreeLabel(r, n, tree)));
}

// One climb or descent of a chunk through a tree: [begin, begin + elems) of the vector.
struct Chunk {
  size_t begin;
  size_t elems;
};

// A tree all-reduce's events, walked in the same order by every rank (file comment, "step").
class TreeAllReduce {
 public:
  TreeAllReduce(Exec& ex, const uint8_t* in, uint8_t* out, size_t count, DataType type, RedOp op)
      : ex_(ex), in_(in), out_(out), type_(type), op_(op), es_(dataTypeSize(type)) {
    const int n = ex.size(), r = ex.rank();
    const size_t se = sliceElems(ex, type);
    const size_t half = count / 2;
    depth_ = inOrderDepth(n);
    size_t most = 0;
    for (int t = 0; t < 2; ++t) {
      node_[t] = doubleTreeNode(r, n, t);
      height_[t] = doubleTreeHeight(r, n, t);
      parentHeight_[t] = node_[t].parent >= 0 ? doubleTreeHeight(node_[t].parent, n, t) : 0;
      for (int c = 0; c < 2; ++c) {
        childHeight_[t][c] = node_[t].child[c] >= 0 ? doubleTreeHeight(node_[t].child[c], n, t) : 0;
      }
      const size_t begin = t == 0 ? 0 : half, elems = t == 0 ? half : count - half;
      for (size_t k = 0, ks = sliceCount(elems, se); k < ks; ++k) {
        chunks_[t].push_back({begin + sliceBegin(k, se), sliceLength(elems, k, se)});
      }
      most = std::max(most, chunks_[t].size());
    }
    chunkElems_ = std::min(se, count - half);  // the larger half's largest chunk
    // The last chunk reaches the root at step most - 1 + D and the leaves D steps later.
    steps_ = static_cast<int>(most) + 2 * depth_;
    window_ = 2 * depth_ + 4;
    // A climb's slot is posted `window_` sender steps ahead and read up to depth_ steps after its
    // sender's step: it is free again that many chunks later.
    slots_ = window_ + depth_ + 1;
  }

  Status run() {
    const size_t slotBytes = (chunkElems_ * es_ + 63) & ~size_t{63};
    staging_ = static_cast<uint8_t*>(ex_.context().staging->get(slotBytes * 4 * slots_));
    if (staging_ == nullptr) {
      return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of staging memory", slotBytes * 4 * slots_);
    }
    slotBytes_ = slotBytes;
    recvs_.assign(std::max(chunks_[0].size(), chunks_[1].size()) * 6, nullptr);
    for (int s = 0; s < std::min(window_, steps_); ++s) FERRY_TRY(postReceives(s));
    for (int s = 0; s < steps_; ++s) {
      ex_.setPhase("double binary tree", s, steps_);
      for (int t = 0; t < 2; ++t) FERRY_TRY(climb(s - height_[t], t));
      for (int t = 0; t < 2; ++t) FERRY_TRY(descend(descentChunk(s, height_[t]), t));
      if (s + window_ < steps_) FERRY_TRY(postReceives(s + window_));
    }
    return ex_.waitAll();
  }

 private:
  bool valid(int k, int t) const { return k >= 0 && k < static_cast<int>(chunks_[t].size()); }
  // The chunk a node of height h descends at step s.
  int descentChunk(int s, int h) const { return s - 2 * depth_ + h; }
  // Receive requests of chunk k: climbs of tree t from child c at 2t + c, descents at 4 + t.
  transport::Request*& request(int k, int index) { return recvs_[static_cast<size_t>(k) * 6 + index]; }
  uint8_t* slot(int k, int t, int c) { return staging_ + ((k % slots_) * 4 + 2 * t + c) * slotBytes_; }

  // Every receive of a message a peer sends at its step s, in the order it sends them.
  Status postReceives(int s) {
    for (int t = 0; t < 2; ++t) {
      for (int c = 0; c < 2; ++c) {
        const int k = s - childHeight_[t][c];
        if (node_[t].child[c] < 0 || !valid(k, t)) continue;
        auto rv = ex_.recv(node_[t].child[c], slot(k, t, c), chunks_[t][k].elems * es_);
        FERRY_TRY(rv);
        request(k, 2 * t + c) = *rv;
      }
    }
    for (int t = 0; t < 2; ++t) {
      const int k = descentChunk(s, parentHeight_[t]);
      if (node_[t].parent < 0 || !valid(k, t)) continue;
      const Chunk& ch = chunks_[t][k];
      auto rv = ex_.recv(node_[t].parent, out_ + ch.begin * es_, ch.elems * es_);
      FERRY_TRY(rv);
      request(k, 4 + t) = *rv;
    }
    return Status::ok();
  }

  // Chunk k of tree t: own contribution combined with the children's, to the parent (at the root:
  // the result, divided for avg).
  Status climb(int k, int t) {
    if (!valid(k, t)) return Status::ok();
    const Chunk& ch = chunks_[t][k];
    const size_t off = ch.begin * es_;
    const uint8_t* acc = in_ + off;
    const RedOp combine = op_ == RedOp::kAvg ? RedOp::kSum : op_;
    for (int c = 0; c < 2; ++c) {
      if (node_[t].child[c] < 0) continue;
      FERRY_TRY(ex_.wait(request(k, 2 * t + c)));
      kernels::reduce(type_, combine, out_ + off, acc, slot(k, t, c), ch.elems);
      acc = out_ + off;
    }
    if (node_[t].parent >= 0) {
      auto sd = ex_.send(node_[t].parent, acc, ch.elems * es_);
      FERRY_TRY(sd);
      return Status::ok();
    }
    if (acc != out_ + off) std::memmove(out_ + off, acc, ch.elems * es_);
    if (op_ == RedOp::kAvg) {
      kernels::divide(type_, out_ + off, out_ + off, ch.elems, static_cast<uint32_t>(ex_.size()));
    }
    return Status::ok();
  }

  // Chunk k of tree t: the result from the parent, on to the children.
  Status descend(int k, int t) {
    if (!valid(k, t)) return Status::ok();
    const Chunk& ch = chunks_[t][k];
    if (node_[t].parent >= 0) FERRY_TRY(ex_.wait(request(k, 4 + t)));
    for (int c = 0; c < 2; ++c) {
      if (node_[t].child[c] < 0) continue;
      auto sd = ex_.send(node_[t].child[c], out_ + ch.begin * es_, ch.elems * es_);
      FERRY_TRY(sd);
    }
    return Status::ok();
  }

  Exec& ex_;
  const uint8_t* in_;
  uint8_t* out_;
  DataType type_;
  RedOp op_;
  size_t es_;
  TreeNode node_[2];
  int height_[2] = {0, 0}, parentHeight_[2] = {0, 0}, childHeight_[2][2] = {{0, 0}, {0, 0}};
  std::vector<Chunk> chunks_[2];
  size_t chunkElems_ = 0;
  int depth_ = 0, steps_ = 0, window_ = 0, slots_ = 0;
  uint8_t* staging_ = nullptr;
  size_t slotBytes_ = 0;
  std::vector<transport::Request*> recvs_;
};

// Heap tree rooted at `root`: parent and children of rank r, -1 where there is none.
TreeNode heapNode(int r, int n, int root) {
  TreeNode t;
  const int v = ringMod(r - root, n);
  if (v > 0) t.parent = ringMod((v - 1) / 2 + root, n);
  for (int c = 0; c < 2; ++c) {
    if (2 * v + 1 + c < n) t.child[c] = ringMod(2 * v + 1 + c + root, n);
  }
  return t;
}

int heapDepth(int n) {
  int d = 0;
  while ((2 << d) - 1 < n) ++d;  // a heap of depth d holds 2^(d+1) - 1 ranks
  return d;
}

}  // namespace

Status treeAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const size_t bytes = count * dataTypeSize(type);
  if (ex.size() == 1 || count == 0) {
    if (out != in && bytes > 0) std::memmove(out, in, bytes);
    return Status::ok();
  }
  return TreeAllReduce(ex, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), count, type, op).run();
}

bool isChild(const TreeNode& node, int p) { return p >= 0 && (node.child[0] == p || node.child[1] == p); }

// Over messages, rank r acknowledges every tree broadcast or reduce to rank r + 1 and takes the
// acknowledgement of rank r - 1 in a guard (Context::acks): neighbours whatever the root, so ranks
// that disagree on it find some neighbour's acknowledgement or data in a guard or a receive and name
// the mismatch, where a tree's edges (they depend on the root) could leave each waiting on a rank
// that sends nothing. Receives from a peer match in the order posted (any fingerprint), so the
// acknowledgement follows the data this rank sends the next rank, and the guard the receives of
// the previous rank's data; each goes at the start where there is none. One empty message a call.
class RingAck {
 public:
  RingAck(Exec& ex, int r, int n, bool dataToNext)
      : ex_(ex), on_(ex.context().arena == nullptr), prev_(ringMod(r - 1, n)), next_(ringMod(r + 1, n)),
        dataToNext_(dataToNext) {}
  Status expect() const { return on_ ? ex_.expectAck(prev_, kEveryCall) : Status::ok(); }
  /// `afterData`: the call's end (called twice: once at the start, once at the end).
  Status owe(bool afterData) const {
    return on_ && afterData == dataToNext_ ? ex_.oweAck(next_, kEveryCall) : Status::ok();
  }

 private:
  // Bytes that make expectAck/oweAck act in this call rather than once a stream of calls.
  static constexpr size_t kEveryCall = SIZE_MAX;
  Exec& ex_;
  bool on_;
  int prev_, next_;
  bool dataToNext_;
};

Status treeBroadcast(Exec& ex, const void* in, void* out, size_t count, DataType type, int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  if (r == root && out != in && count > 0) std::memmove(out, in, count * es);
  if (n == 1 || count == 0) return Status::ok();
  const TreeNode node = heapNode(r, n, root);
  ex.setPhase("tree broadcast", 0, heapDepth(n));
  auto* o = static_cast<uint8_t*>(out);
  const size_t ks = sliceCount(count, se);
  std::vector<transport::Request*> recvs;
  if (node.parent >= 0) {
    for (size_t k = 0; k < ks; ++k) {
      auto rv = ex.recv(node.parent, o + sliceBegin(k, se) * es, sliceLength(count, k, se) * es);
      FERRY_TRY(rv);
      recvs.push_back(*rv);
    }
  }
  // Every receive from the rank before this one is posted: its acknowledgement comes after them.
  const RingAck ack(ex, r, n, isChild(node, ringMod(r + 1, n)));
  FERRY_TRY(ack.expect());
  FERRY_TRY(ack.owe(false));
  for (size_t k = 0; k < ks; ++k) {
    if (node.parent >= 0) FERRY_TRY(ex.wait(recvs[k]));
    for (int c = 0; c < 2; ++c) {
      if (node.child[c] >= 0)
        FERRY_TRY(ex.send(node.child[c], o + sliceBegin(k, se) * es, sliceLength(count, k, se) * es));
    }
  }
  FERRY_TRY(ack.owe(true));
  return ex.waitAll();
}

Status treeReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op, int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  if (n == 1 || count == 0) {
    if (r == root && out != in && count > 0) std::memmove(out, in, count * es);
    return Status::ok();
  }
  const TreeNode node = heapNode(r, n, root);
  ex.setPhase("tree reduce", 0, heapDepth(n));
  const RingAck ack(ex, r, n, node.parent == ringMod(r + 1, n));
  const bool prevIsChild = isChild(node, ringMod(r - 1, n));
  if (!prevIsChild) FERRY_TRY(ack.expect());
  FERRY_TRY(ack.owe(false));
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (r != root) {
    dst = static_cast<uint8_t*>(ex.context().scratch->get(count * es));
    if (dst == nullptr)
      return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", count * es);
  }
  const size_t ks = sliceCount(count, se);
  const int children = (node.child[0] >= 0 ? 1 : 0) + (node.child[1] >= 0 ? 1 : 0);
  const size_t depth = std::min<size_t>(std::max(1, ex.context().depth), ks);
  const size_t slotBytes = (std::min(se, count) * es + 63) & ~size_t{63};
  auto* staging = static_cast<uint8_t*>(ex.context().staging->get(slotBytes * depth * 2));
  if (staging == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of staging memory", slotBytes * depth * 2);
  }
  std::vector<transport::Request*> recvs(ks * 2, nullptr);
  auto post = [&](size_t k) -> Status {
    for (int c = 0; c < children; ++c) {
      auto rv = ex.recv(node.child[c], staging + ((k % depth) * 2 + c) * slotBytes, sliceLength(count, k, se) * es);
      FERRY_TRY(rv);
      recvs[k * 2 + c] = *rv;
    }
    return Status::ok();
  };
  for (size_t k = 0; k < depth; ++k) FERRY_TRY(post(k));
  // A child's acknowledgement comes after all its slices: its guard after their receives.
  if (prevIsChild && depth == ks) FERRY_TRY(ack.expect());
  const RedOp combine = op == RedOp::kAvg ? RedOp::kSum : op;
  for (size_t k = 0; k < ks; ++k) {
    const size_t off = sliceBegin(k, se) * es, elems = sliceLength(count, k, se);
    const uint8_t* acc = src + off;
    for (int c = 0; c < children; ++c) {
      FERRY_TRY(ex.wait(recvs[k * 2 + c]));
      kernels::reduce(type, combine, dst + off, acc, staging + ((k % depth) * 2 + c) * slotBytes, elems);
      acc = dst + off;
    }
    if (node.parent >= 0) {
      FERRY_TRY(ex.send(node.parent, acc, elems * es));
    } else {
      if (acc != dst + off) std::memmove(dst + off, acc, elems * es);
      if (op == RedOp::kAvg) kernels::divide(type, dst + off, dst + off, elems, static_cast<uint32_t>(n));
    }
    if (k + depth < ks) {
      FERRY_TRY(post(k + depth));
      if (prevIsChild && k + depth == ks - 1) FERRY_TRY(ack.expect());
    }
  }
  FERRY_TRY(ack.owe(true));
  return ex.waitAll();
}

// Rows of the algorithm table (table.hpp): priced over a measured network only (one host has the
// arena's rows), like the ring and the chain (cost_model.hpp has the formulas).
namespace {
double doubleTreeCost(const Pricing& p) { return !p.arena && p.modelled ? p.doubleTree(p.n, p.B) : kUnmodelled; }
// Broadcast and reduce: priced as the chain is (each node sends to two children, so each slice
// pays two messages' bytes); ranks that disagree on the root are named through RingAck.
double heapTreeCost(const Pricing& p) { return p.arena ? kUnmodelled : p.flat(p.heapTree(p.n, p.B)); }
}  // namespace

extern const AlgorithmRow kTreeAllReduce{CallKind::kAllReduce,
                                         Algorithm::kTree,
                                         Protocol::kMessages,
                                         [](const Pricing&) { return true; },
                                         doubleTreeCost,
                                         [](Exec& ex, const Plan&, const Call& c) {
                                           return treeAllReduce(ex, c.send, c.recv, c.count, c.type, c.op);
                                         }};

extern const AlgorithmRow kTreeBroadcast{CallKind::kBroadcast,
                                         Algorithm::kTree,
                                         Protocol::kMessages,
                                         [](const Pricing&) { return true; },
                                         heapTreeCost,
                                         [](Exec& ex, const Plan&, const Call& c) {
                                           return treeBroadcast(ex, c.send, c.recv, c.count, c.type, c.root);
                                         }};

extern const AlgorithmRow kTreeReduce{CallKind::kReduce,
                                      Algorithm::kTree,
                                      Protocol::kMessages,
                                      [](const Pricing&) { return true; },
                                      heapTreeCost,
                                      [](Exec& ex, const Plan&, const Call& c) {
                                        return treeReduce(ex, c.send, c.recv, c.count, c.type, c.op, c.root);
                                      }};

}  // namespace ferry::coll
