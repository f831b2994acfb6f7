// nccl-tests' counts and bandwidth formulas per collective. See collectives.hpp.
#include "bench/perf/collectives.hpp"

#include <string>

namespace ferry::perf {
namespace {

constexpr CollInfo kColls[kNumColls] = {
    // coll                 name              reduces listsOp rooted checkInPlace
    {Coll::kAllReduce, "all_reduce", true, true, false, true},
    {Coll::kReduceScatter, "reduce_scatter", true, true, false, true},
    {Coll::kAllGather, "all_gather", false, false, false, true},
    {Coll::kAllToAll, "alltoall", false, false, false, true},
    {Coll::kBroadcast, "broadcast", false, false, true, true},
    {Coll::kReduce, "reduce", true, true, true, true},
    // nccl-tests' sendrecv names the op in its table although it reduces nothing; in place, a
    // rank sends from the buffer it receives into, so the result is not defined.
    {Coll::kSend, "sendrecv", false, true, false, false},
};

constexpr Coll kAllColls[kNumColls] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll,
                                       Coll::kBroadcast, Coll::kReduce,        Coll::kSend};

// The per-rank share of `count`, rounded down to a multiple of 16 bytes.
size_t alignedShare(size_t count, size_t eltSize, int nranks) {
  const size_t perRank = count / static_cast<size_t>(nranks);
  const size_t unit = eltSize >= 16 ? 1 : 16 / eltSize;
  return perRank / unit * unit;
}

}  // namespace

const CollInfo& collInfo(Coll coll) {
  for (const CollInfo& info : kColls) {
    if (info.coll == coll) return info;
  }
  return kColls[0];
}

std::span<const Coll> allColls() { return kAllColls; }

std::optional<Coll> parseCollName(std::string_view name) {
  std::string key(name);
  if (key.size() > 5 && key.ends_with("_perf")) key.resize(key.size() - 5);
  for (const CollInfo& c : kColls) {
    if (key == c.name) return c.coll;
  }
  // Spellings without underscores, as in NCCL's function names.
  if (key == "allreduce") return Coll::kAllReduce;
  if (key == "reducescatter") return Coll::kReduceScatter;
  if (key == "allgather") return Coll::kAllGather;
  if (key == "all_to_all" || key == "alltoall") return Coll::kAllToAll;
  if (key == "send_recv") return Coll::kSend;
  return std::nullopt;
}

CollCounts collCounts(Coll coll, size_t count, size_t eltSize, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSend:
    case Coll::kRecv:
    case Coll::kBarrier: c.sendCount = c.recvCount = c.paramCount = count; break;
    case Coll::kReduceScatter: {
      const size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = base * n;
      c.recvCount = base;
      c.paramCount = base;
      c.recvInplaceOffset = base;  // rank r's result lands at recvbuff + r x base
      break;
    }
    case Coll::kAllGather: {
      const size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = base;
      c.recvCount = base * n;
      c.paramCount = base;
      c.sendInplaceOffset = base;  // rank r's contribution sits at recvbuff + r x base
      break;
    }
    case Coll::kAllToAll: {
      const size_t base = alignedShare(count, eltSize, nranks);
      c.sendCount = c.recvCount = base * n;
      c.paramCount = base;
      break;
    }
  }
  return c;
}

double busFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kReduceScatter:
    case Coll::kAllGather:
    case Coll::kAllToAll: return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSend:
    case Coll::kRecv:
    case Coll::kBarrier: return 1.0;
  }
  return 1.0;
}

double algBandwidth(Coll coll, size_t paramCount, size_t eltSize, double seconds, int nranks) {
  if (seconds <= 0) return 0;
  double bytes = static_cast<double>(paramCount) * static_cast<double>(eltSize);
  if (coll == Coll::kReduceScatter || coll == Coll::kAllGather || coll == Coll::kAllToAll) bytes *= nranks;
  return bytes / 1.0e9 / seconds;
}

}  // namespace ferry::perf
