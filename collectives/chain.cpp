// Pipelined chain broadcast and reduce.
//
// The ranks form a chain in ring order starting after (reduce) or at (broadcast) the root. The
// message is cut into slices and each rank forwards slice k as soon as it has it, so after the
// first slice fills the chain every link carries data at once: time ≈ (n - 2 + slices) slice
// transfers, close to one full message transfer for large messages.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/pipeline.hpp"
#include "collectives/ring_math.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::coll {

Status chainBroadcast(Exec& ex, const void* in, void* out, size_t count, DataType type, int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  const int pos = chainPosition(r, n, root);
  if (pos == 0 && out != in && count > 0) std::memmove(out, in, count * es);
  if (n == 1 || count == 0) return Status::ok();
  const int prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  ex.setPhase("broadcast", pos, n - 1);
  // Over messages alone the root learns from the last rank's acknowledgement that every rank
  // took it for the root (Context::acks); on one host the call log tells (Exec::finish). The
  // guard goes before the data (Context::kEagerAckBytes).
  const bool ack = ex.context().arena == nullptr;
  if (pos == 0) {
    if (ack) FERRY_TRY(ex.expectAck(prev, count * es));
    FERRY_TRY(sendSlices(ex, next, static_cast<const uint8_t*>(in), count, type));
    return ex.waitAll();
  }
  std::vector<CopyTask> tasks;
  auto* o = static_cast<uint8_t*>(out);
  for (size_t k = 0, ks = sliceCount(count, se); k < ks; ++k) {
    tasks.push_back({o + sliceBegin(k, se) * es, sliceLength(count, k, se), pos < n - 1, pos - 1});
  }
  FERRY_TRY(recvForward(ex, prev, next, tasks, type, "broadcast", n - 1));
  if (ack && pos == n - 1) FERRY_TRY(ex.oweAck(next, count * es));
  return ex.waitAll();
}

Status chainReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op, int root) {
  const int n = ex.size(), r = ex.rank();
  const size_t es = dataTypeSize(type), se = sliceElems(ex, type);
  if (n == 1 || count == 0) {
    if (r == root && out != in && count > 0) std::memmove(out, in, count * es);
    return Status::ok();
  }
  const int pos = ringMod(r - root - 1, n);  // root+1 starts the chain, root ends it
  const int prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  const auto* src = static_cast<const uint8_t*>(in);
  ex.setPhase("reduce", pos, n - 1);
  // Over messages alone the root acknowledges the call to the head of the chain (see
  // chainBroadcast), before its receives: two ranks that each take themselves for the root of a
  // large reduce then receive each other's acknowledgement in place of data.
  const bool ack = ex.context().arena == nullptr;
  if (pos == 0) {
    if (ack) FERRY_TRY(ex.expectAck(prev, count * es));
    FERRY_TRY(sendSlices(ex, next, src, count, type));
    return ex.waitAll();
  }
  const bool isRoot = pos == n - 1;
  if (ack && isRoot) FERRY_TRY(ex.oweAck(next, count * es));
  uint8_t* dst = static_cast<uint8_t*>(out);
  if (!isRoot) {
    dst = static_cast<uint8_t*>(ex.context().scratch->get(count * es));
    if (dst == nullptr)
      return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", count * es);
  }
  std::vector<ReduceTask> tasks;
  for (size_t k = 0, ks = sliceCount(count, se); k < ks; ++k) {
    size_t off = sliceBegin(k, se) * es;
    tasks.push_back({src + off, dst + off, sliceLength(count, k, se), !isRoot, isRoot, pos - 1});
  }
  FERRY_TRY(recvReduceForward(ex, prev, next, tasks, type, op, static_cast<uint32_t>(n), "reduce", n - 1));
  return ex.waitAll();
}

// Rows of the algorithm table (table.hpp): priced over messages between hosts only (one host has
// the arena's rows).
extern const AlgorithmRow kChainBroadcast{CallKind::kBroadcast,
                                          Algorithm::kChain,
                                          Protocol::kMessages,
                                          [](const Pricing&) { return true; },
                                          [](const Pricing& p) {
                                            return p.arena ? kUnmodelled : p.flat(p.chain(p.n, p.B));
                                          },
                                          [](Exec& ex, const Plan&, const Call& c) {
                                            return chainBroadcast(ex, c.send, c.recv, c.count, c.type, c.root);
                                          }};

extern const AlgorithmRow kChainReduce{CallKind::kReduce,
                                       Algorithm::kChain,
                                       Protocol::kMessages,
                                       [](const Pricing&) { return true; },
                                       [](const Pricing& p) {
                                         return p.arena ? kUnmodelled : p.flat(p.chain(p.n, p.B));
                                       },
                                       [](Exec& ex, const Plan&, const Call& c) {
                                         return chainReduce(ex, c.send, c.recv, c.count, c.type, c.op, c.root);
                                       }};

}  // namespace ferry::coll
