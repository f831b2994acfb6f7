// One call of any front end, as data: the C++ API's methods, the NCCL C API, Python and
// torch.distributed all build a Call and hand it to Comm::collective(), which validates it once
// (base/call_check.hpp) and runs it through the algorithm table (collectives/table.hpp).
#pragma once

#include <cstddef>
#include <optional>

#include "ferry/types.hpp"

/// CUDA's stream type (cudaStream_t is CUstream_st*), declared here so that this header needs no
/// CUDA header. A null stream is CUDA's legacy default stream.
struct CUstream_st;

namespace ferry {

/// A CUDA stream, as the caller's cudaStream_t.
using Stream = ::CUstream_st*;

/// What to run, on which buffers, and how it is ordered. Buffers follow NCCL's conventions
/// (Comm's methods say what each collective reads and writes); type and op may hold any integer
/// a caller passed, and validation names the ones that are not in the tables.
struct Call {
  CallKind kind = CallKind::kBarrier;
  const void* send = nullptr;  ///< read; for kSend the buffer sent
  void* recv = nullptr;        ///< written; for kRecv the buffer received into
  size_t count = 0;            ///< elements, as the API takes them (per rank for allGather, reduceScatter, allToAll)
  DataType type = DataType::kUint8;
  RedOp op = RedOp::kSum;        ///< read by the reductions only
  int root = 0;                  ///< the root of broadcast and reduce; the peer of send and recv
  std::optional<Stream> stream;  ///< set: stream-ordered (NCCL's semantics); unset: runs now, on the host
  const char* caller = nullptr;  ///< the entry point error messages name; null: callKindName(kind)

  static Call allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
    return {CallKind::kAllReduce, send, recv, count, type, op, 0, {}, nullptr};
  }
  static Call reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op) {
    return {CallKind::kReduceScatter, send, recv, recvCount, type, op, 0, {}, nullptr};
  }
  static Call allGather(const void* send, void* recv, size_t sendCount, DataType type) {
    return {CallKind::kAllGather, send, recv, sendCount, type, RedOp::kSum, 0, {}, nullptr};
  }
  static Call allToAll(const void* send, void* recv, size_t count, DataType type) {
    return {CallKind::kAllToAll, send, recv, count, type, RedOp::kSum, 0, {}, nullptr};
  }
  static Call broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
    return {CallKind::kBroadcast, send, recv, count, type, RedOp::kSum, root, {}, nullptr};
  }
  static Call reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root) {
    return {CallKind::kReduce, send, recv, count, type, op, root, {}, nullptr};
  }
  static Call sendTo(const void* buf, size_t count, DataType type, int peer) {
    return {CallKind::kSend, buf, nullptr, count, type, RedOp::kSum, peer, {}, nullptr};
  }
  static Call recvFrom(void* buf, size_t count, DataType type, int peer) {
    return {CallKind::kRecv, nullptr, buf, count, type, RedOp::kSum, peer, {}, nullptr};
  }
  static Call barrier() { return {}; }

  /// This call, ordered on `s` (NCCL's semantics).
  Call on(Stream s) const {
    Call c = *this;
    c.stream = s;
    return c;
  }
  /// The name error messages give the call.
  const char* name() const { return caller != nullptr ? caller : callKindName(kind); }
};

}  // namespace ferry
