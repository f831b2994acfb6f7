// Output of a sweep, on rank 0: nccl-tests' text layout on stdout (header lines, one line per rank,
// the out-of-place / in-place table, the footer), and the same results as JSON (-J), whose schema
// docs/BENCHMARKS.md documents. Lines other than table rows start with '#', as nccl-tests', so
// existing parsers read the table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/perf/collectives.hpp"
#include "bench/perf/json_writer.hpp"
#include "bench/perf/options.hpp"

namespace ferry::perf {

/// The JSON schema this version writes (docs/BENCHMARKS.md).
inline constexpr const char* kJsonSchema = "ferry-perf/1";

/// One rank's line of the "Using devices" block.
struct RankInfo {
  int rank = 0;
  int pid = 0;
  char host[64] = {};
  char device[96] = {};  ///< "cpu" followed by the processor model
};

/// One measurement: out-of-place or in-place at one size.
struct Measurement {
  double seconds = 0;    ///< per operation, combined across ranks as -a says
  double algBw = 0;      ///< GB/s
  double busBw = 0;      ///< GB/s
  bool checked = false;  ///< false: #wrong is N/A (no -c, or no defined in-place result)
  uint64_t wrong = 0;    ///< wrong elements, all ranks together
  std::vector<uint64_t> wrongPerRank;
  int iters = 0;  ///< timed iterations (before -m)
  int warmupIters = 0;
  int settleIters = 0;  ///< warm-up calls past -w: while the library measured plans, then -w of the kept plan
};

/// One table row.
struct Row {
  Coll coll;
  size_t bytes;
  size_t count;
  DataType type;
  RedOp op;
  int root;  ///< -1 where the collective has none
  Measurement outOfPlace;
  Measurement inPlace;
};

/// Host memory use in bytes, each the largest over the ranks (-M).
struct MemoryUse {
  int64_t initialization = 0;  ///< resident growth while joining the communicator
  int64_t buffers = 0;         ///< the benchmark's send and receive buffers
  int64_t collective = 0;      ///< peak growth after that, while running
};

/// nccl-tests' number format for a column `width` wide: two decimals while they fit, then one,
/// then none, then exponent notation.
std::string formatNumber(double value, int width);

class Report {
 public:
  /// `printer` is true on rank 0 only; other ranks record nothing.
  /// `tool`: "ferry-perf" or "mpi-perf"; `library`: what the backend measures.
  Report(const Options& options, std::string tool, std::string library, int nranks, bool printer,
         std::vector<std::string> args, FILE* out = stdout);

  /// Parameters and the "Using devices" block (every rank's line, in rank order).
  void header(const std::vector<RankInfo>& ranks);
  void beginCollective(Coll coll);
  void row(const Row& r);
  /// A type and op the library does not run (-d all / -o all): one comment line.
  void skipped(Coll coll, DataType type, RedOp op, const std::string& library);
  /// Footer of the current collective: out-of-bounds count and average bus bandwidth.
  void endCollective();
  void memory(const MemoryUse& use);
  /// -R 2: how long registering the two buffers of `bytesEach` took, the slowest rank's time.
  void registration(double seconds, size_t bytesEach);
  /// A failure that stopped the sweep: printed, and recorded in the JSON's errors.
  void error(const std::string& message);
  /// Last lines; writes the JSON file if -J was given. Returns false if it could not.
  bool finish();

  /// Measurements with wrong values so far (per rank, as nccl-tests counts them).
  int64_t outOfBounds() const { return totalErrors_; }
  /// The JSON document (complete after finish()).
  const std::string& json() const { return json_.str(); }

 private:
  void writeMeasurementJson(const char* key, const Measurement& m);
  void line(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  const Options& options_;
  std::string tool_;
  std::string library_;
  int nranks_;
  bool printer_;
  std::vector<std::string> args_;
  FILE* out_;
  JsonWriter json_;
  bool rowsOpen_ = false;

  // Per collective, and for the whole run.
  struct Summary {
    Coll coll;
    int64_t errors = 0;
    double busBwSum = 0;
    int busBwCount = 0;
  };
  std::vector<Summary> summaries_;
  int64_t totalErrors_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  std::vector<std::string> errors_;
  bool hasMemory_ = false;
  MemoryUse memory_;
};

}  // namespace ferry::perf
