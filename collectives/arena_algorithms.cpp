// Single-host algorithms over the arena (transports/arena.hpp).
//
// Vocabulary: a rank's mailbox ("slot") is shared memory every peer can read; an announced buffer
// is one of the caller's own buffers whose address the rank publishes so peers can read it with
// one copy (protocol kCma). Phases are numbered per call; "post k" says "I finished phase k",
// "await p k" waits for peer p to say so.
//
// Most algorithms open the same way: announce the call (kind, count, type, op, root, algorithm,
// protocol, buffers), fill the own mailbox if the protocol uses it, post 1, await everyone's 1.
// That entry barrier checks that every rank runs the same call. Before any rank writes its mailbox
// it claims it (Exec::claimMailbox): every peer must have entered the previous call, so it finished
// reading what was written there two calls ago; usually that is already true and costs n loads. Algorithms that read
// peers' own buffers end with one more barrier, so no rank returns (and lets its caller reuse a buffer) while a peer
// still reads it.
//
// Reductions always combine rank 0's contribution with rank 1's, then rank 2's and so on, whoever
// computes them: every rank gets bit-identical results, whatever the algorithm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/ring_math.hpp"
#include "kernels/host/copy.hpp"
#include "kernels/host/reduce.hpp"
#include "kernels/host/reproducible.hpp"

