// Bruck all-gather: ceil(log2 n) exchanges instead of the ring's n - 1, for latency-bound calls
// between hosts.
//
// Vocabulary: a work buffer of n blocks in scratch, where block b holds rank (r + b) mod n's data.
// It starts with this rank's own block at 0. Step k (distance d = 2^k): send the first min(d, n - d)
// blocks to rank r - d and receive as many from rank r + d into blocks d onwards; after the last
// step every block is filled, and block b is copied to the output's slot (r + b) mod n. Every block
// crosses the network once per rank that needs it ((n - 1) x the block in all, as the ring), in
// log2(n) messages per rank instead of n - 1, at the price of one more copy of the whole output.
//
// Bruck all-to-all: the same log2(n) exchanges for blocks that each go to one rank. Rotate: work
// block i holds this rank's block for rank (r + i) mod n, so block i has i hops to go. Step k
// (distance d = 2^k): every block whose index has bit k set moves d ranks on (packed into one
// message to rank r + d; the same indices arrive from rank r - d and take their places). After
// the last step work block i came from rank (r - i) mod n, and goes to that rank's output slot.
// Each step sends about half the blocks: (n/2) log2(n) blocks per rank against pairwise's n - 1,
// in log2(n) messages instead of n - 1: for small blocks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"

namespace ferry::coll {

Status bruckAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t block = sendCount * dataTypeSize(type);
  auto* o = static_cast<uint8_t*>(out);
  if (block == 0) return Status::ok();
  if (n == 1) {
    if (o != in) std::memmove(o, in, block);
    return Status::ok();
  }
  auto* work = static_cast<uint8_t*>(ex.context().scratch->get(block * static_cast<size_t>(n)));
  if (work == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory",
                     block * static_cast<size_t>(n));
  }
  std::memcpy(work, in, block);  // in may be this rank's slot of out (in place)
  int steps = 0;
  for (int d = 1; d < n; d <<= 1) ++steps;
  int k = 0;
  for (int d = 1; d < n; d <<= 1, ++k) {
    ex.setPhase("bruck all-gather", k, steps);
    const size_t blocks = static_cast<size_t>(std::min(d, n - d));
    auto rv = ex.recv((r + d) % n, work + static_cast<size_t>(d) * block, blocks * block);
    FERRY_TRY(rv);
    auto s = ex.send((r - d + n) % n, work, blocks * block);
    FERRY_TRY(s);
    FERRY_TRY(ex.wait(*rv));
    FERRY_TRY(ex.wait(*s));
  }
  for (int b = 0; b < n; ++b) {
    std::memcpy(o + static_cast<size_t>((r + b) % n) * block, work + static_cast<size_t>(b) * block, block);
  }
  return Status::ok();
}

Status bruckAllToAll(Exec& ex, const void* in, void* out, size_t count, DataType type) {
  const int n = ex.size(), r = ex.rank();
  const size_t block = count * dataTypeSize(type), nb = static_cast<size_t>(n);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* o = static_cast<uint8_t*>(out);
  if (block == 0) return Status::ok();
  if (n == 1) {
    if (o != src) std::memmove(o, src, block);
    return Status::ok();
  }
  const size_t half = (nb + 1) / 2;  // most blocks with one bit set
  auto* work = static_cast<uint8_t*>(ex.context().scratch->get(block * (nb + 2 * half)));
  if (work == nullptr) {
    return makeError(ErrorCode::kSystemError, "cannot allocate %zu bytes of scratch memory", block * (nb + 2 * half));
  }
  uint8_t* packed = work + block * nb;
  uint8_t* arrived = packed + block * half;
  for (size_t i = 0; i < nb; ++i) std::memcpy(work + i * block, src + ((r + i) % nb) * block, block);
  int steps = 0;
  for (int d = 1; d < n; d <<= 1) ++steps;
  int k = 0;
  for (int d = 1; d < n; d <<= 1, ++k) {
    ex.setPhase("bruck all-to-all", k, steps);
    size_t moved = 0;
    for (size_t i = 0; i < nb; ++i) {
      if ((i & static_cast<size_t>(d)) != 0) std::memcpy(packed + moved++ * block, work + i * block, block);
    }
    auto rv = ex.recv((r - d + n) % n, arrived, moved * block);
    FERRY_TRY(rv);
    auto s = ex.send((r + d) % n, packed, moved * block);
    FERRY_TRY(s);
    FERRY_TRY(ex.wait(*rv));
    FERRY_TRY(ex.wait(*s));
    moved = 0;
    for (size_t i = 0; i < nb; ++i) {
      if ((i & static_cast<size_t>(d)) != 0) std::memcpy(work + i * block, arrived + moved++ * block, block);
    }
  }
  for (size_t i = 0; i < nb; ++i) std::memcpy(o + ((r + nb - i) % nb) * block, work + i * block, block);
  return Status::ok();
}

// Rows of the algorithm table (table.hpp): priced over a measured network only (one host has the
// arena's rows); the rotation into the output is one copy of it at the host's memcpy rate (rank 0's
// model, else the intra-host level's).
extern const AlgorithmRow kBruckAllGather{
    CallKind::kAllGather,
    Algorithm::kBruck,
    Protocol::kMessages,
    [](const Pricing&) { return true; },
    [](const Pricing& p) {
      if (p.arena || !p.modelled) return kUnmodelled;
      const double copy = p.n * p.B * (p.in.model.copyBw > 0 ? 1.0 / p.in.model.copyBw : p.localCopy);
      return std::ceil(std::log2(p.n)) * p.in.net.alpha + (p.n - 1) * p.B * p.in.net.beta + copy;
    },
    [](Exec& ex, const Plan&, const Call& c) { return bruckAllGather(ex, c.send, c.recv, c.count, c.type); }};

extern const AlgorithmRow kBruckAllToAll{CallKind::kAllToAll,
                                         Algorithm::kBruck,
                                         Protocol::kMessages,
                                         [](const Pricing&) { return true; },
                                         [](const Pricing& p) {
                                           return !p.arena && p.modelled ? p.bruckAllToAll(p.n, p.B) : kUnmodelled;
                                         },
                                         [](Exec& ex, const Plan&, const Call& c) {
                                           return bruckAllToAll(ex, c.send, c.recv, c.count, c.type);
                                         }};

}  // namespace ferry::coll
