// ferry-perf's command line: nccl-tests' flags, with their short and long names and meanings, and
// a few extensions (long names only). parseOptions() never exits or prints: a bad flag comes back
// as an error naming the flag, the value and what was expected; the caller prints it with usage().
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "ferry/types.hpp"
#include "bench/perf/collectives.hpp"

namespace ferry::perf {

/// Everything a sweep needs to know. Defaults are nccl-tests'.
struct Options {
  std::vector<Coll> colls;                            ///< positional: a collective, or "all" for every one
  size_t minBytes = 32u << 20;                        ///< -b
  size_t maxBytes = 32u << 20;                        ///< -e
  size_t stepBytes = 1u << 20;                        ///< -i: used when the step factor is 1
  size_t stepFactor = 1;                              ///< -f: sizes multiply by this when > 1
  int iters = 20;                                     ///< -n: timed iterations per size
  int warmupIters = 5;                                ///< -w: untimed iterations before them
  int aggIters = 1;                                   ///< -m: operations per iteration
  int runCycles = 1;                                  ///< -N: repeat the whole sweep; 0 repeats forever
  int check = 1;                                      ///< -c: checked runs per size (0 disables the check)
  std::optional<RedOp> op = RedOp::kSum;              ///< -o: nullopt = all ops
  std::optional<DataType> type = DataType::kFloat32;  ///< -d: nullopt = all types
  int root = 0;                                       ///< -r: -1 = every rank in turn
  int blocking = 0;                                   ///< -z: 1 adds a barrier after every operation
  int localRegister = 0;   ///< -R: 1 allocates the host buffers with ferry::hostAlloc, 2 registers posix_memalign ones
  int timeoutSeconds = 0;  ///< -T: 0 = no limit beyond FERRY_TIMEOUT
  int average = 1;         ///< -a: time across ranks: 0 rank 0, 1 mean, 2 min, 3 max
  std::string jsonPath;    ///< -J
  bool memoryReport = false;      ///< -M
  size_t iterBudget = 0;          ///< --iter_budget: 0 = always -n and -w iterations
  int gpuRanks = 0;               ///< --gpu-ranks: >0 runs that many ranks in this process on CUDA
  int device = 0;                 ///< --device: the CUDA device every GPU rank uses
  bool graph = false;             ///< --graph: time replays of a CUDA graph of the -n operations
  bool rankThreads = false;       ///< --rank-threads: one host thread per GPU rank instead of groups
  std::string referenceRun;       ///< --reference-run: digests of the checked outputs (reference_run.hpp)
  bool referenceRunFull = false;  ///< --reference-run-full: keep every output's bytes in the file
  bool spreadInputs = false;      ///< --reference-inputs spread: order-dependent float reductions
  bool help = false;              ///< -h: print usage and exit 0

  /// Timed iterations at a size of `bytes`: -n, or fewer so that iterations x -m x bytes stays
  /// within the budget, and at least 1.
  int itersFor(size_t bytes) const;
  /// Warm-up iterations at `bytes`: -w, capped by the budget the same way (at least 1 if -w > 0).
  int warmupFor(size_t bytes) const;
  /// The sizes of the sweep, in order.
  std::vector<size_t> sizes() const;
};

/// Parse argv[1..] (without the program name).
Result<Options> parseOptions(const std::vector<std::string>& args);

/// The name -o takes and the table prints for `op`: nccl-tests' ("sum" ... "avg"), then "band",
/// "bor", "bxor"; "?" for a value outside the enum.
const char* opName(RedOp op);
/// Whether `op` runs on `type`: the bitwise ops on the integer types only, the others on every type.
bool opRunsOn(RedOp op, DataType type);
/// The usage text, naming the program as `program`.
std::string usage(const std::string& program);
/// "8", "64K", "1.5M", "2G" (powers of 1024) as bytes.
Result<size_t> parseSize(const std::string& flag, const std::string& text);
/// Sizes for people: "8 B", "64 KiB", "256 MiB".
std::string formatBytes(size_t bytes);

}  // namespace ferry::perf
