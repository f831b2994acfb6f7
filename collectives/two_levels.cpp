// Rows of the algorithm table (table.hpp) for communicators spanning hosts: each host's ranks run
// the call among themselves and the hosts exchange across the network (runtime/hierarchy.hpp runs
// the levels). Priced from the network's alpha and beta and the intra-host level's own prediction;
// the rows whose blocks must be permuted between the levels need every host to hold as many ranks.
#include "collectives/table.hpp"

namespace ferry::coll {
namespace {

bool spansHosts(const Pricing& p) { return !p.arena && p.in.hierarchy && p.modelled; }
bool spansEvenHosts(const Pricing& p) { return spansHosts(p) && p.in.evenHosts; }

Status runOnLevels(Exec& ex, const Plan&, const Call& c) {
  TwoLevels* levels = ex.context().levels;
  if (levels == nullptr) {
    return makeError(ErrorCode::kInternalError, "%s on rank %d: a two-level plan on a communicator without two levels",
                     c.name(), ex.rank());
  }
  return levels->run(c);
}

}  // namespace

// Even hosts: reduce-scatter on each host, all-reduce of the blocks across hosts (L streams per
// host at once, `share` of them per host link), all-gather on each host. Otherwise reduce to each
// host's first rank, all-reduce across, broadcast back.
extern const AlgorithmRow kTwoLevelAllReduce{CallKind::kAllReduce,
                                             Algorithm::kHierarchical,
                                             Protocol::kMessages,
                                             spansHosts,
                                             [](const Pricing& p) {
                                               return p.in.evenHosts
                                                          ? p.local(CallKind::kReduceScatter, p.B / p.L) +
                                                                p.crossAllReduce(p.B / p.L, p.share) +
                                                                p.local(CallKind::kAllGather, p.B / p.L)
                                                          : p.local(CallKind::kReduce, p.B) + p.crossAllReduce(p.B, 1) +
                                                                p.local(CallKind::kBroadcast, p.B);
                                             },
                                             runOnLevels};

extern const AlgorithmRow kTwoLevelReduceScatter{CallKind::kReduceScatter,
                                                 Algorithm::kHierarchical,
                                                 Protocol::kMessages,
                                                 spansEvenHosts,
                                                 [](const Pricing& p) {
                                                   return p.n * p.B * p.localCopy +
                                                          p.local(CallKind::kReduceScatter, p.H * p.B) +
                                                          (p.H - 1) * p.msg(p.B, p.share);
                                                 },
                                                 runOnLevels};

extern const AlgorithmRow kTwoLevelAllGather{CallKind::kAllGather,
                                             Algorithm::kHierarchical,
                                             Protocol::kMessages,
                                             spansEvenHosts,
                                             [](const Pricing& p) {
                                               return (p.H - 1) * p.msg(p.B, p.share) +
                                                      p.local(CallKind::kAllGather, p.H * p.B) +
                                                      p.n * p.B * p.localCopy;
                                             },
                                             runOnLevels};

extern const AlgorithmRow kTwoLevelAllToAll{CallKind::kAllToAll,
                                            Algorithm::kHierarchical,
                                            Protocol::kMessages,
                                            spansEvenHosts,
                                            [](const Pricing& p) {
                                              return 2 * p.n * p.B * p.localCopy +
                                                     p.local(CallKind::kAllToAll, p.H * p.B) +
                                                     (p.H - 1) * p.msg(p.L * p.B, p.share);
                                            },
                                            runOnLevels};

extern const AlgorithmRow kTwoLevelBroadcast{CallKind::kBroadcast,
                                             Algorithm::kHierarchical,
                                             Protocol::kMessages,
                                             spansHosts,
                                             [](const Pricing& p) {
                                               return p.chain(p.H, p.B) +
                                                      p.local(CallKind::kBroadcast, p.B) * (p.in.evenHosts ? 1 : 2);
                                             },
                                             runOnLevels};

extern const AlgorithmRow kTwoLevelReduce{CallKind::kReduce,
                                          Algorithm::kHierarchical,
                                          Protocol::kMessages,
                                          spansHosts,
                                          [](const Pricing& p) {
                                            return p.local(CallKind::kReduce, p.B) + p.chain(p.H, p.B);
                                          },
                                          runOnLevels};

}  // namespace ferry::coll
