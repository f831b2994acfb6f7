// Bruck all-gather: ceil(log2 n) exchanges instead of the ring's n - 1, for latency-bound calls
// between hosts.
//
// Vocabulary: a work buffer of n blocks in scratch, where block b holds rank (r + b) mod n's data.
// It starts with this rank's own block at 0. Step k (distance d = 2^k): send the first min(d, n - d)
// blocks to rank r - d and receive as many from rank r + d into blocks d onwards; after the last
// step every block is filled, and block b is copied to the output's slot (r + b) mod n. Every block
// crosses the network once per rank that needs it ((n - 1) x the block in all, as the ring), in
// log2(n) messages per rank instead of n - 1, at the price of one more copy of the whole output.
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

// Row of the algorithm table (table.hpp): priced over a measured network only (one host has the
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

}  // namespace ferry::coll
