// The library under test, as the sweep sees it. ferry-perf implements it with ferry::Comm and
// mpi-perf with MPI, so both tools share the sweep, the formulas, the check and the output, and
// their numbers compare like for like.
#pragma once

#include <cstddef>
#include <string>

#include "ferry/status.hpp"
#include "ferry/types.hpp"
#include "bench/perf/collectives.hpp"

namespace ferry::perf {

/// One operation of the sweep, with nccl-tests' buffer conventions (see collectives.hpp).
struct Call {
  Coll coll;
  const void* send;
  void* recv;
  size_t count;  ///< the paramCount of the size
  DataType type;
  RedOp op;  ///< reductions only
  int root;  ///< broadcast and reduce only
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "ferry 0.1.0", "Open MPI 4.1.4": the JSON's library field and the charts' labels.
  virtual std::string library() const = 0;
  /// Whether the library runs `coll` for this type and op (-d all / -o all skip the others).
  virtual bool supports(Coll coll, DataType type, RedOp op) const = 0;

  /// Run one operation; returns when this rank's part is complete.
  virtual Status run(const Call& call) = 0;
  virtual Status barrier() = 0;
  /// In place over `count` doubles, op kSum, kMin or kMax: timing and bookkeeping only.
  virtual Status allReduceDoubles(double* values, size_t count, RedOp op) = 0;
  /// Every rank's `bytes` bytes, in rank order, on every rank.
  virtual Status allGatherBytes(const void* in, void* out, size_t bytes) = 0;
  /// Make blocked and later calls fail (the -T timeout); may be called from another thread.
  virtual void abort(const std::string& reason) = 0;
  /// -R 1: `bytes` of host memory from the library's own allocator (ferry::hostAlloc,
  /// MPI_Alloc_mem), or null; freed with freeRegistered.
  virtual void* allocRegistered(size_t bytes) = 0;
  virtual void freeRegistered(void* p) = 0;
  /// -R 2: register `bytes` at `p` (ordinary memory) for later calls; the handle, or null when the
  /// library has no such registration (or it failed: the buffer stays as it is).
  virtual void* registerBuffer(void* /*p*/, size_t /*bytes*/) { return nullptr; }
  virtual void deregisterBuffer(void* /*handle*/) {}
  /// Calls the library ran to measure candidate plans so far (ferry::Comm::measuredCalls); 0 for a
  /// library that does not measure.
  virtual uint64_t measuredCalls() const { return 0; }
};

}  // namespace ferry::perf
