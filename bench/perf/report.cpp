// Text and JSON output of a sweep. See report.hpp; docs/BENCHMARKS.md describes both formats.
#include "bench/perf/report.hpp"

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <fstream>

#include "bench/perf/dtypes.hpp"

extern char** environ;

namespace ferry::perf {
namespace {

#ifndef FERRY_PERF_VERSION
#define FERRY_PERF_VERSION "0.0.0"
#endif

std::string now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Variables that shape a run, without secrets (FERRY_SECRET keeps other jobs out).
bool reportedVariable(std::string_view name) {
  const bool ours = name.starts_with("FERRY_") || name.starts_with("UCX_") || name.starts_with("NCCL_");
  for (const char* word : {"SECRET", "TOKEN", "PASSWORD", "KEY"}) {
    if (name.find(word) != std::string_view::npos) return false;
  }
  return ours;
}

// nccl-tests' memory sizes: B, KB, MB, GB (powers of 1024), with 2, 1 or 0 decimals.
std::string memoryString(int64_t bytes) {
  double v = static_cast<double>(bytes);
  const char* unit = "B";
  if (std::fabs(v) >= 1024.0 * 1024 * 1024) v /= 1024.0 * 1024 * 1024, unit = "GB";
  else if (std::fabs(v) >= 1024.0 * 1024) v /= 1024.0 * 1024, unit = "MB";
  else if (std::fabs(v) >= 1024.0) v /= 1024.0, unit = "KB";
  const int decimals = std::fabs(v) < 10 ? 2 : std::fabs(v) < 100 ? 1 : 0;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, v, unit);
  return buf;
}

}  // namespace

std::string formatNumber(double value, int width) {
  int digits = 0;  // digits before the decimal point
  for (double p = 1; value >= p && digits < 40; p *= 10) ++digits;
  char buf[64];
  if (digits < width - 2) std::snprintf(buf, sizeof(buf), "%*.2f", width, value);
  else if (digits < width - 1) std::snprintf(buf, sizeof(buf), "%*.1f", width, value);
  else if (digits < width + 1) std::snprintf(buf, sizeof(buf), "%*.0f", width, value);
  else if (width >= 7) std::snprintf(buf, sizeof(buf), "%*.1e", width, value);
  else std::snprintf(buf, sizeof(buf), "%*.0e", width, value);
  return buf;
}

Report::Report(const Options& options, std::string tool, std::string library, int nranks, bool printer,
               std::vector<std::string> args, FILE* out)
    : options_(options), tool_(std::move(tool)), library_(std::move(library)), nranks_(nranks), printer_(printer),
      args_(std::move(args)), out_(out) {
  if (!printer_) return;
  const Options& o = options_;
  json_.beginObject()
      .field("schema", kJsonSchema)
      .field("tool", tool_)
      .field("tool_version", FERRY_PERF_VERSION)
      .field("library", library_)
      .field("start_time", now());
  json_.key("args").beginArray();
  for (const std::string& a : args_) json_.value(a);
  json_.endArray();
  json_.key("env").beginObject();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos && reportedVariable(kv.substr(0, eq)))
      json_.field(kv.substr(0, eq), kv.substr(eq + 1));
  }
  json_.endObject();
  json_.field("nranks", nranks_);
  json_.key("collectives").beginArray();
  for (Coll c : o.colls) json_.value(collInfo(c).name);
  json_.endArray();
  json_.key("config").beginObject().field("nthreads", 1).field("ngpus", o.gpuRanks > 0 ? o.gpuRanks : 1);
  json_.field("minimum_bytes", static_cast<uint64_t>(o.minBytes))
      .field("maximum_bytes", static_cast<uint64_t>(o.maxBytes));
  if (o.stepFactor > 1) json_.field("step_factor", static_cast<uint64_t>(o.stepFactor));
  else json_.field("step_bytes", static_cast<uint64_t>(o.stepBytes));
  json_.field("warmup_iters", o.warmupIters)
      .field("iterations", o.iters)
      .field("aggregated_iterations", o.aggIters)
      .field("run_cycles", o.runCycles)
      .field("validation", o.check)
      .field("blocking_collectives", o.blocking == 1)
      .field("local_register", o.localRegister)
      .field("average", o.average)
      .field("timeout", o.timeoutSeconds)
      .field("iter_budget", static_cast<uint64_t>(o.iterBudget))
      .field("datatype", o.type ? typeInfo(*o.type).ncclName : "all")
      .field("op", o.op ? opName(*o.op) : "all");
  json_.key("root");
  if (o.root < 0) json_.value("all");
  else json_.value(o.root);
  json_.endObject();
}

