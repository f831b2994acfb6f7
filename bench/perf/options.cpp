// Command-line parsing. See options.hpp; docs/BENCHMARKS.md lists every flag.
//
// Accepted forms, as getopt_long accepts them: "-b 8", "-b8", "--minbytes 8", "--minbytes=8".
// Unlike nccl-tests, a value that does not parse is an error naming the flag rather than a
// silent default, and flags that only make sense on GPUs (-t, -g) are accepted with their
// single-device value 1 only, so existing scripts run unchanged.
#include "bench/perf/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "bench/perf/dtypes.hpp"

namespace ferry::perf {
namespace {

Status usageError(const std::string& message) { return Status(ErrorCode::kInvalidArgument, message); }

Result<long> parseInteger(const std::string& flag, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    return usageError(flag + " '" + text + "' is not valid: expected an integer from " + std::to_string(min) + " to " +
                      std::to_string(max));
  }
  return v;
}

// The ops -o takes, in RedOp order: nccl-tests' names, then ferry's bitwise ops (integers only).
// The benchmark core links no ferry library, so it keeps this table of its own.
struct OpRow {
  const char* name;
  RedOp op;
  bool integerOnly;
};
constexpr OpRow kOps[] = {
    {"sum", RedOp::kSum, false}, {"prod", RedOp::kProd, false}, {"max", RedOp::kMax, false},
    {"min", RedOp::kMin, false}, {"avg", RedOp::kAvg, false},   {"band", RedOp::kBand, true},
    {"bor", RedOp::kBor, true},  {"bxor", RedOp::kBxor, true},
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == static_cast<size_t>(kNumRedOps));

// "int8, uint8, ...": the types the integer-only ops take, from the type table.
std::string integerTypes() {
  std::string s;
  for (DataType t : allTypes()) {
    if (!typeInfo(t).isFloat) s += (s.empty() ? "" : ", ") + std::string(typeInfo(t).ferryName);
  }
  return s;
}

Result<std::optional<RedOp>> parseOp(const std::string& flag, const std::string& text) {
  if (text == "all") return std::optional<RedOp>();
  std::string names;
  for (const OpRow& o : kOps) {
    if (text == o.name) return std::optional<RedOp>(o.op);
    names += std::string(names.empty() ? "" : ", ") + o.name;
  }
  if (text == "mulsum") return usageError(flag + " 'mulsum' is not supported: ferry has no pre-multiplied sum");
  return usageError(flag + " '" + text + "' is not an op: expected " + names + " or all");
}

Result<std::optional<DataType>> parseType(const std::string& flag, const std::string& text) {
  if (text == "all") return std::optional<DataType>();
  if (auto t = parseTypeName(text)) return std::optional<DataType>(*t);
  return usageError(flag + " '" + text +
                    "' is not a type: expected int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                    "bfloat16 (or float16, float32, float64) or all");
}

// One flag of the table below: its names, and whether it takes a value (all but -h do).
struct Flag {
  char shortName;
  const char* longName;
};

constexpr Flag kFlags[] = {
    {'t', "nthreads"},          {'g', "ngpus"},       {'b', "minbytes"},      {'e', "maxbytes"},
    {'i', "stepbytes"},         {'f', "stepfactor"},  {'n', "iters"},         {'m', "agg_iters"},
    {'w', "warmup_iters"},      {'N', "run_cycles"},  {'c', "check"},         {'o', "op"},
    {'d', "datatype"},          {'r', "root"},        {'z', "blocking"},      {'T', "timeout"},
    {'a', "average"},           {'J', "output_file"}, {'M', "memory_report"}, {'R', "local_register"},
    {'\0', "iter_budget"},      {'\0', "gpu-ranks"},  {'\0', "device"},       {'\0', "reference-run"},
    {'\0', "reference-inputs"},
};

// Apply one flag with its value to `o`.
Status apply(Options& o, const Flag& f, const std::string& shown, const std::string& value) {
  auto integer = [&](long min, long max) { return parseInteger(shown, value, min, max); };
  switch (f.shortName) {
    case 't':
    case 'g': {
      auto v = integer(1, 1 << 20);
      FERRY_TRY(v);
      if (*v != 1) {
        return usageError(shown + " " + value +
                          ": ferry-perf drives one rank per process; start more ranks with the launcher instead");
      }
      return Status::ok();
    }
    case 'b': {
      auto v = parseSize(shown, value);
      FERRY_TRY(v);
      o.minBytes = *v;
      return Status::ok();
    }
    case 'e': {
      auto v = parseSize(shown, value);
      FERRY_TRY(v);
      o.maxBytes = *v;
      return Status::ok();
    }
    case 'i': {
      auto v = parseSize(shown, value);
      FERRY_TRY(v);
      o.stepBytes = *v;
      return Status::ok();
    }
    case 'f': {
      auto v = integer(1, 1 << 20);
      FERRY_TRY(v);
      o.stepFactor = static_cast<size_t>(*v);
      return Status::ok();
    }
    case 'n': {
      auto v = integer(1, 1 << 30);
      FERRY_TRY(v);
      o.iters = static_cast<int>(*v);
      return Status::ok();
    }
    case 'm': {
      auto v = integer(1, 1 << 20);
      FERRY_TRY(v);
      o.aggIters = static_cast<int>(*v);
      return Status::ok();
    }
    case 'w': {
      auto v = integer(0, 1 << 30);
      FERRY_TRY(v);
      o.warmupIters = static_cast<int>(*v);
      return Status::ok();
    }
    case 'N': {
      auto v = integer(0, 1 << 30);
      FERRY_TRY(v);
      o.runCycles = static_cast<int>(*v);
      return Status::ok();
    }
    case 'c': {
      auto v = integer(0, 1 << 20);
      FERRY_TRY(v);
      o.check = static_cast<int>(*v);
      return Status::ok();
    }
    case 'z': {
      auto v = integer(0, 1);
      FERRY_TRY(v);
      o.blocking = static_cast<int>(*v);
      return Status::ok();
    }
    case 'R': {
      auto v = integer(0, 2);
      FERRY_TRY(v);
      o.localRegister = static_cast<int>(*v);
      return Status::ok();
    }
    case 'T': {
      auto v = integer(0, 1 << 30);
      FERRY_TRY(v);
      o.timeoutSeconds = static_cast<int>(*v);
      return Status::ok();
    }
    case 'a': {
      auto v = integer(0, 3);
      FERRY_TRY(v);
      o.average = static_cast<int>(*v);
      return Status::ok();
    }
    case 'M': {
      auto v = integer(0, 1);
      FERRY_TRY(v);
      o.memoryReport = *v == 1;
      return Status::ok();
    }
    case 'o': {
      auto v = parseOp(shown, value);
      FERRY_TRY(v);
      o.op = *v;
      return Status::ok();
    }
    case 'd': {
      auto v = parseType(shown, value);
      FERRY_TRY(v);
      o.type = *v;
      return Status::ok();
    }
    case 'r': {
      if (value == "all") {
        o.root = -1;
        return Status::ok();
      }
      auto v = integer(-1, 1 << 30);
      FERRY_TRY(v);
      o.root = static_cast<int>(*v);
      return Status::ok();
    }
    case 'J':
      if (value.empty()) return usageError(shown + " needs a file name");
      o.jsonPath = value;
      return Status::ok();
    case '\0': break;  // the long-only extensions, below
  }
  const std::string name = f.longName;
  if (name == "iter_budget") {
    auto v = parseSize(shown, value);
    FERRY_TRY(v);
    o.iterBudget = *v;
    return Status::ok();
  }
  if (name == "gpu-ranks") {
    auto v = integer(1, 1024);
    FERRY_TRY(v);
    o.gpuRanks = static_cast<int>(*v);
    return Status::ok();
  }
  if (name == "reference-run") {
    if (value.empty()) return usageError(shown + " needs a file name");
    o.referenceRun = value;
    return Status::ok();
  }
  if (name == "reference-inputs") {
    if (value != "exact" && value != "spread") {
      return usageError(shown + " " + value +
                        ": expected exact (the -c check's values) or spread (magnitudes over "
                        "many binades, whose sums depend on the order)");
    }
    o.spreadInputs = value == "spread";
    return Status::ok();
  }
  if (name == "device") {
    auto v = integer(0, 1023);
    FERRY_TRY(v);
    o.device = static_cast<int>(*v);
    return Status::ok();
  }
  return usageError("unhandled flag " + shown);
}

Status validate(const Options& o) {
  if (o.colls.empty())
    return usageError(
        "no collective given: expected one of all_reduce, reduce_scatter, all_gather, alltoall, broadcast, reduce, "
        "sendrecv or all");
  if (o.minBytes > o.maxBytes) {
    return usageError("-b " + std::to_string(o.minBytes) + " is larger than -e " + std::to_string(o.maxBytes));
  }
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes < o.maxBytes) {
    return usageError("-i 0 without -f would never reach -e: give a step size or a step factor");
  }
  if (!o.referenceRun.empty() && o.gpuRanks > 0) {
    return usageError("--reference-run is not supported with --gpu-ranks (the host sweep's outputs only)");
  }
  if (!o.referenceRun.empty() && o.check == 0) return usageError("--reference-run needs -c 1 or more");
  if (o.referenceRun.empty() && (o.referenceRunFull || o.spreadInputs)) {
    return usageError(std::string(o.spreadInputs ? "--reference-inputs" : "--reference-run-full") +
                      " needs --reference-run FILE");
  }
  if (o.graph && o.gpuRanks == 0) return usageError("--graph needs --gpu-ranks: only GPU ranks run from a CUDA graph");
  if (o.rankThreads && o.gpuRanks == 0) return usageError("--rank-threads needs --gpu-ranks");
  if (o.rankThreads && o.graph)
    return usageError("--rank-threads and --graph do not combine: the graph is captured by one thread");
  if (o.gpuRanks > 0 && o.blocking != 0) return usageError("-z 1 is not supported with --gpu-ranks");
  if (o.gpuRanks > 0 && o.localRegister != 0)
    return usageError("-R 1 and 2 are for host buffers; not supported with --gpu-ranks");
  if (o.gpuRanks > 0 && o.timeoutSeconds != 0) return usageError("-T is not supported with --gpu-ranks");
  if (o.op && o.type && !opRunsOn(*o.op, *o.type)) {
    return usageError(std::string("-o ") + opName(*o.op) + " needs an integer type (" + integerTypes() + "), got -d " +
                      typeInfo(*o.type).ferryName);
  }
  return Status::ok();
}

}  // namespace

