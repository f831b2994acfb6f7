// The benchmark loop, shared by ferry-perf and mpi-perf (each supplies a Backend).
//
// For every collective, type, op and root the options select, and every size of the sweep, it
// measures out-of-place then in-place, as nccl-tests does:
//   warm-up   -w iterations (fewer under --iter_budget), untimed; with a library that measures
//             candidate plans on its first calls (Backend::measuredCalls), more until it has kept
//             one, then -w more of the kept plan on the same buffers;
//   timing    a barrier, then -n iterations of -m operations each; time per operation = elapsed /
//             (n x m) on each rank, combined across ranks as -a says (default: the mean);
//             successive operations shift through the buffers like nccl-tests' (avoids measuring
//             one cache-resident region);
//   check     -c times: fresh inputs (check_values.hpp), one operation, every rank counts its
//             wrong elements; the table shows the sum, the JSON every rank's count.
// -z 1 adds a barrier after every operation. -T arms a watchdog that aborts the communicator when
// one operation takes longer than that many seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/perf/backend.hpp"
#include "bench/perf/options.hpp"

namespace ferry::perf {

/// Run the benchmark on this rank. `args` is the command line (for the JSON);
/// `residentBeforeInit` the resident bytes before the library was initialized (for -M).
/// `tool` names the program in messages and the JSON ("ferry-perf", "mpi-perf").
/// Returns the exit status: 0 when every check passed, 1 when a value was wrong or an operation
/// failed, 2 when the options do not fit the job (a root that is not a rank).
int runSweep(const Options& options, Backend& backend, const std::vector<std::string>& args, int64_t residentBeforeInit,
             const std::string& tool);

}  // namespace ferry::perf