namespace ferry::coll {
namespace {

constexpr size_t kDefaultChunk = 256 * 1024;

// Whether a call on vectors of `bytes` (every rank's blocks together for all-gather, all-to-all
// and reduce-scatter) writes its output with streaming stores: as the plan says, or by default
// when the buffers of all the host's ranks, one per rank in place or two out of place, add up to
// Context::streamMinBytes (the last-level cache by default). Smaller, the output may still be
// cached from the last call that used it, and its reader may find it there; but an application
// that walks through more memory than the cache holds (training buffers, nccl-tests' shifted
// offsets) finds it cold, which the tuner's trials of both kinds of store tell apart. Then the
// copy into the output that follows from it.
bool streamOut(const Exec& ex, const Plan& plan, size_t bytes, bool inPlace) {
  if (plan.stores != Stores::kAuto) return plan.stores == Stores::kStreaming;
  const size_t buffers = static_cast<size_t>(ex.size()) * (inPlace ? 1 : 2);
  return bytes >= ex.context().streamMinBytes / buffers;
}
void copyOut(bool stream, void* dst, const void* src, size_t bytes) {
  if (stream) {
    kernels::copyStreaming(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

size_t chunkElems(const Exec& ex, const Plan& plan, size_t es) {
  size_t bytes = plan.chunkBytes != 0 ? plan.chunkBytes : ex.context().chunkBytes;
  if (bytes == 0) bytes = kDefaultChunk;
  return std::max<size_t>(bytes / es, 1);
}

// Pipelined mailbox layout: each of a rank's mailboxes (one per call parity) holds two halves,
// alternated by chunk step; a half has n areas of `k` bytes: area p carries this rank's
// contribution to segment p (p != rank), area `rank` this rank's reduced chunk.
struct Pipe {
  size_t ke;     // elements per chunk step
  size_t kb;     // bytes per area
  size_t steps;  // chunk steps
  uint8_t* area(Exec& ex, int owner, size_t step, int p) const {
    return ex.slot(owner) + ((step & 1) * static_cast<size_t>(ex.size()) + static_cast<size_t>(p)) * kb;
  }
};

// `longest` is the element count of the longest segment.
Pipe makePipe(const Exec& ex, const Plan& plan, size_t es, size_t longest) {
  const size_t areas = 2 * static_cast<size_t>(ex.size());
  size_t kb = std::min(chunkElems(ex, plan, es) * es, ex.context().arena->slotBytes() / areas);
  kb = std::max<size_t>(kb / 64 * 64, es);
  Pipe p{kb / es, 0, 0};
  p.kb = p.ke * es;
  p.steps = longest == 0 ? 0 : (longest + p.ke - 1) / p.ke;
  return p;
}

// Elements [j*ke, ...) of a segment of `len` elements at chunk step j.
inline size_t stepLen(const Pipe& pp, size_t len, size_t j) {
  size_t b = j * pp.ke;
  return b >= len ? 0 : std::min(pp.ke, len - b);
}

// Combine step i (1..n-1) of a reduction over ranks 0..n-1: dst = acc op src, where the last step
// of an average divides by n.
void combine(DataType type, RedOp op, void* dst, const void* acc, const void* src, size_t count, int i, int n) {
  if (op == RedOp::kAvg) {
    if (i == n - 1) {
      kernels::sumDivide(type, dst, acc, src, count, static_cast<uint32_t>(n));
    } else {
      kernels::reduce(type, RedOp::kSum, dst, acc, src, count);
    }
  } else {
    kernels::reduce(type, op, dst, acc, src, count);
  }
}

// The reproducible mode's reduction (collectives/reproducible.hpp): a chunk's values from every
// rank reduced at once and exactly (kernels::reproReduceRowList), in place of the combine in rank
// order. Each element's bits depend only on its values, so they match the mode's other forms
// whatever the chunking. `rows` holds n pointers, allocated once per call.
struct ExactReduction {
  kernels::ReproLanes lanes;
  bool avg = false;
  std::vector<const void*> rows;
};

// Where rank p's contribution to a reduction lives: in a mailbox (or our own memory), directly
// addressable; or in p's process, to be read with one copy.
struct Source {
  const uint8_t* local = nullptr;  // non-null: readable here
  uint64_t remote = 0;             // else: address in p's process
};

// dst[0..count) = reduction over ranks 0..n-1 of src(p)[0..count), in chunks so the operands stay
// in cache; remote operands are read into staging buffers. dst may be a local source (in-place
// calls): that operand is then set aside before the first partial result overwrites it.
// `stream`: each chunk is reduced in a staging chunk (in cache) and copied to dst with streaming
// stores (streamOut), so dst's lines are never read; except chunks computed in place. `exact`:
// the reproducible mode's reduction, every operand of a chunk at once (remote ones each staged).
template <typename SourceOf>
Status reduceFromAll(Exec& ex, const Plan& plan, SourceOf sourceOf, uint8_t* dst, size_t count, DataType type, RedOp op,
                     bool stream = false, ExactReduction* exact = nullptr) {
  const int n = ex.size();
  const size_t es = dataTypeSize(type), ce = chunkElems(ex, plan, es);
  // Four chunks: two remote operands, one set-aside local one, and the result when streaming;
  // exact, n + 4: operand p's in chunk 4 + p.
  uint8_t* stage = nullptr;
  auto stageAt = [&](int i) {
    const size_t chunks = exact != nullptr ? static_cast<size_t>(n) + 4 : 4;
    if (stage == nullptr) stage = static_cast<uint8_t*>(ex.context().staging->get(chunks * ce * es));
    return stage + static_cast<size_t>(i) * ce * es;
  };
  for (size_t off = 0; off < count; off += ce) {
    const size_t len = std::min(ce, count - off);
    // An in-place chunk (dst is a local source) was just read, so its lines are in the cache and
    // storing there reads nothing from memory: streaming would only add the staging copy.
    bool streamChunk = stream && n > 1;
    for (int p = 0; p < n && streamChunk; ++p) {
      const uint8_t* l = sourceOf(p).local;
      if (l != nullptr && l + off * es < dst + (off + len) * es && dst + off * es < l + (off + len) * es) {
        streamChunk = false;
      }
    }
    // Streaming, the partial results go to a staging chunk no source lives in: nothing to set aside.
    uint8_t* d = streamChunk ? stageAt(3) : dst + off * es;
    const uint8_t* setAside = nullptr;
    for (int p = 1; p < n && !streamChunk && exact == nullptr; ++p) {
      Source s = sourceOf(p);
      const uint8_t* l = s.local != nullptr ? s.local + off * es : nullptr;
      if (l != nullptr && l < d + len * es && d < l + len * es) {
        std::memcpy(stageAt(2), l, len * es);
        setAside = stageAt(2);
      }
    }
    auto operand = [&](int p, int which) -> Result<const uint8_t*> {
      Source s = sourceOf(p);
      if (s.local != nullptr) {
        const uint8_t* l = s.local + off * es;
        return p > 0 && setAside != nullptr && l < d + len * es && d < l + len * es ? setAside : l;
      }
      // A peer's buffer in shared memory is reduced from where it lies; others are read here.
      if (const uint8_t* m = ex.mappedPeer(p, s.remote + off * es, len * es)) return m;
      FERRY_TRY(ex.readPeer(p, s.remote + off * es, stageAt(which), len * es));
      return static_cast<const uint8_t*>(stageAt(which));
    };
    if (exact != nullptr) {
      // Every operand at its offset (none set aside: the reduction writes a block after reading it).
      for (int p = 0; p < n; ++p) {
        Source s = sourceOf(p);
        const uint8_t* l = s.local != nullptr ? s.local + off * es : ex.mappedPeer(p, s.remote + off * es, len * es);
        if (l == nullptr) {
          FERRY_TRY(ex.readPeer(p, s.remote + off * es, stageAt(4 + p), len * es));
          l = stageAt(4 + p);
        }
        exact->rows[static_cast<size_t>(p)] = l;
      }
      kernels::reproReduceRowList(type, exact->lanes, exact->rows.data(), n, len, exact->avg, d);
      if (streamChunk) kernels::copyStreaming(dst + off * es, d, len * es);
      continue;
    }
    auto a = operand(0, 0);
    FERRY_TRY(a);
    if (n == 1) {
      if (*a != d) std::memmove(d, *a, len * es);
      continue;
    }
    const uint8_t* acc = *a;
    for (int p = 1; p < n; ++p) {
      auto b = operand(p, 1);
      FERRY_TRY(b);
      combine(type, op, d, acc, *b, len, p, n);
      acc = d;
    }
    if (streamChunk) kernels::copyStreaming(dst + off * es, d, len * es);
  }
  return Status::ok();
}

// Copies `bytes` at `remote` in peer p's memory to dst: from p's shared buffer where it is mapped
// here (with streaming stores if `stream`), else with one cross-memory read.
Status readInto(Exec& ex, int p, uint64_t remote, uint8_t* dst, size_t bytes, bool stream) {
  if (stream) {
    if (const uint8_t* m = ex.mappedPeer(p, remote, bytes)) {
      kernels::copyStreaming(dst, m, bytes);
      return Status::ok();
    }
  }
  return ex.readPeer(p, remote, dst, bytes);
}

void announce(Exec& ex, const Plan& plan, const void* a0, const void* a1) {
  ex.announce(static_cast<uint32_t>(plan.algorithm), static_cast<uint32_t>(plan.protocol), a0, a1);
}
// The same, naming what the kCma plans of the call let peers read with readPeer: the first
// `read0` bytes of a0 and `read1` of a1 (0: none). Those reads pin this rank's pages, so the arena
// may prepare them; whatever this call's plan, since the tuner's next may be a kCma one.
void announce(Exec& ex, const Plan& plan, const void* a0, size_t read0, const void* a1, size_t read1) {
  ex.exposeForRead(a0, read0);
  if (a1 != a0) ex.exposeForRead(a1, read1);
  announce(ex, plan, a0, a1);
}

// Announce, post 1, await everyone's 1; then note whether every rank's buffers are shared
// memory (the tuner's hint for the next calls).
Status enter(Exec& ex) {
  ex.setPhase("arrival", 0, 1);
  ex.post(1);
  FERRY_TRY(ex.awaitAll(1));
  ex.noteShared();
  return Status::ok();
}

// Peers may read our announced buffers until they pass `phase`: post it and wait for everyone's.
Status leave(Exec& ex, int phase) {
  ex.setPhase("departure", 0, 1);
  ex.post(phase);
  return ex.awaitAll(phase);
}

// Step (a) of the pipelined reductions below for chunk step j: copy chunk j of every other segment
// of `in` into this rank's areas, post 2j+1, wait for everyone's.
Status scatterStep(Exec& ex, const Pipe& pp, const uint8_t* in, size_t count, size_t j, size_t es) {
  const int n = ex.size(), r = ex.rank();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    size_t len = stepLen(pp, segmentCount(count, n, p), j);
    if (len > 0) std::memcpy(pp.area(ex, r, j, p), in + (segmentBegin(count, n, p) + j * pp.ke) * es, len * es);
  }
  ex.post(static_cast<int>(2 * j) + 1);
  return ex.awaitAll(static_cast<int>(2 * j) + 1);
}

// Step (b): reduce chunk j of segment r from the own input and every peer's area r into `dst`
// (this rank's chunk j): exactly where `exact` is set, else in rank order with `op`.
Status reduceStep(Exec& ex, const Plan& plan, const Pipe& pp, const uint8_t* in, size_t count, size_t j, uint8_t* dst,
                  DataType type, RedOp op, bool stream = false, ExactReduction* exact = nullptr) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type);
  const size_t myLen = stepLen(pp, segmentCount(count, n, r), j);
  if (myLen == 0) return Status::ok();
  const uint8_t* local = in + (segmentBegin(count, n, r) + j * pp.ke) * es;
  return reduceFromAll(
      ex, plan,
      [&](int p) {
        return Source{p == r ? local : pp.area(ex, p, j, r), 0};
      },
      dst, myLen, type, op, stream, exact);
}

// Step (c): copy chunk j of every other segment into `out` from its owner's area, once the owner
// posted 2j+2. `stream`: with streaming stores (streamOut).
Status gatherStep(Exec& ex, const Pipe& pp, size_t count, size_t j, uint8_t* out, size_t es, bool stream) {
  const int n = ex.size(), r = ex.rank();
  for (int i = 1; i < n; ++i) {
    int p = (r + i) % n;
    size_t len = stepLen(pp, segmentCount(count, n, p), j);
    if (len == 0) continue;
    FERRY_TRY(ex.await(p, static_cast<int>(2 * j) + 2));
    copyOut(stream, out + (segmentBegin(count, n, p) + j * pp.ke) * es, pp.area(ex, p, j, p), len * es);
  }
  return Status::ok();
}

Status twoShotFromBuffers(Exec& ex, const Plan& plan, const void* in, uint8_t* o, size_t count, DataType type, RedOp op,
                          ExactReduction* exact = nullptr);
Status reduceScatterFromBuffers(Exec& ex, const Plan& plan, const void* in, void* out, size_t recvCount, DataType type,
                                RedOp op, ExactReduction* exact = nullptr);

// Two-shot all-reduce through the mailboxes, pipelined in chunk steps j = 0, 1, ...:
//   (a) rank r copies chunk j of every other segment p of its input into its area p; posts 2j+1;
//   (b) after everyone's 2j+1, reduces chunk j of segment r from its own input and every peer's
//       area r into its own area r, copies that to its output; posts 2j+2;
//   (c) copies chunk j of every other segment from its owner's area once the owner posted 2j+2.
// Each byte is copied into shared memory once by its owner and read once by whoever needs it; the
// reads of (b) and (c) hit data a peer wrote moments before, still in the shared cache. Areas
// alternate between two halves by step: a rank rewrites half (j & 1) at step j+2 only after every
// peer posted 2(j+1)+1, which it does after finishing step j. The first post is the entry barrier.
// When it shows every rank's buffers in shared memory, the ranks go on as twoshot/cma instead
// (twoShotFromBuffers), reducing straight from the peers' inputs: no copy through the mailboxes.
// `exact`: the reproducible mode's reduction in both.
Status pipelinedAllReduce(Exec& ex, const Plan& plan, const void* in, uint8_t* out, size_t count, DataType type,
                          RedOp op, ExactReduction* exact = nullptr) {
  FERRY_TRY(ex.claimMailbox());
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type);
  const Pipe pp = makePipe(ex, plan, es, segmentCount(count, n, 0));
  const size_t segB = segmentBegin(count, n, r), segN = segmentCount(count, n, r);
  const int steps = static_cast<int>(pp.steps);
  const bool stream = streamOut(ex, plan, count * es, in == out);
  for (size_t j = 0; j < pp.steps; ++j) {
    ex.setPhase("reduce-scatter", static_cast<int>(j), steps);
    uint8_t* mine = pp.area(ex, r, j, r);
    FERRY_TRY(scatterStep(ex, pp, static_cast<const uint8_t*>(in), count, j, es));
    if (j == 0 && ex.noteShared() && ex.context().peerReads && count * es >= ex.context().sharedMinBytes) {
      return twoShotFromBuffers(ex, plan, in, out, count, type, op, exact);
    }
    FERRY_TRY(reduceStep(ex, plan, pp, static_cast<const uint8_t*>(in), count, j, mine, type, op, false, exact));
    const size_t myLen = stepLen(pp, segN, j);
    if (myLen > 0) copyOut(stream, out + (segB + j * pp.ke) * es, mine, myLen * es);
    ex.post(static_cast<int>(2 * j) + 2);
    ex.setPhase("all-gather", static_cast<int>(j), steps);
    FERRY_TRY(gatherStep(ex, pp, count, j, out, es, stream));
  }
  return Status::ok();
}

// Reduce to root through the mailboxes, pipelined: steps (a) and (b) of pipelinedAllReduce, the
// root reducing its segment straight into its output; then (c) on the root only.
Status pipelinedReduce(Exec& ex, const Plan& plan, const void* in, uint8_t* out, size_t count, DataType type, RedOp op,
                       int root) {
  FERRY_TRY(ex.claimMailbox());
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type);
  const Pipe pp = makePipe(ex, plan, es, segmentCount(count, n, 0));
  const size_t segB = segmentBegin(count, n, r);
  const int steps = static_cast<int>(pp.steps);
  const bool stream = streamOut(ex, plan, count * es, in == out);
  for (size_t j = 0; j < pp.steps; ++j) {
    ex.setPhase("reduce", static_cast<int>(j), steps);
    uint8_t* dst = r == root ? out + (segB + j * pp.ke) * es : pp.area(ex, r, j, r);
    FERRY_TRY(scatterStep(ex, pp, static_cast<const uint8_t*>(in), count, j, es));
    FERRY_TRY(reduceStep(ex, plan, pp, static_cast<const uint8_t*>(in), count, j, dst, type, op, r == root && stream));
    ex.post(static_cast<int>(2 * j) + 2);
    if (r != root) continue;
    ex.setPhase("gather", static_cast<int>(j), steps);
    FERRY_TRY(gatherStep(ex, pp, count, j, out, es, stream));
  }
  return Status::ok();
}