const char* opName(RedOp op) {
  const auto v = static_cast<size_t>(op);
  return v < std::size(kOps) ? kOps[v].name : "?";
}

bool opRunsOn(RedOp op, DataType type) {
  const auto v = static_cast<size_t>(op);
  return v < std::size(kOps) && (!kOps[v].integerOnly || !typeInfo(type).isFloat);
}

int Options::itersFor(size_t bytes) const {
  if (iterBudget == 0 || bytes == 0) return iters;
  const size_t fit = iterBudget / (bytes * static_cast<size_t>(aggIters));
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(fit, static_cast<size_t>(iters))));
}

int Options::warmupFor(size_t bytes) const {
  if (iterBudget == 0 || bytes == 0 || warmupIters == 0) return warmupIters;
  const size_t fit = iterBudget / bytes;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(fit, static_cast<size_t>(warmupIters))));
}

std::vector<size_t> Options::sizes() const {
  std::vector<size_t> out;
  for (size_t s = minBytes; s <= maxBytes;) {
    out.push_back(s);
    size_t next = stepFactor > 1 ? s * stepFactor : s + stepBytes;
    if (stepFactor > 1 && s == 0) next = 1;  // 0 x factor would never grow
    if (next <= s) break;                    // overflow, or a zero step at the end
    s = next;
  }
  return out;
}