void Report::line(const char* fmt, ...) {
  if (!printer_) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(out_, fmt, ap);
  va_end(ap);
  std::fflush(out_);
}

void Report::header(const std::vector<RankInfo>& ranks) {
  if (!printer_) return;
  const Options& o = options_;
  line("# %s version %s, library %s\n", tool_.c_str(), FERRY_PERF_VERSION, library_.c_str());
  line(
      "# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d\n",
      o.gpuRanks > 0 ? o.gpuRanks : 1, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
      o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, o.graph ? 1 : 0);
  if (o.iterBudget > 0) {
    line("# Iteration budget: %s per size: fewer iterations where iters x agg iters x size exceeds it\n",
         formatBytes(o.iterBudget).c_str());
  }
  if (o.blocking == 1) line("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.localRegister == 1)
    line(
        "# Buffers: -R 1, from the library's allocator (ferry: hostAlloc, shared memory the ranks of a host map; MPI: "
        "MPI_Alloc_mem)\n");
  if (o.localRegister == 2)
    line("# Buffers: -R 2, posix_memalign, registered with the library (ferry: Comm::registerBuffer; others: not)\n");
  line("#\n# Using devices\n");
  for (const RankInfo& r : ranks) {
    line("#  Rank %2d Group %2d Pid %6d on %10s device %s\n", r.rank, 0, r.pid, r.host, r.device);
  }
  if (!o.jsonPath.empty()) line("#\n# Writing JSON output to %s\n", o.jsonPath.c_str());

  json_.field("host", ranks.empty() ? "" : ranks[0].host);
  json_.key("devices").beginArray();
  for (const RankInfo& r : ranks) {
    json_.beginObject()
        .field("rank", r.rank)
        .field("group", 0)
        .field("pid", r.pid)
        .field("hostname", r.host)
        .field("device", options_.gpuRanks > 0 ? "cuda" : "cpu")
        .field("device_info", r.device)
        .endObject();
  }
  json_.endArray();
  json_.key("results").beginArray();
  rowsOpen_ = true;
}

void Report::beginCollective(Coll coll) {
  summaries_.push_back({coll});
  line("#\n# Collective test starting: %s\n#\n", collInfo(coll).name);
  line("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "",
       "");
  line("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
       "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  line("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)",
       "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void Report::writeMeasurementJson(const char* key, const Measurement& m) {
  json_.key(key).beginObject();
  json_.field("time", m.seconds * 1e6).field("alg_bw", m.algBw).field("bus_bw", m.busBw);
  json_.key("nwrong");
  if (m.checked) json_.value(m.wrong);
  else json_.null();
  json_.key("wrong_per_rank");
  if (m.checked) {
    json_.beginArray();
    for (uint64_t w : m.wrongPerRank) json_.value(w);
    json_.endArray();
  } else {
    json_.null();
  }
  json_.field("iterations", m.iters)
      .field("warmup_iterations", m.warmupIters)
      .field("settle_iterations", m.settleIters);
  json_.endObject();
}

void Report::row(const Row& r) {
  const CollInfo& info = collInfo(r.coll);
  Summary& s = summaries_.back();
  for (const Measurement* m : {&r.outOfPlace, &r.inPlace}) {
    s.busBwSum += m->busBw;
    ++s.busBwCount;
    busBwSum_ += m->busBw;
    ++busBwCount_;
    for (uint64_t w : m->wrongPerRank) {
      s.errors += w > 0;
      totalErrors_ += w > 0;
    }
  }
  if (!printer_) return;
  std::string text;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%12zu  %12zu  %8s  %6s  %6i", r.bytes, r.count, typeInfo(r.type).ncclName,
                info.listsOp ? opName(r.op) : "none", r.root);
  text += buf;
  for (const Measurement* m : {&r.outOfPlace, &r.inPlace}) {
    std::string wrong = "N/A";
    if (m->checked) std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(m->wrong)), wrong = buf;
    std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %6s", formatNumber(m->seconds * 1e6, 7).c_str(),
                  formatNumber(m->algBw, 6).c_str(), formatNumber(m->busBw, 6).c_str(), wrong.c_str());
    text += buf;
  }
  line("%s\n", text.c_str());
  for (const auto& [name, m] : {std::pair{"out-of-place", &r.outOfPlace}, std::pair{"in-place", &r.inPlace}}) {
    if (!m->checked || m->wrong == 0) continue;
    std::string perRank;
    for (size_t i = 0; i < m->wrongPerRank.size(); ++i) perRank += " " + std::to_string(m->wrongPerRank[i]);
    line("#   wrong elements per rank (%s):%s\n", name, perRank.c_str());
  }

  json_.beginObject()
      .field("collective", info.name)
      .field("size", static_cast<uint64_t>(r.bytes))
      .field("count", static_cast<uint64_t>(r.count))
      .field("type", typeInfo(r.type).ncclName)
      .field("redop", info.listsOp ? opName(r.op) : "none")
      .field("root", r.root);
  writeMeasurementJson("out_of_place", r.outOfPlace);
  writeMeasurementJson("in_place", r.inPlace);
  json_.endObject();
}