// Chunks streamed through mailboxes used as rings. Each writer's mailbox holds `depth` entries of
// `entry` bytes, chunk w in entry w % depth. At step j a rank writes its chunks up to j + ahead
// (chunk w once every reader posted w - depth + 2: it has read chunk w - depth), posts j + 1, then
// reads chunk j of the writers it reads (once each posted j - ahead + 1). Phase j + 1 so says "my
// chunks up to j + ahead are written, I have read every chunk before j"; the first post is the
// entry barrier. A rank may run up to `ahead` steps ahead of the writers it reads and
// depth - ahead - 1 ahead of its readers, so ranks sharing a core need not all run at every step,
// as they must with two alternating halves. ahead <= depth - 2 keeps the slowest rank able to go
// on; where every rank writes and reads, ahead <= (depth - 2) / 2 means the reads' waits already
// imply the writes' (a rank reads ahead of its peers only as far as their writes let it).
class RingStream {
 public:
  // Chunks of at most the plan's chunk size, `areas` of them per entry (one per reader for
  // all-to-all and reduce-scatter), for a stream of `bytes` per area. `root` >= 0: only the root
  // writes, so it may run as far ahead as the ring allows.
  RingStream(Exec& ex, const Plan& plan, size_t bytes, size_t areas, int root) : ex_(ex), root_(root) {
    const size_t slot = ex.context().arena->slotBytes();
    size_t k = plan.chunkBytes != 0 ? plan.chunkBytes : ex.context().chunkBytes;
    if (k == 0) k = kDefaultChunk;
    k = std::max<size_t>(std::min(k, slot / (2 * areas)) / 64 * 64, 64);
    chunk_ = std::max(k, (bytes >> (Exec::kPhaseBits - 2)) / 64 * 64 + 64);  // steps fit the phase numbers
    steps_ = (bytes + chunk_ - 1) / chunk_;
    entry_ = chunk_ * areas;
    depth_ = std::max<size_t>(slot / entry_, 2);
    ahead_ = root >= 0 ? depth_ - 2 : (depth_ - 2) / 2;
  }
  size_t chunk() const { return chunk_; }
  size_t steps() const { return steps_; }
  // Bytes of chunk j of a stream of `bytes`.
  size_t len(size_t j, size_t bytes) const { return std::min(chunk_, bytes - j * chunk_); }

  // Step j's writes, write(w, entry) for this rank's chunks up to j + ahead, and its post. Step 0
  // first claims the mailbox and ends with the entry barrier, after which every rank reads the
  // same call log and so notes the same hint (Exec::noteShared).
  template <class Write>
  Status advance(size_t j, Write write) {
    if (j == 0) FERRY_TRY(ex_.claimMailbox());
    const int r = ex_.rank();
    const size_t upTo = root_ < 0 || r == root_ ? std::min(j + ahead_ + 1, steps_) : 0;
    for (; written_ < upTo; ++written_) {
      if (written_ >= depth_) FERRY_TRY(ex_.awaitAll(static_cast<int>(written_ - depth_) + 2));
      write(written_, ex_.slot(r) + (written_ % depth_) * entry_);
    }
    ex_.post(static_cast<int>(j) + 1);
    if (j > 0) return Status::ok();
    FERRY_TRY(ex_.awaitAll(1));
    shared_ = ex_.noteShared();
    return Status::ok();
  }
  // After step 0: whether every rank's buffers are shared memory.
  bool shared() const { return shared_; }

  // Writer p's entry holding chunk j, once p has written it.
  Result<const uint8_t*> await(int p, size_t j) {
    FERRY_TRY(ex_.await(p, phaseOf(j)));
    return entry(p, j);
  }
  // Waits until every peer has written chunk j.
  Status awaitAll(size_t j) { return ex_.awaitAll(phaseOf(j)); }
  const uint8_t* entry(int p, size_t j) { return ex_.slot(p) + (j % depth_) * entry_; }

