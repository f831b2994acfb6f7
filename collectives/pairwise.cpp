// All-to-all, barrier and point-to-point.
//
// Pairwise all-to-all: at step i (1..n-1) rank r sends its block for rank r+i and receives the
// block of rank r-i, so every rank talks to one peer per step and no receiver is flooded. All
// steps are posted at once in that order; the transport's ordering keeps the pairs in step.
// Dissemination barrier: in round k rank r signals r + 2^k and waits for r - 2^k; after
// ceil(log2 n) rounds every rank has transitively heard from every other.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/ring_math.hpp"

namespace ferry::coll {

Status pairwiseAllToAll(Exec& ex, const void* in, void* out, size_t count, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t block = count * dataTypeSize(type);
  if (block == 0) return Status::ok();
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (in == out && n > 1) {
    // In place: the outgoing blocks must survive the incoming ones.
    auto* copy = static_cast<uint8_t*>(ex.context().scratch->get(block * n));
    if (copy == nullptr)
      return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", block * n);
    std::memcpy(copy, in, block * n);
    src = copy;
  }
  if (dst + block * r != src + block * r) std::memmove(dst + block * r, src + block * r, block);
  ex.setPhase("all-to-all", 0, 1);
  for (int i = 1; i < n; ++i) {
    int from = ringMod(r - i, n);
    FERRY_TRY(ex.recv(from, dst + block * from, block));
  }
  for (int i = 1; i < n; ++i) {
    int to = ringMod(r + i, n);
    FERRY_TRY(ex.send(to, src + block * to, block));
  }
  return ex.waitAll();
}

Status ringPresence(Exec& ex) {
  const int n = ex.size(), r = ex.rank();
  if (n == 1) return Status::ok();
  ex.setPhase("empty-call check", 0, 1);
  auto rv = ex.recv(ringMod(r - 1, n), nullptr, 0);
  FERRY_TRY(rv);
  auto sd = ex.send(ringMod(r + 1, n), nullptr, 0);
  FERRY_TRY(sd);
  FERRY_TRY(ex.wait(*rv));
  return ex.wait(*sd);
}

Status disseminationBarrier(Exec& ex) {
  const int n = ex.size(), r = ex.rank();
  int rounds = 0;
  for (int k = 1; k < n; k <<= 1) ++rounds;
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    ex.setPhase("barrier", round, rounds);
    auto rv = ex.recv(ringMod(r - k, n), nullptr, 0);
    FERRY_TRY(rv);
    auto sd = ex.send(ringMod(r + k, n), nullptr, 0);
    FERRY_TRY(sd);
    FERRY_TRY(ex.wait(*rv));
    FERRY_TRY(ex.wait(*sd));
  }
  return Status::ok();
}

Status batchSendRecv(Exec& ex, const std::vector<P2pItem>& items) {
  std::vector<const P2pItem*> selfSends, selfRecvs;
  ex.setPhase("send/recv batch", 0, 1);
  for (const P2pItem& it : items) {
    if (it.peer == ex.rank()) {
      (it.isSend ? selfSends : selfRecvs).push_back(&it);
    } else if (it.isSend) {
      FERRY_TRY(ex.send(it.peer, it.buf, it.bytes, &it.desc));
    } else {
      FERRY_TRY(ex.recv(it.peer, it.buf, it.bytes, &it.desc));
    }
  }
  if (selfSends.size() != selfRecvs.size()) {
    return makeError(ErrorCode::kInvalidArgument, "rank %d sends %zu transfers to itself but receives %zu", ex.rank(),
                     selfSends.size(), selfRecvs.size());
  }
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes) {
      return makeError(ErrorCode::kInvalidArgument,
                       "rank %d's transfer #%zu to itself sends %zu bytes but the matching receive expects %zu",
                       ex.rank(), i, selfSends[i]->bytes, selfRecvs[i]->bytes);
    }
    if (selfSends[i]->bytes > 0 && selfRecvs[i]->buf != selfSends[i]->buf) {
      std::memmove(selfRecvs[i]->buf, selfSends[i]->buf, selfSends[i]->bytes);
    }
  }
  return ex.waitAll();
}

Status sendTo(Exec& ex, const void* buf, size_t bytes, int peer) {
  auto r = ex.send(peer, buf, bytes);
  FERRY_TRY(r);
  return ex.wait(*r);
}

Status recvFrom(Exec& ex, void* buf, size_t bytes, int peer) {
  auto r = ex.recv(peer, buf, bytes);
  FERRY_TRY(r);
  return ex.wait(*r);
}

// Rows of the algorithm table (table.hpp).
// All-to-all: of a host's L ranks each sends n - L blocks, `share` of them through one host link.
extern const AlgorithmRow kPairwiseAllToAll{
    CallKind::kAllToAll,
    Algorithm::kPairwise,
    Protocol::kMessages,
    [](const Pricing&) { return true; },
    [](const Pricing& p) {
      return p.arena ? kUnmodelled : p.flat((p.n - 1) * p.in.net.alpha + p.share * (p.n - p.L) * p.B * p.in.net.beta);
    },
    [](Exec& ex, const Plan&, const Call& c) { return pairwiseAllToAll(ex, c.send, c.recv, c.count, c.type); }};

extern const AlgorithmRow kDisseminationBarrier{CallKind::kBarrier,
                                                Algorithm::kPairwise,
                                                Protocol::kMessages,
                                                [](const Pricing& p) { return !p.arena; },
                                                [](const Pricing&) { return 0.0; },
                                                [](Exec& ex, const Plan&, const Call&) {
                                                  return disseminationBarrier(ex);
                                                }};

extern const AlgorithmRow kRingPresence{CallKind::kBarrier,
                                        Algorithm::kPairwise,
                                        Protocol::kMessages,
                                        [](const Pricing& p) { return !p.arena; },
                                        [](const Pricing&) { return 0.0; },
                                        [](Exec& ex, const Plan&, const Call&) { return ringPresence(ex); }};

}  // namespace ferry::coll
