// The host algorithms: one free function per collective, each a schedule of sends, receives and
// reductions over the transport-neutral primitives of Exec.
//
// Buffers follow NCCL's conventions: counts are elements, in-place means the output buffer is the
// input (all-gather: in == out + rank*count; reduce-scatter: in + rank*count == out). Every
// function supports count 0 and any world size from 1.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/context.hpp"
#include "ferry/call.hpp"
#include "ferry/types.hpp"

namespace ferry::coll {

/// How a collective moves its data. Values are announced to peers and compared, keep them stable.
enum class Algorithm : uint8_t {
  kRing = 1,           ///< ring over the transport (all-reduce, reduce-scatter, all-gather)
  kChain = 2,          ///< pipelined chain over the transport (broadcast, reduce)
  kPairwise = 3,       ///< pairwise exchange over the transport (all-to-all, barrier, empty calls)
  kOneShot = 4,        ///< single host: every rank reduces the whole vector from every rank's copy
  kTwoShot = 5,        ///< single host: rank r reduces segment r from every rank, then all gather
  kDirect = 6,         ///< single host: every rank reads what it needs straight from its peers
  kDoubling = 7,       ///< recursive doubling over the transport (all-reduce, all-gather): log2(n) exchanges
  kHierarchical = 8,   ///< several hosts: within each host, then across hosts (TwoLevels, table.hpp)
  kBruck = 9,          ///< Bruck all-gather and all-to-all over the transport: log2(n) exchanges
  kTree = 10,          ///< double binary tree (all-reduce), pipelined binary tree (broadcast, reduce)
  kRabenseifner = 11,  ///< recursive halving then doubling (all-reduce): 2 log2(n) exchanges
  kHalving = 12,       ///< recursive halving reduce-scatter: log2(n) exchanges
  kRails = 13,         ///< one ring per NIC of a host, each crossing hosts through its own (ring's three)
};
/// Where the data of a single-host algorithm passes (transport algorithms: kMessages).
enum class Protocol : uint8_t {
  kMessages = 1,  ///< tagged messages of the transport
  kMailbox = 2,   ///< copied into the sender's shared mailbox, copied out by readers (two copies)
  kCma = 3,       ///< read straight from the owner's buffer by cross-memory attach (one copy)
};
/// How single-host algorithms store into the caller's output. Streaming (non-temporal) stores skip
/// reading each output line from memory before writing it, a third of a copy's memory traffic
/// when the output is not cached; when it is (a buffer reused call after call), they evict it.
enum class Stores : uint8_t {
  kAuto,       ///< streaming where the host's buffers of the call outgrow the last-level cache
  kStreaming,  ///< always streaming (the tuner measured it faster)
  kCached,     ///< never
};

struct AlgorithmRow;

/// What the tuner chose for one call.
struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kMessages;
  size_t chunkBytes = 0;  ///< single-host algorithms: bytes per read-and-reduce chunk (0: default)
  Stores stores = Stores::kAuto;
  const AlgorithmRow* row = nullptr;  ///< the table's row of (algorithm, protocol); null: looked up
};

/// Ring all-reduce: ring reduce-scatter of `count` elements into segments, then ring all-gather.
/// Avg sums and divides once, on the rank that completes each segment.
Status ringAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);

/// Recursive doubling all-reduce: in ceil(log2 n) steps every rank exchanges its whole partial
/// result with the rank whose number differs in one bit and combines them, lower rank's operand
/// first, so partners (and in the end all ranks) hold bit-identical values. With n not a power of
/// two the first 2(n - p) ranks fold in pairs first and get the result back at the end (p: the
/// largest power of two <= n). Latency-bound calls: log2(n) messages against the ring's 2(n - 1).
Status doublingAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);

/// Rabenseifner all-reduce: a reduce-scatter by recursive halving (each step halves the range a
/// rank keeps and combines its partner's copy of it) then an all-gather by recursive doubling,
/// 2 log2(p) messages and the ring's bytes; n not a power of two folds as doublingAllReduce
/// (halving.cpp). Each segment is reduced on one rank, so all ranks end bit-identical.
Status rabenseifnerAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);

/// Double binary tree all-reduce: half the vector climbs and descends one binary tree, half a
/// second whose leaves are the first's interior ranks, in pipelined chunks (tree.cpp).
Status treeAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);

/// Reduce-scatter by recursive halving over the ranks' blocks in log2(p) steps (halving.cpp).
Status halvingReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op);

/// All-gather by recursive doubling over the ranks' blocks in log2(p) steps (halving.cpp).
Status doublingAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type);