 private:
  int phaseOf(size_t j) const { return static_cast<int>(j > ahead_ ? j - ahead_ : 0) + 1; }

  Exec& ex_;
  int root_;
  size_t chunk_ = 0, steps_ = 0, entry_ = 0, depth_ = 0, ahead_ = 0, written_ = 0;
  bool shared_ = false;
};

// Broadcast through the root's mailbox ring (RingStream): the root copies each chunk in, the
// others copy it out; the root's copies and the readers' run at the same time on different cores.
Status pipelinedBroadcast(Exec& ex, const Plan& plan, const void* in, uint8_t* out, size_t bytes, int root) {
  const int r = ex.rank();
  RingStream ring(ex, plan, bytes, 1, root);
  const auto* src = static_cast<const uint8_t*>(in);
  const bool stream = streamOut(ex, plan, bytes, r == root && in == out);
  for (size_t j = 0; j < std::max<size_t>(ring.steps(), 1); ++j) {
    ex.setPhase("broadcast", static_cast<int>(j), static_cast<int>(ring.steps()));
    FERRY_TRY(ring.advance(j, [&](size_t w, uint8_t* e) {
      std::memcpy(e, src + w * ring.chunk(), ring.len(w, bytes));
      if (src != out) copyOut(stream, out + w * ring.chunk(), e, ring.len(w, bytes));
    }));
    if (r == root || ring.steps() == 0) continue;
    auto e = ring.await(root, j);
    FERRY_TRY(e);
    copyOut(stream, out + j * ring.chunk(), *e, ring.len(j, bytes));
  }
  return Status::ok();
}

// All-gather through every rank's mailbox ring (RingStream): each rank copies its block in a
// chunk at a time, and its own block from there into its output while the chunk is cached; every
// rank copies the other blocks' chunks out. Plain buffers so cost two copies of which the second
// reads from the cache, where cma's one read is a system call at a fraction of the copy rate.
Status pipelinedAllGather(Exec& ex, const Plan& plan, const uint8_t* in, uint8_t* o, size_t block) {
  const int n = ex.size(), r = ex.rank();
  RingStream ring(ex, plan, block, 1, -1);
  const size_t k = ring.chunk();
  const bool inPlace = o + r * block == in;
  const bool stream = streamOut(ex, plan, block * n, inPlace);
  for (size_t j = 0; j < std::max<size_t>(ring.steps(), 1); ++j) {
    ex.setPhase("gather", static_cast<int>(j), static_cast<int>(ring.steps()));
    FERRY_TRY(ring.advance(j, [&](size_t w, uint8_t* e) {
      std::memcpy(e, in + w * k, ring.len(w, block));
      if (!inPlace) copyOut(stream, o + r * block + w * k, e, ring.len(w, block));
    }));
    for (int i = 1; i < n && ring.steps() > 0; ++i) {
      const int p = (r + i) % n;
      auto e = ring.await(p, j);
      FERRY_TRY(e);
      copyOut(stream, o + p * block + j * k, *e, ring.len(j, block));
    }
  }
  return Status::ok();
}

// All-to-all through every rank's mailbox ring (RingStream): an entry holds chunk w of each of
// the rank's n blocks, area p for rank p; its own block's chunk goes straight to its output. In
// place too: chunk j of every block is in the ring before the rank overwrites chunk j of its
// buffer.
Status pipelinedAllToAll(Exec& ex, const Plan& plan, const uint8_t* in, uint8_t* o, size_t block) {
  const int n = ex.size(), r = ex.rank();
  RingStream ring(ex, plan, block, static_cast<size_t>(n), -1);
  const size_t k = ring.chunk();
  const bool stream = streamOut(ex, plan, block * n, in == o);
  for (size_t j = 0; j < std::max<size_t>(ring.steps(), 1); ++j) {
    ex.setPhase("exchange", static_cast<int>(j), static_cast<int>(ring.steps()));
    FERRY_TRY(ring.advance(j, [&](size_t w, uint8_t* e) {
      for (int p = 0; p < n; ++p) {
        if (p != r) std::memcpy(e + p * k, in + p * block + w * k, ring.len(w, block));
      }
      if (in != o) copyOut(stream, o + r * block + w * k, in + r * block + w * k, ring.len(w, block));
    }));
    for (int i = 1; i < n && ring.steps() > 0; ++i) {
      const int p = (r + i) % n;
      auto e = ring.await(p, j);
      FERRY_TRY(e);
      copyOut(stream, o + p * block + j * k, *e + r * k, ring.len(j, block));
    }
  }
  return Status::ok();
}

// Reduce-scatter through every rank's mailbox ring (RingStream): an entry holds chunk w of each
// block the rank contributes to, area p for rank p; at step j the rank reduces chunk j of its own
// block from its input and every peer's area r straight into its output. Up to `ahead` chunks
// need a single hand-off (the entry barrier), where alternating halves took one per chunk. Buffers
// all in shared memory switch the ranks to direct/cma after the entry barrier. `exact`: the
// reproducible mode's reduction (reduceFromAll).
Status ringReduceScatter(Exec& ex, const Plan& plan, const void* in, uint8_t* out, size_t recvCount, DataType type,
                         RedOp op, ExactReduction* exact = nullptr) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), block = recvCount * es;
  const auto* i0 = static_cast<const uint8_t*>(in);
  RingStream ring(ex, plan, block, static_cast<size_t>(n), -1);
  const size_t k = ring.chunk();
  const bool stream = streamOut(ex, plan, block * n, out == i0 + r * block);
  for (size_t j = 0; j < std::max<size_t>(ring.steps(), 1); ++j) {
    ex.setPhase("reduce-scatter", static_cast<int>(j), static_cast<int>(ring.steps()));
    FERRY_TRY(ring.advance(j, [&](size_t w, uint8_t* e) {
      for (int p = 0; p < n; ++p) {
        if (p != r) std::memcpy(e + p * k, i0 + p * block + w * k, ring.len(w, block));
      }
    }));
    if (j == 0 && ring.shared() && ex.context().peerReads && block * n >= ex.context().sharedMinBytes) {
      return reduceScatterFromBuffers(ex, plan, in, out, recvCount, type, op, exact);
    }
    if (ring.steps() == 0) break;
    FERRY_TRY(ring.awaitAll(j));
    const uint8_t* local = i0 + r * block + j * k;
    FERRY_TRY(reduceFromAll(
        ex, plan,
        [&](int p) {
          return Source{p == r ? local : ring.entry(p, j) + r * k, 0};
        },
        out + j * k, ring.len(j, block) / es, type, op, stream, exact));
  }
  return Status::ok();
}

}  // namespace

Status arenaBarrier(Exec& ex) {
  announce(ex, Plan{Algorithm::kDirect, Protocol::kMailbox, 0}, nullptr, nullptr);
  return enter(ex);
}

