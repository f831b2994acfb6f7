// The algorithm table: which rows exist and in which order the tuner weighs them. Each row is
// defined in its algorithm's file; one line here adds it.
#include "collectives/table.hpp"

#include <string>

namespace ferry::coll {

// clang-format off
#define FERRY_ALGORITHM_ROWS(X)  \
  /* allReduce */                \
  X(kOneShotAllReduce)           \
  X(kTwoShotMailboxAllReduce)    \
  X(kTwoShotCmaAllReduce)        \
  X(kRingAllReduce)              \
  X(kRailsAllReduce)             \
  X(kDoublingAllReduce)          \
  X(kRabenseifnerAllReduce)      \
  X(kTreeAllReduce)              \
  X(kTwoLevelAllReduce)          \
  /* reduceScatter */            \
  X(kDirectMailboxReduceScatter) \
  X(kDirectCmaReduceScatter)     \
  X(kRingReduceScatter)          \
  X(kRailsReduceScatter)         \
  X(kHalvingReduceScatter)       \
  X(kTwoLevelReduceScatter)      \
  /* allGather */                \
  X(kDirectMailboxAllGather)     \
  X(kDirectCmaAllGather)         \
  X(kRingAllGather)              \
  X(kRailsAllGather)             \
  X(kBruckAllGather)             \
  X(kDoublingAllGather)          \
  X(kTwoLevelAllGather)          \
  /* allToAll */                 \
  X(kDirectMailboxAllToAll)      \
  X(kDirectCmaAllToAll)          \
  X(kPairwiseAllToAll)           \
  X(kBruckAllToAll)              \
  X(kTwoLevelAllToAll)           \
  /* broadcast */                \
  X(kDirectMailboxBroadcast)     \
  X(kDirectCmaBroadcast)         \
  X(kChainBroadcast)             \
  X(kTreeBroadcast)              \
  X(kTwoLevelBroadcast)          \
  /* reduce */                   \
  X(kOneShotReduce)              \
  X(kDirectMailboxReduce)        \
  X(kDirectCmaReduce)            \
  X(kChainReduce)                \
  X(kTreeReduce)                 \
  X(kTwoLevelReduce)             \
  /* barrier */                  \
  X(kArenaBarrier)               \
  X(kDisseminationBarrier)
// clang-format on

#define FERRY_DECLARE_ROW(name) extern const AlgorithmRow name;
FERRY_ALGORITHM_ROWS(FERRY_DECLARE_ROW)
extern const AlgorithmRow kRingPresence;
#undef FERRY_DECLARE_ROW

namespace {

#define FERRY_ROW_ADDRESS(name) &name,
constexpr const AlgorithmRow* kTable[] = {FERRY_ALGORITHM_ROWS(FERRY_ROW_ADDRESS)};
#undef FERRY_ROW_ADDRESS

constexpr const char* kAlgorithmNames[] = {nullptr,   "ring",         "chain",    "pairwise",     "oneshot",
                                           "twoshot", "direct",       "doubling", "hierarchical", "bruck",
                                           "tree",    "rabenseifner", "halving",  "rails"};
constexpr const char* kProtocolNames[] = {nullptr, "messages", "mailbox", "cma"};

}  // namespace

std::span<const AlgorithmRow* const> algorithmTable() { return kTable; }

const AlgorithmRow* findRow(CallKind kind, Algorithm algorithm, Protocol protocol) {
  for (const AlgorithmRow* row : kTable) {
    if (row->kind == kind && row->algorithm == algorithm && row->protocol == protocol) return row;
  }
  return nullptr;
}

const AlgorithmRow& emptyCallRow(bool arena) { return arena ? kArenaBarrier : kRingPresence; }

int reductionOrder(Algorithm a) {
  switch (a) {
    // reduceFromAll (arena_algorithms.cpp): ranks 0..n-1 left to right, whatever the chunking.
    case Algorithm::kOneShot:
    case Algorithm::kTwoShot:
    case Algorithm::kDirect: return static_cast<int>(Algorithm::kOneShot);
    default: return static_cast<int>(a);
  }
}

bool orderSensitive(CallKind kind, DataType type, RedOp op) {
  const bool reduces = kind == CallKind::kAllReduce || kind == CallKind::kReduceScatter || kind == CallKind::kReduce;
  return reduces && isFloatingPoint(type) && (op == RedOp::kSum || op == RedOp::kProd || op == RedOp::kAvg);
}

const char* algorithmName(Algorithm a) {
  const auto v = static_cast<size_t>(a);
  return v < std::size(kAlgorithmNames) ? kAlgorithmNames[v] : nullptr;
}

const char* protocolName(Protocol p) {
  const auto v = static_cast<size_t>(p);
  return v < std::size(kProtocolNames) ? kProtocolNames[v] : nullptr;
}

std::string algorithmList() {
  std::string out;
  for (size_t a = 1; a < std::size(kAlgorithmNames); ++a) {
    bool listed[kNumCallKinds] = {};
    std::string kinds;
    for (const AlgorithmRow* row : kTable) {
      const auto k = static_cast<size_t>(row->kind);
      if (static_cast<size_t>(row->algorithm) != a || row->kind == CallKind::kBarrier || listed[k]) continue;
      listed[k] = true;
      kinds += std::string(kinds.empty() ? "" : ", ") + callKindName(row->kind);
    }
    if (!kinds.empty()) out += std::string(out.empty() ? "" : "; ") + kAlgorithmNames[a] + " (" + kinds + ")";
  }
  return out;
}

}  // namespace ferry::coll