Result<size_t> parseSize(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  double unit = 1;
  std::string suffix = end ? end : "";
  if (suffix == "K" || suffix == "k") unit = 1024.0;
  else if (suffix == "M" || suffix == "m") unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") unit = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) end = nullptr;
  const double bytes = v * unit;
  if (text.empty() || end == text.c_str() || end == nullptr || errno != 0 || !std::isfinite(v) || v < 0 ||
      bytes > 1e18) {
    return usageError(flag + " '" + text + "' is not a size: expected a number of bytes with an optional K, M or G");
  }
  return static_cast<size_t>(bytes);
}

std::string formatBytes(size_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (v == std::floor(v)) std::snprintf(buf, sizeof(buf), "%.0f %s", v, kUnits[u]);
  else std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

Result<Options> parseOptions(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--graph" || a == "--rank-threads" || a == "--reference-run-full") {  // the extensions without a value
      (a == "--graph" ? o.graph : a == "--rank-threads" ? o.rankThreads : o.referenceRunFull) = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || a == "--") {  // a positional argument: a collective
      if (a == "all") {
        o.colls.assign(allColls().begin(), allColls().end());
        continue;
      }
      auto c = parseCollName(a);
      if (!c)
        return usageError("'" + a +
                          "' is not a collective: expected all_reduce, reduce_scatter, all_gather, alltoall, "
                          "broadcast, reduce, sendrecv or all");
      o.colls.push_back(*c);
      continue;
    }
    const Flag* flag = nullptr;
    std::string value;
    bool hasValue = false;
    if (a[1] == '-') {  // --name or --name=value
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      for (const Flag& f : kFlags) {
        if (name == f.longName) flag = &f;
      }
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        hasValue = true;
      }
    } else {  // -x or -xVALUE
      for (const Flag& f : kFlags) {
        if (f.shortName != '\0' && a[1] == f.shortName) flag = &f;
      }
      if (a.size() > 2) {
        value = a.substr(2);
        hasValue = true;
      }
    }
    if (flag == nullptr) return usageError("unknown flag '" + a + "'");
    const std::string shown = a[1] == '-' ? a.substr(0, a.find('=')) : a.substr(0, 2);
    if (!hasValue) {
      if (i + 1 >= args.size()) return usageError(shown + " needs a value");
      value = args[++i];
    }
    FERRY_TRY(apply(o, *flag, shown, value));
  }
  FERRY_TRY(validate(o));
  return o;
}