// All-reduce.
//   oneshot/shm: copy the input to the own mailbox; after the entry barrier every rank reduces the
//     whole vector from all mailboxes. One barrier, n reads of the vector per rank: for small ones.
//     Up to lineBytes(), line slots instead of mailboxes: each rank's flag is in its data's lines.
//   twoshot/shm: mailbox = [input | reduced segments]. Rank r reduces segment r from every mailbox
//     into its output and its mailbox's second half, posts 2; then copies every other segment from
//     its owner's mailbox. Two barriers; needs 2 x bytes <= mailbox.
//   twoshot/cma: rank r reduces segment r reading every peer's input buffer (chunked, staged in
//     cache), posts 2; after everyone's 2 it reads every other segment from its owner's output
//     buffer; then the departure barrier.
Status arenaAllReduce(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, RedOp op) {
  const int r = ex.rank();
  const size_t es = dataTypeSize(type), bytes = count * es;
  auto* o = static_cast<uint8_t*>(out);
  announce(ex, plan, in, bytes, out, bytes);  // twoshot/cma reads both
  if (plan.algorithm == Algorithm::kTwoShot && plan.protocol == Protocol::kMailbox) {
    return pipelinedAllReduce(ex, plan, in, o, count, type, op);
  }
  if (plan.algorithm == Algorithm::kOneShot && plan.protocol == Protocol::kMailbox && bytes <= ex.lineBytes()) {
    // A few bytes: through line slots, each rank's data with its flag, waited on and read in
    // one go. Every rank reduces the same slots in the same order: the same result everywhere.
    FERRY_TRY(ex.publishLine(in, bytes));
    ex.setPhase("arrival", 0, 1);
    FERRY_TRY(ex.awaitLines());
    ex.setPhase("reduce", 0, 1);
    return reduceFromAll(
        ex, plan,
        [&](int p) {
          return Source{ex.lineData(p), 0};
        },
        o, count, type, op);
  }
  if (plan.protocol == Protocol::kMailbox) {
    FERRY_TRY(ex.claimMailbox());
    std::memcpy(ex.slot(r), in, bytes);
  }
  FERRY_TRY(enter(ex));
  if (plan.algorithm == Algorithm::kOneShot) {
    ex.setPhase("reduce", 0, 1);
    return reduceFromAll(
        ex, plan,
        [&](int p) {
          return Source{ex.slot(p), 0};
        },
        o, count, type, op);
  }
  return twoShotFromBuffers(ex, plan, in, o, count, type, op);
}

namespace {

// twoshot/cma after the entry barrier (also where pipelinedAllReduce finds every buffer shared).
Status twoShotFromBuffers(Exec& ex, const Plan& plan, const void* in, uint8_t* o, size_t count, DataType type, RedOp op,
                          ExactReduction* exact) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type);
  const size_t segB = segmentBegin(count, n, r), segN = segmentCount(count, n, r);
  const bool stream = streamOut(ex, plan, count * es, in == o);
  ex.setPhase("reduce-scatter", 0, 1);
  FERRY_TRY(reduceFromAll(
      ex, plan,
      [&](int p) {
        return p == r ? Source{static_cast<const uint8_t*>(in) + segB * es, 0}
                      : Source{nullptr, ex.peerAddr(p, 0) + segB * es};
      },
      o + segB * es, segN, type, op, stream, exact));
  ex.post(2);
  for (int i = 1; i < n; ++i) {
    int p = (r + i) % n;
    ex.setPhase("all-gather", i - 1, n - 1);
    FERRY_TRY(ex.await(p, 2));
    size_t b = segmentBegin(count, n, p), len = segmentCount(count, n, p);
    if (len > 0) FERRY_TRY(readInto(ex, p, ex.peerAddr(p, 1) + b * es, o + b * es, len * es, stream));
  }
  return leave(ex, 3);
}

// direct/cma reduce-scatter after the entry barrier (also where ringReduceScatter finds every
// buffer shared).
Status reduceScatterFromBuffers(Exec& ex, const Plan& plan, const void* in, void* out, size_t recvCount, DataType type,
                                RedOp op, ExactReduction* exact) {
  const int r = ex.rank();
  const size_t es = dataTypeSize(type), block = recvCount * es;
  ex.setPhase("reduce", 0, 1);
  const size_t at = static_cast<size_t>(r) * block;
  FERRY_TRY(reduceFromAll(
      ex, plan,
      [&](int p) {
        return p == r ? Source{static_cast<const uint8_t*>(in) + at, 0} : Source{nullptr, ex.peerAddr(p, 0) + at};
      },
      static_cast<uint8_t*>(out), recvCount, type, op,
      streamOut(ex, plan, block * static_cast<size_t>(ex.size()), out == static_cast<const uint8_t*>(in) + at), exact));
  return leave(ex, 2);
}

}  // namespace

// Reduce-scatter (block r of every rank's input, reduced, lands in rank r's output).
//   direct/shm: pipelined through the mailbox rings (ringReduceScatter); inputs of up to
//     lineBytes() through line slots, each rank reducing block r of every slot.
//   direct/cma: rank r reduces block r reading every peer's input buffer; departure barrier.
Status arenaReduceScatter(Exec& ex, const Plan& plan, const void* in, void* out, size_t recvCount, DataType type,
                          RedOp op) {
  const size_t block = recvCount * dataTypeSize(type);
  announce(ex, plan, in, block * static_cast<size_t>(ex.size()), out, 0);
  if (plan.protocol == Protocol::kMailbox && block * static_cast<size_t>(ex.size()) <= ex.lineBytes()) {
    FERRY_TRY(ex.publishLine(in, block * static_cast<size_t>(ex.size())));
    ex.setPhase("arrival", 0, 1);
    FERRY_TRY(ex.awaitLines());
    ex.setPhase("reduce", 0, 1);
    const size_t at = static_cast<size_t>(ex.rank()) * block;
    return reduceFromAll(
        ex, plan,
        [&](int p) {
          return Source{ex.lineData(p) + at, 0};
        },
        static_cast<uint8_t*>(out), recvCount, type, op);
  }
  if (plan.protocol == Protocol::kMailbox) {
    return ringReduceScatter(ex, plan, in, static_cast<uint8_t*>(out), recvCount, type, op);
  }
  FERRY_TRY(enter(ex));
  return reduceScatterFromBuffers(ex, plan, in, out, recvCount, type, op);
}

Status arenaReproducible(Exec& ex, const Plan& plan, const Call& call) {
  const bool scatter = call.kind == CallKind::kReduceScatter;
  ExactReduction exact{kernels::reproLanes(call.type, ex.size()), call.op == RedOp::kAvg,
                       std::vector<const void*>(static_cast<size_t>(ex.size()))};
  announce(ex, plan, call.send, call.recv);
  auto* out = static_cast<uint8_t*>(call.recv);
  if (scatter) return ringReduceScatter(ex, plan, call.send, out, call.count, call.type, call.op, &exact);
  return pipelinedAllReduce(ex, plan, call.send, out, call.count, call.type, call.op, &exact);
}

