// The reproducible mode's three steps (reproducible.hpp).
#include "collectives/reproducible.hpp"

#include "kernels/host/reproducible.hpp"

namespace ferry::coll {
namespace {

// `bytes` of 8-byte-aligned storage in v.
void* storage(std::vector<uint64_t>& v, size_t bytes) {
  const size_t words = (bytes + 7) / 8;
  if (v.size() < words) v.resize(words);
  return v.data();
}

}  // namespace

bool reproducibleApplies(const Call& call) {
  const bool kind =
      call.kind == CallKind::kAllReduce || call.kind == CallKind::kReduceScatter || call.kind == CallKind::kReduce;
  return kind && call.count > 0 && (call.op == RedOp::kSum || call.op == RedOp::kAvg) &&
         kernels::reproSupports(call.type);
}

Status runReproducible(const Call& call, int rank, int ranks, ReproScratch& scratch,
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

}  // namespace ferry::coll
