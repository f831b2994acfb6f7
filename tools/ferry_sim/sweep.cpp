// Sweeps (sweep.hpp).
#include "tools/ferry_sim/sweep.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "tools/ferry_sim/replay.hpp"

namespace ferry::sim {

double busFactor(CallKind kind, int n) {
  const double m = n;
  switch (kind) {
    case CallKind::kAllReduce: return 2.0 * (m - 1) / m;
    case CallKind::kReduceScatter:
    case CallKind::kAllGather:
    case CallKind::kAllToAll: return (m - 1) / m;
    default: return 1.0;
  }
}

namespace {
struct CollName {
  CallKind kind;
  const char* name;
};
constexpr CollName kNames[] = {{CallKind::kAllReduce, "all_reduce"}, {CallKind::kReduceScatter, "reduce_scatter"},
                               {CallKind::kAllGather, "all_gather"}, {CallKind::kAllToAll, "alltoall"},
                               {CallKind::kBroadcast, "broadcast"},  {CallKind::kReduce, "reduce"}};

// Each program run `iters` times in a row: the copies' requests numbered after the ones before
// (messages match in order per pair of ranks, so call i's meet call i's).
std::vector<Program> repeated(const std::vector<Program>& programs, int iters) {
  std::vector<Program> out(programs.size());
  for (size_t p = 0; p < programs.size(); ++p) {
    const Program& one = programs[p];
    Program& many = out[p];
    many.ops.reserve(one.ops.size() * static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i) {
      const uint32_t base = one.requests * static_cast<uint32_t>(i);
      for (Op op : one.ops) {
        if (op.kind == Op::Kind::kSend || op.kind == Op::Kind::kRecv || op.kind == Op::Kind::kWait) op.req += base;
        many.ops.push_back(op);
      }
    }
    many.requests = one.requests * static_cast<uint32_t>(iters);
  }
  return out;
}

bool perRank(CallKind k) {
  return k == CallKind::kAllGather || k == CallKind::kReduceScatter || k == CallKind::kAllToAll;
}
}  // namespace

CallKind parseCollective(const std::string& name) {
  for (const CollName& c : kNames) {
    if (name == c.name) return c.kind;
  }
  if (name == "allreduce") return CallKind::kAllReduce;
  if (name == "allgather") return CallKind::kAllGather;
  if (name == "reducescatter") return CallKind::kReduceScatter;
  if (name == "all_to_all") return CallKind::kAllToAll;
  return CallKind::kBarrier;
}

const char* collectiveName(CallKind kind) {
  for (const CollName& c : kNames) {
    if (kind == c.kind) return c.name;
  }
  return "?";
}

size_t perfCount(CallKind kind, size_t bytes, size_t elementSize, int n) {
  const size_t count = bytes / elementSize;
  if (!perRank(kind)) return count;
  const size_t unit = elementSize >= 16 ? 1 : 16 / elementSize;
  return count / static_cast<size_t>(n) / unit * unit;
}

SimPoint simulate(const Topology& topo, const coll::AlgorithmRow& row, CallKind kind, size_t bytes, DataType type,
                  int n, size_t maxOps, int iters) {
  SimPoint pt;
  const size_t es = dataTypeSize(type);
  pt.bytes = bytes;
  pt.count = perfCount(kind, bytes, es, n);
  pt.row = coll::algorithmName(row.algorithm);
  CallSpec spec;
  spec.kind = kind;
  spec.count = pt.count;
  spec.type = type;
  spec.n = n;
  spec.sliceBytes = topo.sliceBytes;
  spec.depth = topo.depth;
  spec.hostRanks = topo.ranksPerHost;
  spec.rails = std::min(topo.nics, topo.ranksPerHost);
  auto rec = recordCall(row, spec, topo.ranksPerHost, maxOps);
  if (!rec.isOk()) {
    pt.error = rec.status().message();
    return pt;
  }
  pt.period = rec->period;
  std::unique_ptr<Fabric> fabric = topo.fabric(n, rec->period);
  const std::vector<Program> programs = iters > 1 ? repeated(rec->programs, iters) : std::vector<Program>{};
  const ReplayResult r = replay(*fabric, iters > 1 ? programs : rec->programs, n, topo.compute, rec->fold);
  if (!r.complete) {
    pt.error = "the replay deadlocked (a receive no send matched)";
    return pt;
  }
  pt.seconds = r.seconds / iters;
  const double moved = static_cast<double>(pt.count * es) * (perRank(kind) ? n : 1);
  pt.algBw = pt.seconds > 0 ? moved / 1e9 / pt.seconds : 0;
  pt.busBw = pt.algBw * busFactor(kind, n);
  return pt;
}

int railsOf(const Topology& topo, CallKind kind, size_t count, DataType type, int n) {
  const double bytes = static_cast<double>(count * dataTypeSize(type));
  return coll::railsFor(topo.nics, topo.ranksPerHost, n, kind == CallKind::kAllReduce ? bytes / n : bytes,
                        topo.sliceBytes);
}

const coll::AlgorithmRow* modelChoice(const Topology& topo, CallKind kind, size_t count, DataType type, int n) {
  coll::ModelInputs in;
  in.ranks = n;
  in.ranksOnHost = topo.ranksPerHost;
  in.model.copyBw = in.model.copyBwCache = in.model.cmaBw = topo.compute.copy > 0 ? topo.compute.copy : 1e12;
  in.model.reduceBw = in.model.reduceBwCache = topo.compute.reduce > 0 ? topo.compute.reduce : 1e12;
  in.model.cores = topo.ranksPerHost;
  in.net.alpha = topo.alpha();
  in.net.beta = 1.0 / topo.streamBw();
  in.net.measured = true;
  in.ranksPerHost = topo.ranksPerHost;
  in.nicsPerHost = topo.nics;
  in.intra.alpha = topo.intraLatency;
  in.intra.beta = 1.0 / topo.intraStreamBw();
  in.intra.measured = true;
  in.sliceBytes = topo.sliceBytes;
  in.hosts = (n + topo.ranksPerHost - 1) / topo.ranksPerHost;
  in.evenHosts = n % topo.ranksPerHost == 0;
  const coll::Pricing p(in, 256 * 1024, count * dataTypeSize(type), false);
  const coll::AlgorithmRow* best = nullptr;
  double bestCost = coll::kInapplicable;
  for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
    if (row->kind != kind || !recordable(*row) || !row->applicable(p)) continue;
    const double c = row->cost(p);
    if (c < bestCost) best = row, bestCost = c;
  }
  return best;
}

}  // namespace ferry::sim