// All-gather: rank r's input becomes block r of every output.
//   direct/shm: blocks of up to lineBytes() go in line slots: no barrier, each block copied once
//     its flag is seen. Larger, pipelined through every rank's mailbox ring (pipelinedAllGather).
//   direct/cma: every rank reads each peer's input straight into its block; departure barrier.
Status arenaAllGather(Exec& ex, const Plan& plan, const void* in, void* out, size_t sendCount, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t block = sendCount * dataTypeSize(type);
  auto* o = static_cast<uint8_t*>(out);
  // Peers read `in`. In place it is this rank's block of the output, which callers reuse whole
  // (and whose other blocks are other ranks' inputs in the next in-place calls that shift it):
  // offered whole, once, it is prepared at once and never piece by piece.
  if (o + r * block == in) {
    ex.exposeForRead(out, block * static_cast<size_t>(n));
    announce(ex, plan, in, out);
  } else {
    announce(ex, plan, in, block, out, 0);
  }
  if (plan.protocol == Protocol::kMailbox && block <= ex.lineBytes()) {
    FERRY_TRY(ex.publishLine(in, block));
    if (o + r * block != in) std::memcpy(o + r * block, in, block);
    for (int i = 1; i < n; ++i) {
      int p = (r + i) % n;
      ex.setPhase("gather", i - 1, n - 1);
      auto data = ex.awaitLine(p);
      FERRY_TRY(data);
      std::memcpy(o + p * block, *data, block);
    }
    return Status::ok();
  }
  if (plan.protocol == Protocol::kMailbox)
    return pipelinedAllGather(ex, plan, static_cast<const uint8_t*>(in), o, block);
  FERRY_TRY(enter(ex));
  const bool stream = streamOut(ex, plan, block * n, o + r * block == in);
  if (o + r * block != in) copyOut(stream, o + r * block, in, block);
  for (int i = 1; i < n; ++i) {
    int p = (r + i) % n;
    ex.setPhase("gather", i - 1, n - 1);
    FERRY_TRY(readInto(ex, p, ex.peerAddr(p, 0), o + p * block, block, stream));
  }
  return leave(ex, 2);
}

// All-to-all: block j of rank i's input becomes block i of rank j's output.
//   direct/shm: inputs of up to lineBytes() go in line slots: no barrier. Larger, pipelined
//     through every rank's mailbox ring (pipelinedAllToAll).
//   direct/cma: every rank reads block r of each peer's input. In place (in == out), a chunk at
//     a time: the peers' chunks are read into scratch and copied over ours once everyone has read
//     that chunk of ours (a barrier per chunk); the own block stays put.
Status arenaAllToAll(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t block = count * dataTypeSize(type);
  auto* o = static_cast<uint8_t*>(out);
  const auto* i0 = static_cast<const uint8_t*>(in);
  announce(ex, plan, in, block * n, out, 0);
  if (plan.protocol == Protocol::kMailbox && block * n <= ex.lineBytes()) {
    // Every block from a line slot, this rank's own too: in place, the input is read only there.
    FERRY_TRY(ex.publishLine(in, block * n));
    for (int i = 1; i < n; ++i) {
      int p = (r + i) % n;
      ex.setPhase("exchange", i - 1, n - 1);
      auto data = ex.awaitLine(p);
      FERRY_TRY(data);
      std::memcpy(o + p * block, *data + r * block, block);
    }
    std::memcpy(o + r * block, ex.lineData(r) + r * block, block);
    return Status::ok();
  }
  if (plan.protocol == Protocol::kMailbox) return pipelinedAllToAll(ex, plan, i0, o, block);
  FERRY_TRY(enter(ex));
  const bool inPlace = in == out;
  // In place, a rank overwrites its input a chunk at a time, chunk j once every peer posted 2+j
  // (has read chunk j of it); so every rank, in place or not (each rank decides for itself), leaves
  // at the last chunk's phase, 1 + steps: after it no peer reads its input.
  const size_t kc = std::max<size_t>(std::min(block, std::max<size_t>(chunkElems(ex, plan, 1) / 64 * 64, 64)), 1);
  const size_t steps = (block + kc - 1) / kc;  // 0 for empty blocks: departure is then phase 1
  if (inPlace) {
    // This rank's own block stays where it is. The others move a chunk at a time: chunk j of
    // every peer's block for this rank goes into scratch (n-1 chunks: it stays in the cache),
    // and over chunk j of this rank's blocks once every peer has posted 2+j. Each byte crosses
    // memory once each way, as out of place.
    auto* tmp = static_cast<uint8_t*>(ex.context().scratch->get(kc * n));
    for (size_t j = 0; j < steps; ++j) {
      const size_t off = j * kc, len = std::min(kc, block - off);
      ex.setPhase("exchange", static_cast<int>(j), static_cast<int>(steps));
      for (int i = 1; i < n; ++i) {
        int p = (r + i) % n;
        FERRY_TRY(readInto(ex, p, ex.peerAddr(p, 0) + r * block + off, tmp + p * kc, len, false));
      }
      ex.post(2 + static_cast<int>(j));
      FERRY_TRY(ex.awaitAll(2 + static_cast<int>(j)));
      // Streaming stores whatever the plan's kind: every peer has just read these lines of ours
      // (the kernel copied them on its core), and a cached store would first fetch each one back.
      for (int p = 0; p < n; ++p) {
        if (p != r) kernels::copyStreaming(o + p * block + off, tmp + p * kc, len);
      }
    }
    return Status::ok();  // every peer passed the last chunk: none reads this buffer again
  }
  // Into the output directly: streaming stores where it is large.
  const bool stream = streamOut(ex, plan, block * n, false);
  copyOut(stream, o + r * block, i0 + r * block, block);
  for (int i = 1; i < n; ++i) {
    int p = (r + i) % n;
    ex.setPhase("exchange", i - 1, n - 1);
    FERRY_TRY(readInto(ex, p, ex.peerAddr(p, 0) + r * block, o + p * block, block, stream));
  }
  return leave(ex, 1 + static_cast<int>(steps));
}

// Broadcast: the root's buffer reaches every rank.
//   direct/shm: up to one chunk, the root fills its mailbox (a line slot up to lineBytes(), its
//     eager heap up to eagerMax()) and posts 1, the others copy it out when they see it: no
//     barrier; larger, pipelined through the root's mailbox after the entry barrier
//     (pipelinedBroadcast).
//   direct/cma: every other rank reads the root's buffer; they post 2 when done and the root
//     waits for all of them before returning.
Status arenaBroadcast(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t bytes = count * dataTypeSize(type);
  announce(ex, plan, r == root ? in : nullptr, r == root ? bytes : 0, out, 0);
  // Small enough for one mailbox half: filled before the entry barrier, read right after it.
  const bool single = plan.protocol == Protocol::kMailbox && bytes <= ex.context().arena->slotBytes() / 2 &&
                      bytes <= (plan.chunkBytes != 0 ? plan.chunkBytes : ex.context().chunkBytes);
  if (single) {
    // No barrier: the root only needs every peer past the call that last used the slot, the
    // others only need the root's data. Up to eagerMax() they go through the root's line slots
    // and eager heap, so the root may run many calls ahead of its slowest reader (as an eager
    // send would); the smallest carry their data in the line slot itself: data and flag
    // together, one wait and one read per reader.
    ex.setPhase("copy", 0, 1);
    const bool line = bytes <= ex.lineBytes();
    const bool eager = bytes <= ex.eagerMax();
    if (r == root) {
      if (line) {
        FERRY_TRY(ex.publishLine(in, bytes));
      } else if (eager) {
        FERRY_TRY(ex.publishEager(in, bytes));
      } else {
        FERRY_TRY(ex.claimMailbox());
        std::memcpy(ex.slot(r), in, bytes);
        ex.post(1);
      }
      if (in != out) std::memcpy(out, in, bytes);
      return Status::ok();
    }
    if (line || eager) {
      auto data = line ? ex.awaitLine(root) : ex.awaitEager(root, bytes);
      FERRY_TRY(data);
      std::memcpy(out, *data, bytes);
      return Status::ok();
    }
    FERRY_TRY(ex.await(root, 1));
    std::memcpy(out, ex.slot(root), bytes);
    return Status::ok();
  }
  if (plan.protocol == Protocol::kMailbox)
    return pipelinedBroadcast(ex, plan, in, static_cast<uint8_t*>(out), bytes, root);
  FERRY_TRY(enter(ex));
  ex.setPhase("copy", 0, 1);
  const bool stream = streamOut(ex, plan, bytes, r == root && in == out);
  if (r == root) {
    if (in != out) copyOut(stream, out, in, bytes);
    ex.setPhase("departure", 0, 1);
    for (int i = 1; i < n; ++i) FERRY_TRY(ex.await((r + i) % n, 2));
    return Status::ok();
  }
  FERRY_TRY(readInto(ex, root, ex.peerAddr(root, 0), static_cast<uint8_t*>(out), bytes, stream));
  ex.post(2);
  return Status::ok();
}