void Report::skipped(Coll coll, DataType type, RedOp op, const std::string& library) {
  if (collInfo(coll).reduces) {
    line("# skipping %s %s: %s does not run it\n", typeInfo(type).ncclName, opName(op), library.c_str());
  } else {
    line("# skipping %s: %s does not run it\n", typeInfo(type).ncclName, library.c_str());
  }
}

void Report::endCollective() {
  const Summary& s = summaries_.back();
  line("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(s.errors), s.errors ? "FAILED" : "OK");
  line("# %-20s : %g \n", "Avg bus bandwidth", s.busBwCount ? s.busBwSum / s.busBwCount : 0.0);
  line("#\n# Collective test concluded: %s\n", collInfo(s.coll).name);
}

void Report::memory(const MemoryUse& use) {
  hasMemory_ = true;
  memory_ = use;
  line("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total %s\n", "Host memory usage",
       memoryString(use.initialization).c_str(), memoryString(use.buffers).c_str(),
       memoryString(use.collective).c_str(), memoryString(use.initialization + use.buffers + use.collective).c_str());
}

void Report::registration(double seconds, size_t bytesEach) {
  line("# %-20s : 2 buffers of %s in %.3f ms (slowest rank), %.2f GB/s\n", "Registration",
       formatBytes(bytesEach).c_str(), seconds * 1e3,
       seconds > 0 ? 2.0 * static_cast<double>(bytesEach) / seconds / 1e9 : 0.0);
}

void Report::error(const std::string& message) {
  errors_.push_back(message);
  line("# error: %s\n", message.c_str());
}

bool Report::finish() {
  if (!printer_) return true;
  line("#\n%s", errors_.empty() ? "\n" : "");
  if (rowsOpen_) {
    json_.endArray();
  } else {  // the sweep stopped before the header: keep every documented key
    json_.field("host", "").key("devices").beginArray().endArray();
    json_.key("results").beginArray().endArray();
  }
  json_.key("per_collective").beginArray();
  for (const Summary& s : summaries_) {
    json_.beginObject().field("collective", collInfo(s.coll).name);
    json_.key("out_of_bounds").beginObject().field("count", s.errors).field("okay", s.errors == 0).endObject();
    json_.key("average_bus_bandwidth").beginObject();
    json_.field("bandwidth", s.busBwCount ? s.busBwSum / s.busBwCount : 0.0).field("okay", "unchecked").endObject();
    json_.endObject();
  }
  json_.endArray();
  json_.key("out_of_bounds").beginObject().field("count", totalErrors_).field("okay", totalErrors_ == 0).endObject();
  json_.key("average_bus_bandwidth").beginObject();
  json_.field("bandwidth", busBwCount_ ? busBwSum_ / busBwCount_ : 0.0).field("okay", "unchecked").endObject();
  json_.key("memory");
  if (hasMemory_) {
    json_.beginObject()
        .field("initialization", memory_.initialization)
        .field("user_allocated", memory_.buffers)
        .field("collective", memory_.collective)
        .endObject();
  } else {
    json_.null();
  }
  json_.key("errors").beginArray();
  for (const std::string& e : errors_) json_.value(e);
  json_.endArray();
  json_.field("end_time", now()).endObject();

  if (options_.jsonPath.empty()) return true;
  std::ofstream f(options_.jsonPath, std::ios::trunc);
  f << json_.str();
  f.close();
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", tool_.c_str(), options_.jsonPath.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace ferry::perf
