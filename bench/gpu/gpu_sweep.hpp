// ferry-perf's GPU mode (--gpu-ranks N): N ranks in this one process, all on one CUDA device,
// created with Comm::initAll and driven by one host thread through the stream-ordered API.
//
// Why one thread. Each operation is issued for every rank between groupStart() and groupEnd()
// (NCCL's single-thread, several-GPU pattern), so the order in which the ranks are visited can
// never deadlock, and no host thread waits on another; each rank has its own non-blocking stream.
// --rank-threads instead gives each rank its own host thread issuing its own operations, without
// groups (as a multi-threaded application would): the alternative where groups are the problem.
//
// Timing is on the device, around all ranks together: an event on rank 0's stream starts the
// clock, every other stream waits for it, the -n x -m operations are issued, every stream joins
// rank 0's, and a second event stops the clock. The time per operation therefore includes the host's
// cost of issuing it whenever the host is the slower side (small sizes), as a user would see it.
// -a has nothing to combine and is ignored. With --graph the -n x -m operations of all ranks are
// captured once into one CUDA graph (rank 0's stream forks into the others), and one replay is
// timed; a replay before it is the warm-up.
//
// The check (-c) is the CPU mode's (check_values.hpp): inputs computed on the host, one thread per
// rank, copied to the device, one operation, results copied back and compared on the host.
//
// Table and JSON are the CPU mode's (report.hpp), with "cuda" as the JSON's device.
#pragma once

#include <string>
#include <vector>

#include "bench/perf/options.hpp"

namespace ferry::perf {

/// Run the sweep `options` describes with options.gpuRanks ranks on options.device. Returns the
/// exit status: 0 when every check passed, 1 when a value was wrong, an operation failed or there
/// is no CUDA device.
int runGpuSweep(const Options& options, const std::vector<std::string>& args, const std::string& tool);

}  // namespace ferry::perf