// Reduce to root.
//   oneshot/shm: every rank but the root copies its input to its mailbox (or, up to lineBytes(),
//     its line slot; up to eagerMax(), its eager heap) and returns; the root reduces them all.
// Otherwise rank r reduces segment r (as in all-reduce) and the root collects the segments.
//   direct/shm: inputs in the mailboxes, mailbox = [input | reduced segment]; the root copies
//     every segment once its owner posted 2.
//   direct/cma: segments reduced from peers' input buffers into the root's output (root) or the
//     scratch (others); after everyone's 2 the root reads the others' scratch and posts 3, which
//     the others wait for before reusing their scratch.
Status arenaReduce(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, RedOp op,
                   int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type);
  const size_t segB = segmentBegin(count, n, r), segN = segmentCount(count, n, r);
  if (plan.algorithm == Algorithm::kOneShot) {
    // Every rank leaves its input in its mailbox and goes on; the root waits for all and reduces
    // the whole vector. No rank but the root waits for anyone (the claim keeps the next writer
    // off a slot until the root has read it). Inputs up to eagerMax() go through the line slots
    // and eager heaps, so the others may run many calls ahead of the root, as eager sends would;
    // through the mailboxes they could run one call ahead.
    announce(ex, plan, in, out);
    const size_t bytes = count * es;
    if (bytes <= ex.eagerMax()) {
      // The others' inputs in line slots (a few bytes: data and flag together) or eager heaps; the
      // root reduces its own input with them.
      const bool line = bytes <= ex.lineBytes();
      if (r != root) return line ? ex.publishLine(in, bytes) : ex.publishEager(in, bytes);
      ex.post(1);
      ex.setPhase("arrival", 0, 1);
      FERRY_TRY(line ? ex.awaitLines() : ex.awaitEagers(bytes));
      ex.setPhase("reduce", 0, 1);
      return reduceFromAll(
          ex, plan,
          [&](int p) {
            if (p == r) return Source{static_cast<const uint8_t*>(in), 0};
            return Source{line ? ex.lineData(p) : ex.eagerData(p), 0};
          },
          static_cast<uint8_t*>(out), count, type, op);
    }
    auto slotOf = [&](int p) { return ex.slot(p); };
    FERRY_TRY(ex.claimMailbox());
    std::memcpy(slotOf(r), in, count * es);
    ex.post(1);
    if (r != root) return Status::ok();
    ex.setPhase("reduce", 0, 1);
    FERRY_TRY(ex.awaitAll(1));
    return reduceFromAll(
        ex, plan,
        [&](int p) {
          return Source{slotOf(p), 0};
        },
        static_cast<uint8_t*>(out), count, type, op);
  }
  if (plan.protocol == Protocol::kMailbox) {
    announce(ex, plan, in, count * es, out, 0);
    return pipelinedReduce(ex, plan, in, static_cast<uint8_t*>(out), count, type, op, root);
  }
  uint8_t* mine = nullptr;  // where this rank's reduced segment goes
  if (r == root) {
    mine = static_cast<uint8_t*>(out) + segB * es;
  } else {
    mine = static_cast<uint8_t*>(ex.context().scratch->get(std::max<size_t>(segN * es, 1)));
  }
  announce(ex, plan, in, count * es, mine, segN * es);
  FERRY_TRY(enter(ex));
  ex.setPhase("reduce", 0, 1);
  // The root's output, not read again here: streaming stores where it is large.
  const bool stream = r == root && streamOut(ex, plan, count * es, in == out);
  FERRY_TRY(reduceFromAll(
      ex, plan,
      [&](int p) {
        return p == r ? Source{static_cast<const uint8_t*>(in) + segB * es, 0}
                      : Source{nullptr, ex.peerAddr(p, 0) + segB * es};
      },
      mine, segN, type, op, stream));
  ex.post(2);
  if (r == root) {
    auto* o = static_cast<uint8_t*>(out);
    for (int i = 1; i < n; ++i) {
      int p = (r + i) % n;
      ex.setPhase("gather", i - 1, n - 1);
      FERRY_TRY(ex.await(p, 2));
      size_t b = segmentBegin(count, n, p), len = segmentCount(count, n, p);
      if (len > 0) FERRY_TRY(readInto(ex, p, ex.peerAddr(p, 1), o + b * es, len * es, stream));
    }
    ex.post(3);
    return Status::ok();
  }
  // Peers read our input until their 2; the root reads our scratch until its 3.
  FERRY_TRY(ex.awaitAll(2));
  ex.setPhase("departure", 0, 1);
  return ex.await(root, 3);
}

// Rows of the algorithm table (table.hpp), with the alpha-beta-gamma terms of cost_model.hpp. The
// mailbox rows copy through the senders' mailboxes (two copies); the cma rows read the owners'
// buffers in place (one copy, or none where the buffers are shared memory).
namespace {
bool onHost(const Pricing& p) { return p.arena; }
bool fitsMailbox(const Pricing& p) { return p.arena && p.B <= p.mailbox; }
bool readsInPlace(const Pricing& p) { return p.cma; }

Status allReduceRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaAllReduce(ex, plan, c.send, c.recv, c.count, c.type, c.op);
}
Status reduceScatterRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaReduceScatter(ex, plan, c.send, c.recv, c.count, c.type, c.op);
}
Status allGatherRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaAllGather(ex, plan, c.send, c.recv, c.count, c.type);
}
Status allToAllRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaAllToAll(ex, plan, c.send, c.recv, c.count, c.type);
}
Status broadcastRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaBroadcast(ex, plan, c.send, c.recv, c.count, c.type, c.root);
}
Status reduceRun(Exec& ex, const Plan& plan, const Call& c) {
  return arenaReduce(ex, plan, c.send, c.recv, c.count, c.type, c.op, c.root);
}
}  // namespace

// All-reduce. One-shot: one hand-off, every rank reduces the whole vector. Two-shot: each rank
// reduces its segment E = B / n, pipelined in chunk steps through the mailboxes (two hand-offs per
// step), or read in place.
extern const AlgorithmRow kOneShotAllReduce{CallKind::kAllReduce,
                                            Algorithm::kOneShot,
                                            Protocol::kMailbox,
                                            fitsMailbox,
                                            [](const Pricing& p) {
                                              return p.S + p.f * (p.B * p.c + (p.n - 1) * p.red(p.B));
                                            },
                                            allReduceRun};
extern const AlgorithmRow kTwoShotMailboxAllReduce{CallKind::kAllReduce,
                                                   Algorithm::kTwoShot,
                                                   Protocol::kMailbox,
                                                   onHost,
                                                   [](const Pricing& p) {
                                                     const double E = p.B / p.n;
                                                     return 2 * p.pipeSteps(E) * p.S +
                                                            p.f * ((p.n - 1) * E * p.c + (p.n - 1) * p.red(E) +
                                                                   E * p.c + (p.n - 1) * E * p.c);
                                                   },
                                                   allReduceRun};