/// Ring reduce-scatter: rank r receives the reduction of every rank's r-th block of `recvCount`.
Status ringReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op);

/// Ring all-gather: out holds every rank's `sendCount` elements, in rank order.
Status ringAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type);

/// The rails ring (ring.cpp): the vector (or each rank's block) is split into C parts, one per
/// rail, C = the context's `rails`; part c runs a ring that visits the hosts in order and each
/// host's ranks from local index c, so its one hop between two hosts leaves from local index c - 1
/// and enters at c: every rail's traffic between hosts goes through a NIC of its own. The rings
/// run at once, interleaved step by step. With one rail, or hosts of unequal size, it is the ring
/// over the ranks in host order.
Status railsAllReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op);
Status railsReduceScatter(Exec& ex, const void* in, void* out, size_t recvCount, DataType type, RedOp op);
Status railsAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type);

/// Bruck all-gather: as ringAllGather, in ceil(log2 n) exchanges (bruck.cpp).
Status bruckAllGather(Exec& ex, const void* in, void* out, size_t sendCount, DataType type);

/// Pairwise all-to-all: block j of rank i's input becomes block i of rank j's output.
Status pairwiseAllToAll(Exec& ex, const void* in, void* out, size_t count, DataType type);

/// Bruck all-to-all: as pairwiseAllToAll, in ceil(log2 n) exchanges of packed blocks (bruck.cpp).
Status bruckAllToAll(Exec& ex, const void* in, void* out, size_t count, DataType type);

/// Pipelined binary tree broadcast from `root`: depth log2(n) hops instead of the chain's n - 1
/// (tree.cpp).
Status treeBroadcast(Exec& ex, const void* in, void* out, size_t count, DataType type, int root);

/// Pipelined binary tree reduce toward `root` (tree.cpp).
Status treeReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op, int root);

/// Pipelined chain broadcast from `root`, sliced so every link is busy at once.
Status chainBroadcast(Exec& ex, const void* in, void* out, size_t count, DataType type, int root);

/// Pipelined chain reduce toward `root` (root+1 starts, root finishes).
Status chainReduce(Exec& ex, const void* in, void* out, size_t count, DataType type, RedOp op, int root);

/// For a call that moves no data (count 0): one empty message around the ring, so a rank whose
/// peers called with a different count or collective learns it at once instead of at its deadline.
Status ringPresence(Exec& ex);

/// Dissemination barrier: ceil(log2 n) rounds of empty messages.
Status disseminationBarrier(Exec& ex);

/// One transfer of a batch; `desc` describes it for mismatch checks (kind kSend, count, type).
struct P2pItem {
  bool isSend;
  void* buf;
  size_t bytes;
  int peer;
  OpDesc desc;
};
/// Post every transfer, then wait for all. Transfers to this rank itself are copies paired in order.
Status batchSendRecv(Exec& ex, const std::vector<P2pItem>& items);

// Single-host algorithms over the arena (direct.cpp). Every rank runs the same plan; each starts
// with every rank announcing itself (Exec::announce, post phase 1) and waiting for all others.

/// All-reduce with plan.algorithm kOneShot (kMailbox; bytes <= mailbox) or kTwoShot (kMailbox or kCma).
Status arenaAllReduce(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, RedOp op);
Status arenaReduceScatter(Exec& ex, const Plan& plan, const void* in, void* out, size_t recvCount, DataType type,
                          RedOp op);
Status arenaAllGather(Exec& ex, const Plan& plan, const void* in, void* out, size_t sendCount, DataType type);
Status arenaAllToAll(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type);
Status arenaBroadcast(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, int root);
Status arenaReduce(Exec& ex, const Plan& plan, const void* in, void* out, size_t count, DataType type, RedOp op,
                   int root);
/// Barrier, and the presence check of calls that move no data.
Status arenaBarrier(Exec& ex);
/// The reproducible mode's all-reduce and reduce-scatter (sum or avg; kernels::reproSupports) on
/// one host, in one call: the mailbox pipelines of twoshot and direct, each chunk of a rank's
/// segment reduced exactly from every rank's values (kernels::reproReduceRowList), so the results
/// have the bits of collectives/reproducible.hpp's three steps. `plan` gives the chunk and stores;
/// its algorithm is kTwoShot (all-reduce) or kDirect (reduce-scatter), its protocol kMailbox.
Status arenaReproducible(Exec& ex, const Plan& plan, const Call& call);

/// Point-to-point transfer of `bytes` to / from `peer`.
Status sendTo(Exec& ex, const void* buf, size_t bytes, int peer);
Status recvFrom(Exec& ex, void* buf, size_t bytes, int peer);

}  // namespace ferry::coll