std::string usage(const std::string& program) {
  return "usage: " + program +
         " COLLECTIVE [flags]\n"
         "COLLECTIVE: all_reduce, reduce_scatter, all_gather, alltoall, broadcast, reduce, sendrecv, or all.\n"
         "Ranks come from the launcher (ferryrun, torchrun, mpirun, srun). Flags, as nccl-tests':\n"
         "  -b,--minbytes <size>        smallest size (default 32M; K, M, G suffixes)\n"
         "  -e,--maxbytes <size>        largest size (default 32M)\n"
         "  -i,--stepbytes <size>       add this between sizes (default 1M)\n"
         "  -f,--stepfactor <n>         multiply sizes by n instead (default: off)\n"
         "  -n,--iters <n>              timed iterations per size (default 20)\n"
         "  -w,--warmup_iters <n>       untimed iterations before them (default 5)\n"
         "  -m,--agg_iters <n>          operations per iteration (default 1)\n"
         "  -N,--run_cycles <n>         run the sweep n times, 0 = forever (default 1)\n"
         "  -c,--check <n>              checked runs per size, 0 = no check (default 1)\n"
         "  -o,--op <sum/prod/min/max/avg/band/bor/bxor/all>  reduction (default sum; all: sum..avg, as nccl-tests)\n"
         "  -d,--datatype <type/all>    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 (default "
         "float)\n"
         "  -r,--root <rank/all>        root of broadcast and reduce (default 0)\n"
         "  -z,--blocking <0/1>         1: barrier after every operation (calls are always blocking on host)\n"
         "  -R,--local_register <0/1/2> 1: host buffers from the library's allocator: ferry::hostAlloc (shared\n"
         "                              memory the ranks of a host map), MPI_Alloc_mem; 2: posix_memalign buffers\n"
         "                              registered (ferry: Comm::registerBuffer; others: as 0) (default 0: "
         "posix_memalign)\n"
         "  -T,--timeout <seconds>      abort an operation that takes longer (default 0: none)\n"
         "  -a,--average <0/1/2/3>      time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
         "  -J,--output_file <file>     also write the results as JSON (docs/BENCHMARKS.md)\n"
         "  -M,--memory_report <0/1>    report host memory use (default 0)\n"
         "  -t,--nthreads 1, -g,--ngpus 1   accepted for nccl-tests scripts; one rank per process\n"
         "ferry-perf extensions:\n"
         "  --iter_budget <size>        cap -n and -w per size so that iterations x -m x size <= budget\n"
         "  --gpu-ranks <n>             run n ranks in this process on CUDA (Comm::initAll), no launcher\n"
         "  --device <id>               the CUDA device all of them use (default 0)\n"
         "  --graph                     with --gpu-ranks: time replays of a CUDA graph of -n operations\n"
         "  --rank-threads              with --gpu-ranks: one host thread per rank instead of one thread and groups\n"
         "  --reference-run <file>      save a digest of every checked output to <file>.rank<R>, or compare with it\n"
         "                              where it exists: a mismatch names the first differing element (or chunk)\n"
         "  --reference-run-full        keep every output's bytes in the file, not only those up to 64 KiB\n"
         "  --reference-inputs <exact/spread>  spread: reductions of floats get values over many binades, whose\n"
         "                              result depends on the order of the ranks (checked by the digest only)\n"
         "  -h,--help                   this text\n"
         "Exit status: 0 when every checked value is right, 1 when one is wrong or an operation failed, 2 for bad "
         "usage.\n";
}

}  // namespace ferry::perf