extern const AlgorithmRow kTwoShotCmaAllReduce{CallKind::kAllReduce,
                                               Algorithm::kTwoShot,
                                               Protocol::kCma,
                                               readsInPlace,
                                               [](const Pricing& p) {
                                                 const double E = p.B / p.n;
                                                 return 3 * p.S +
                                                        p.f * ((p.n - 1) * p.peerOperand(E) + (p.n - 1) * p.red(E) +
                                                               (p.n - 1) * p.peerRead(E));
                                               },
                                               allReduceRun};

// Reduce-scatter: rank r reduces block r from every rank's input.
extern const AlgorithmRow kDirectMailboxReduceScatter{CallKind::kReduceScatter,
                                                      Algorithm::kDirect,
                                                      Protocol::kMailbox,
                                                      onHost,
                                                      [](const Pricing& p) {
                                                        return p.pipeSteps(p.B) * p.S +
                                                               p.f * ((p.n - 1) * p.B * p.c + (p.n - 1) * p.red(p.B));
                                                      },
                                                      reduceScatterRun};
extern const AlgorithmRow kDirectCmaReduceScatter{CallKind::kReduceScatter,
                                                  Algorithm::kDirect,
                                                  Protocol::kCma,
                                                  readsInPlace,
                                                  [](const Pricing& p) {
                                                    return 2 * p.S + p.f * ((p.n - 1) * p.peerOperand(p.B) +
                                                                            (p.n - 1) * p.red(p.B));
                                                  },
                                                  reduceScatterRun};

// All-gather: every rank copies every block, through the mailbox rings or read in place. Through
// the rings each copy has one side in the cache (in: the input from memory into a cached entry;
// out: a cached entry into memory), so each costs about half a copy through memory.
extern const AlgorithmRow kDirectMailboxAllGather{CallKind::kAllGather,
                                                  Algorithm::kDirect,
                                                  Protocol::kMailbox,
                                                  onHost,
                                                  [](const Pricing& p) {
                                                    return p.pipeSteps(p.B) * p.S + p.f * (p.n + 1) * p.B * p.c / 2;
                                                  },
                                                  allGatherRun};
extern const AlgorithmRow kDirectCmaAllGather{CallKind::kAllGather,
                                              Algorithm::kDirect,
                                              Protocol::kCma,
                                              readsInPlace,
                                              [](const Pricing& p) {
                                                return 2 * p.S + p.f * ((p.n - 1) * p.peerRead(p.B));
                                              },
                                              allGatherRun};

// All-to-all: every rank's n blocks pass once, through the mailbox rings (each copy with one side
// in the cache, as all-gather's) or read in place.
extern const AlgorithmRow kDirectMailboxAllToAll{CallKind::kAllToAll,
                                                 Algorithm::kDirect,
                                                 Protocol::kMailbox,
                                                 onHost,
                                                 [](const Pricing& p) {
                                                   return p.pipeSteps(p.n * p.B) * p.S + p.f * p.n * p.B * p.c;
                                                 },
                                                 allToAllRun};
extern const AlgorithmRow kDirectCmaAllToAll{CallKind::kAllToAll,
                                             Algorithm::kDirect,
                                             Protocol::kCma,
                                             readsInPlace,
                                             [](const Pricing& p) {
                                               return 2 * p.S + p.f * ((p.n - 1) * p.peerRead(p.B) + p.B * p.c);
                                             },
                                             allToAllRun};

// Broadcast through the root's mailbox. Up to one chunk the root leaves the data there and
// returns: one hand-off, and a stream of small broadcasts flows. Larger: the entry barrier, then
// chunk steps through the root's mailbox ring, the root's copies overlapping the readers'; all ranks
// together copy n + 1 times, shared by the cores.
extern const AlgorithmRow kDirectMailboxBroadcast{
    CallKind::kBroadcast,
    Algorithm::kDirect,
    Protocol::kMailbox,
    onHost,
    [](const Pricing& p) {
      const double kb = static_cast<double>(std::min(static_cast<size_t>(p.chunk()), p.in.mailboxBytes / 2));
      const double work = std::max(2.0, (p.n + 1) / std::min<double>(p.n, p.in.model.cores));
      const double steps = std::max(1.0, std::ceil(p.B / kb));
      return p.B <= kb ? p.S + p.f * (p.copy(p.B) + p.B * p.c)
                       : (1 + steps * (p.over ? 1 : 0.5)) * p.S + work * p.B * p.c + kb * p.c;
    },
    broadcastRun};
// Single-copy reads of the root's buffer; the root waits until every reader is done. Readers of
// one process's pages contend in the kernel, so their reads add up; mapped, they copy in parallel
// on their own cores (docs/PERFORMANCE.md, "Evidence behind the tuner's formulas").
extern const AlgorithmRow kDirectCmaBroadcast{CallKind::kBroadcast,
                                              Algorithm::kDirect,
                                              Protocol::kCma,
                                              readsInPlace,
                                              [](const Pricing& p) {
                                                return p.shared
                                                           ? 2 * p.S + (p.n - 1) /
                                                                           std::min<double>(p.n - 1, p.in.model.cores) *
                                                                           p.B * p.c
                                                           : 2 * p.S + (p.n - 1) * p.cmaRead(p.B);
                                              },
                                              broadcastRun};

// Reduce. One-shot: every rank drops its input in its mailbox; only the root waits, then reduces
// all. Direct: rank r reduces segment r, the root gathers the segments (from the others' scratch,
// never shared: read across processes with cma).
extern const AlgorithmRow kOneShotReduce{CallKind::kReduce,
                                         Algorithm::kOneShot,
                                         Protocol::kMailbox,
                                         fitsMailbox,
                                         [](const Pricing& p) {
                                           return p.S + p.B * p.c + p.f * (p.n - 1) * p.red(p.B);
                                         },
                                         reduceRun};
extern const AlgorithmRow kDirectMailboxReduce{CallKind::kReduce,
                                               Algorithm::kDirect,
                                               Protocol::kMailbox,
                                               onHost,
                                               [](const Pricing& p) {
                                                 const double E = p.B / p.n;
                                                 return 2 * p.pipeSteps(E) * p.S +
                                                        p.f * ((p.n - 1) * E * p.c + (p.n - 1) * p.red(E)) +
                                                        (p.n - 1) * E * p.c;
                                               },
                                               reduceRun};
extern const AlgorithmRow kDirectCmaReduce{CallKind::kReduce,
                                           Algorithm::kDirect,
                                           Protocol::kCma,
                                           readsInPlace,
                                           [](const Pricing& p) {
                                             const double E = p.B / p.n;
                                             return 3 * p.S +
                                                    p.f * ((p.n - 1) * p.peerOperand(E) + (p.n - 1) * p.red(E)) +
                                                    (p.n - 1) * p.cmaRead(E);
                                           },
                                           reduceRun};

extern const AlgorithmRow kArenaBarrier{CallKind::kBarrier,
                                        Algorithm::kDirect,
                                        Protocol::kMailbox,
                                        onHost,
                                        [](const Pricing&) { return 0.0; },
                                        [](Exec& ex, const Plan&, const Call&) { return arenaBarrier(ex); }};

}  // namespace ferry::coll
