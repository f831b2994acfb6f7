// The reproducible mode's steps (reproducible.hpp).
#include "collectives/reproducible.hpp"

#include <algorithm>

#include "kernels/host/reproducible.hpp"

namespace ferry::coll {
namespace {

// Elements per rank below which an all-reduce takes the integer form: two small collectives over
// codes and lanes cost less there than an all-to-all and an all-gather. The pipelined form keeps
// the threshold (below it, it has not been measured against the integer form).
constexpr size_t kMinExchangedBlock = 256;

// Bytes of every rank's values of one piece of an exchanged all-reduce: small enough that the
// all-to-all's output is still in the cache when the reduction reads it, large enough that the
// two collectives' fixed costs stay small (docs/PERFORMANCE.md, "Reproducible mode").
constexpr size_t kPieceBytes = size_t{1} << 20;

// `bytes` of 8-byte-aligned storage in v.
void* storage(std::vector<uint64_t>& v, size_t bytes) {
  const size_t words = (bytes + 7) / 8;
  if (v.size() < words) v.resize(words);
  return v.data();
}

// The integer form: codes agreed by a max all-reduce, lanes summed by the call's own collective
// over integers, the receivers' sums rounded once.
Status runIntegers(const Call& call, int rank, int ranks, ReproScratch& scratch,
                   const std::function<Status(const Call&)>& inner) {
  // Reduce-scatter: every rank contributes to every block, so codes and lanes cover all of them.
  const bool scatter = call.kind == CallKind::kReduceScatter;
  const size_t total = scatter ? call.count * static_cast<size_t>(ranks) : call.count;
  const DataType codeType = kernels::reproCodeType(call.type);
  const kernels::ReproLanes lanes = kernels::reproLanes(call.type, ranks);
  const DataType laneType = lanes.bits == 32 ? DataType::kInt32 : DataType::kInt64;
  const size_t codeSize = dataTypeSize(codeType), laneSize = dataTypeSize(laneType);
  auto* codes = static_cast<uint8_t*>(storage(scratch.codes, total * codeSize));
  auto* ints = static_cast<uint8_t*>(storage(scratch.lanes, total * laneSize));

  // 1. The largest code of each element on any rank.
  kernels::reproCodes(call.type, call.send, total, codes);
  FERRY_TRY(inner(Call::allReduce(codes, codes, total, codeType, RedOp::kMax)));
  // 2. The integers, summed.
  kernels::reproToLanes(call.type, lanes, call.send, codes, total, ints);
  const size_t mine = scatter ? static_cast<size_t>(rank) * call.count : 0;
  switch (call.kind) {
    case CallKind::kAllReduce: FERRY_TRY(inner(Call::allReduce(ints, ints, total, laneType, RedOp::kSum))); break;
    case CallKind::kReduceScatter:
      FERRY_TRY(inner(Call::reduceScatter(ints, ints + mine * laneSize, call.count, laneType, RedOp::kSum)));
      break;
    default:
      FERRY_TRY(inner(Call::reduce(ints, ints, total, laneType, RedOp::kSum, call.root)));
      if (rank != call.root) return Status::ok();
  }
  // 3. One rounding per result element.
  kernels::reproFromLanes(call.type, lanes, ints + mine * laneSize, codes + mine * codeSize, call.count, ranks,
                          call.op == RedOp::kAvg, call.recv);
  return Status::ok();
}

// The exchanged form of all-reduce and reduce-scatter over `block` elements per rank: an all-to-all
// hands each rank every rank's values of its block, the rank reduces them exactly on its own
// (kernels::reproReduceRows gives the integer form's bits), and an all-reduce's ranks gather the
// rounded blocks. Values cross as they are, so it moves what the default mode's reduce-scatter and
// all-gather move, with no codes and no wider lanes.
Status runExchanged(const Call& call, int rank, int ranks, size_t block, ReproScratch& scratch,
                    const std::function<Status(const Call&)>& inner) {
  const size_t size = dataTypeSize(call.type);
  const kernels::ReproLanes lanes = kernels::reproLanes(call.type, ranks);
  void* values = storage(scratch.values, block * static_cast<size_t>(ranks) * size);
  FERRY_TRY(inner(Call::allToAll(call.send, values, block, call.type)));
  const bool scatter = call.kind == CallKind::kReduceScatter;
  auto* mine = static_cast<uint8_t*>(call.recv) + (scatter ? 0 : static_cast<size_t>(rank) * block * size);
  kernels::reproReduceRows(call.type, lanes, values, block, ranks, block, call.op == RedOp::kAvg, mine);
  if (scatter) return Status::ok();
  return inner(Call::allGather(mine, call.recv, block, call.type));
}

}  // namespace

bool reproducibleApplies(const Call& call) {
  const bool kind =
      call.kind == CallKind::kAllReduce || call.kind == CallKind::kReduceScatter || call.kind == CallKind::kReduce;
  return kind && call.count > 0 && (call.op == RedOp::kSum || call.op == RedOp::kAvg) &&
         kernels::reproSupports(call.type);
}

Status runReproducible(const Call& call, int rank, int ranks, ReproScratch& scratch,
                       const std::function<Status(const Call&)>& inner,
                       const std::function<Status(const Call&)>& pipelined) {
  const size_t n = static_cast<size_t>(ranks), size = dataTypeSize(call.type);
  // The pipelined or the exchanged form (both move the values), else the integer form.
  const bool values = call.kind == CallKind::kReduceScatter ||
                      (call.kind == CallKind::kAllReduce && call.count >= n * kMinExchangedBlock);
  if (values && pipelined) return pipelined(call);
  if (call.kind == CallKind::kReduceScatter) return runExchanged(call, rank, ranks, call.count, scratch, inner);
  if (!values) return runIntegers(call, rank, ranks, scratch, inner);
  // The call's elements from `done` on.
  auto from = [&](size_t done) {
    Call part = call;
    part.send = static_cast<const uint8_t*>(call.send) + done * size;
    part.recv = static_cast<uint8_t*>(call.recv) + done * size;
    part.count = call.count - done;
    return part;
  };
  // Pieces of b elements per rank, each an all-reduce of its own.
  const size_t pieceBlock = std::max(kPieceBytes / (n * size), kMinExchangedBlock);
  size_t done = 0;
  while (call.count - done >= n * kMinExchangedBlock) {
    const size_t b = std::min(pieceBlock, (call.count - done) / n);
    FERRY_TRY(runExchanged(from(done), rank, ranks, b, scratch, inner));
    done += b * n;
  }
  // The elements left over (fewer than ranks * kMinExchangedBlock) through the integer form.
  return done == call.count ? Status::ok() : runIntegers(from(done), rank, ranks, scratch, inner);
}

}  // namespace ferry::coll
