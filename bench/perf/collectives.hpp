// The collectives ferry-perf measures, and nccl-tests' arithmetic for each: how a sweep size
// becomes element counts, and how a time becomes algorithm and bus bandwidth.
//
// Vocabulary (nccl-tests'): a sweep visits sizes S in bytes. For each, `count` = S / element size,
// and the collective turns count into
//   sendCount / recvCount  elements in this rank's send and receive buffers,
//   paramCount             the count argument of the call (and the table's "count" column),
//   send/recvInplaceOffset where, in elements times the rank, the in-place data sits in recvbuff.
// The table's "size" column is max(sendCount, recvCount) x element size. all_gather,
// reduce_scatter and alltoall round the per-rank count down to a multiple of 16 bytes, so a size
// smaller than 16 bytes x ranks shows as 0.
//
// algbw = bytes / time, where bytes is paramCount x element size, times the number of ranks for
// reduce_scatter, all_gather and alltoall (the whole array). busbw = algbw x factor, with nccl-tests'
// factors: all_reduce 2(n-1)/n; reduce_scatter, all_gather, alltoall (n-1)/n; broadcast, reduce,
// sendrecv 1 (doc/PERFORMANCE.md in nccl-tests explains why). GB/s means 10^9 bytes per second.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "ferry/types.hpp"

namespace ferry::perf {

/// The collectives the sweep runs, as ferry names them; kSend stands for nccl-tests' sendrecv (every
/// rank sends to the next and receives from the previous).
using Coll = CallKind;
inline constexpr int kNumColls = 7;

/// What distinguishes one collective in the sweep and the table.
struct CollInfo {
  Coll coll;
  const char* name;   ///< "all_reduce": the command-line and JSON name
  bool reduces;       ///< takes a reduction op (-o)
  bool listsOp;       ///< the table's redop column names the op (reductions and sendrecv)
  bool rooted;        ///< takes a root (-r)
  bool checkInPlace;  ///< the in-place result has a defined value (sendrecv's has not: N/A)
};

const CollInfo& collInfo(Coll coll);
/// Every collective, in the order `all` runs them.
std::span<const Coll> allColls();
/// "all_reduce", also "allreduce", "all_reduce_perf" (nccl-tests' binary names).
std::optional<Coll> parseCollName(std::string_view name);

/// Element counts for one sweep size. See the vocabulary above.
struct CollCounts {
  size_t sendCount = 0;
  size_t recvCount = 0;
  size_t paramCount = 0;
  size_t sendInplaceOffset = 0;
  size_t recvInplaceOffset = 0;

  /// The table's size column in bytes.
  size_t bytes(size_t eltSize) const { return (sendCount > recvCount ? sendCount : recvCount) * eltSize; }
};

/// nccl-tests' counts for `count` elements of `eltSize` bytes over `nranks` ranks.
CollCounts collCounts(Coll coll, size_t count, size_t eltSize, int nranks);

/// Bus bandwidth over algorithm bandwidth for `nranks` ranks.
double busFactor(Coll coll, int nranks);
/// Algorithm bandwidth in GB/s (10^9 bytes per second) of one call taking `seconds`.
double algBandwidth(Coll coll, size_t paramCount, size_t eltSize, double seconds, int nranks);

}  // namespace ferry::perf
