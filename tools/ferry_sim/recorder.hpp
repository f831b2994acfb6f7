// Recording: run an algorithm row's own code (collectives/table.hpp) for one rank over a
// transport that moves nothing, and keep what it did as a Program (program.hpp).
//
// The row runs exactly as in the runtime, through an Exec over a Context, with three stand-ins:
// the transport records each posted send and receive and completes a request when the Exec waits
// for it (the Exec names the peer it waits on in the call trace; the oldest pending receive from
// that peer, else the oldest send to it, is the one); the host kernels (kernel_stub.cpp) record
// each reduction's bytes instead of computing; and the buffers are reserved address space that is
// never touched (calls are in place, so no algorithm copies between them). Any row that reaches
// its peers only through Exec's sends and receives is recorded this way, with no code of its own
// here; rows over the single-host arena or the two-level hierarchy are not (ferry-sim skips them).
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/table.hpp"
#include "ferry/status.hpp"
#include "tools/ferry_sim/program.hpp"
#include "tools/ferry_sim/replay.hpp"

namespace ferry::sim {

/// One call of n ranks, as ferry-perf sizes it (count per the API's convention).
struct CallSpec {
  CallKind kind = CallKind::kAllReduce;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  int n = 1;
  size_t sliceBytes = 256 * 1024;
  int depth = 8;
  int hostRanks = 1;  ///< ranks per host, numbered host by host (the rails ring's hosts)
  int rails = 1;      ///< the rails ring's rails: min(NICs, ranks per host)
};

/// Whether ferry-sim can record `row`: it runs over messages alone.
bool recordable(const coll::AlgorithmRow& row);

/// Record rank `rank`'s part of `spec` under `row`.
Result<Program> recordRank(const coll::AlgorithmRow& row, const CallSpec& spec, int rank);

/// The programs of the simulated ranks 0..period-1 (replay.hpp, "Symmetry").
struct Recording {
  std::vector<Program> programs;
  int period = 1;
  Fold fold = Fold::kShift;
  size_t ops = 0;  ///< ops recorded in all, symmetry checks included
};

/// Record `spec` with the smallest period the schedule allows: `hostRanks` (ranks per host) when
/// rank r + hostRanks * k runs rank r's program with every peer moved by hostRanks * k, or with
/// every peer XORed with hostRanks * k (recursive doubling's symmetry; checked on three ranks spread
/// over the call), else every rank, when n times rank 0's ops stay within `maxOps`; an error naming
/// the row otherwise.
Result<Recording> recordCall(const coll::AlgorithmRow& row, const CallSpec& spec, int hostRanks, size_t maxOps);

/// Where the kernel stand-ins note reductions and copies (the program being recorded, or null).
void noteCompute(Op::Kind kind, uint64_t bytes);

}  // namespace ferry::sim
