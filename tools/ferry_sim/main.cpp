// ferry-sim: ferry's own schedules on a modelled machine, in virtual time. Prints ferry-perf's
// table (size, count, time, algbw, busbw) per algorithm row and for the row the tuner's cost
// formulas choose; -J writes ferry-perf's JSON, one file per algorithm, for bench/plot.py.
//
//   build/tools/ferry-sim --topology tools/ferry_sim/topologies/dgx_h100_rail.ini --ranks 16384
//       all_reduce -b 8 -e 1G -f 2
//
// docs/SCALE.md describes the model, its symmetry folding and its limits.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/ferry_sim/sweep.hpp"

namespace {

using namespace ferry;
using namespace ferry::sim;

constexpr const char* kUsage =
    "usage: ferry-sim --topology FILE --ranks N [--algo NAME[,NAME...]] [--max-ops N] COLLECTIVE\n"
    "                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-d float32|float16|...] [-J OUT.json] [-j JOBS]\n"
    "  COLLECTIVE: all_reduce, reduce_scatter, all_gather, alltoall, broadcast, reduce\n"
    "  --algo: rows to simulate (ring, doubling, bruck, chain, pairwise, ..., choice); default: every row\n"
    "          that runs over messages, then the tuner's choice\n"
    "  -n ITERS: time per call of ITERS calls in a row, as ferry-perf -n times them (default 1: one call)\n"
    "  -J OUT.json: ferry-perf JSON per algorithm, OUT-ring.json, OUT-choice.json, ...\n"
    "  -j JOBS: sizes simulated at once (default: one per CPU, at most one per 4 GiB of memory)\n";

struct Args {
  std::string topology;
  int ranks = 0;
  std::vector<std::string> algos;
  CallKind kind = CallKind::kBarrier;
  size_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  DataType type = DataType::kFloat32;
  std::string json;
  size_t maxOps = 40'000'000;
  int iters = 1;
  int jobs = 0;  // 0: defaultJobs()
};

// A simulation of the largest calls (--max-ops ops) holds about 1.5 GB: one per CPU, as many as
// the memory holds with room to spare.
int defaultJobs() {
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  const double gib =
      pages > 0 && pageSize > 0 ? static_cast<double>(pages) * static_cast<double>(pageSize) / (1 << 30) : 4;
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(cpus, static_cast<int>(gib / 4)));
}

// fn(i) for every i in [0, count), on up to `jobs` threads; the largest i first (the costliest
// sizes start first, so that no thread is left with one at the end).
template <typename Fn>
void forEachSize(size_t count, int jobs, Fn fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < count;) fn(count - 1 - k);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(count, static_cast<size_t>(jobs)); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

bool parseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return false;
  double scale = 1;
  std::string unit(end);
  if (unit == "K" || unit == "k") scale = 1 << 10;
  else if (unit == "M" || unit == "m") scale = 1 << 20;
  else if (unit == "G" || unit == "g") scale = 1 << 30;
  else if (!unit.empty()) return false;
  *out = static_cast<size_t>(v * scale);
  return true;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(',', b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

bool parseArgs(int argc, char** argv, Args& a, std::string& why) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&](std::string& v) {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    std::string v;
    if (k == "-h" || k == "--help") {
      why = "";
      return false;
    } else if (k == "--topology" && next(v)) {
      a.topology = v;
    } else if (k == "--ranks" && next(v)) {
      a.ranks = std::atoi(v.c_str());
      if (a.ranks < 1) return why = "--ranks " + v + ": expected a rank count >= 1", false;
    } else if (k == "--algo" && next(v)) {
      a.algos = split(v);
    } else if (k == "--max-ops" && next(v)) {
      a.maxOps = std::strtoull(v.c_str(), nullptr, 10);
    } else if ((k == "-b" || k == "-e") && next(v)) {
      if (!parseSize(v, k == "-b" ? &a.minBytes : &a.maxBytes)) return why = k + " " + v + ": expected a size", false;
    } else if (k == "-n" && next(v)) {
      a.iters = std::atoi(v.c_str());
      if (a.iters < 1) return why = "-n " + v + ": expected a call count >= 1", false;
    } else if (k == "-f" && next(v)) {
      a.factor = std::atof(v.c_str());
      if (a.factor <= 1) return why = "-f " + v + ": expected a factor > 1", false;
    } else if (k == "-d" && next(v)) {
      bool known = false;
      for (int t = 0; t < 64 && !known; ++t) {
        if (isValidDataType(t) && v == dataTypeName(static_cast<DataType>(t)))
          a.type = static_cast<DataType>(t), known = true;
      }
      if (!known) return why = "-d " + v + ": expected a type name (" + dataTypeList() + ")", false;
    } else if (k == "-J" && next(v)) {
      a.json = v;
    } else if ((k == "-j" || k == "--jobs") && next(v)) {
      a.jobs = std::atoi(v.c_str());
      if (a.jobs < 1) return why = k + " " + v + ": expected a job count >= 1", false;
    } else if (!k.empty() && k[0] != '-' && a.kind == CallKind::kBarrier) {
      a.kind = parseCollective(k);
      if (a.kind == CallKind::kBarrier) return why = "collective '" + k + "': expected all_reduce, ...", false;
    } else {
      return why = "unexpected argument '" + k + "'", false;
    }
  }
  if (a.topology.empty() || a.ranks == 0 || a.kind == CallKind::kBarrier) {
    return why = "--topology, --ranks and a collective are required", false;
  }
  return true;
}

struct Series {
  std::string name;
  std::vector<SimPoint> points;
};

void printSeries(const Series& s, CallKind kind, DataType type) {
  std::printf("#\n# algorithm: %s\n", s.name.c_str());
  std::printf("#%12s  %12s  %8s  %6s  %-9s  %10s  %8s  %8s  %s\n", "size", "count", "type", "redop", "algorithm",
              "time", "algbw", "busbw", "simulated");
  std::printf("#%12s  %12s  %8s  %6s  %-9s  %10s  %8s  %8s  %s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "ranks");
  const bool reduces = kind == CallKind::kAllReduce || kind == CallKind::kReduceScatter || kind == CallKind::kReduce;
  for (const SimPoint& p : s.points) {
    if (!p.error.empty()) {
      std::printf(" %12zu  %12zu  %8s  %6s  %-9s  skipped: %s\n", p.bytes, p.count, dataTypeName(type),
                  reduces ? "sum" : "none", p.row.c_str(), p.error.c_str());
      continue;
    }
    std::printf(" %12zu  %12zu  %8s  %6s  %-9s  %10.2f  %8.2f  %8.2f  %d\n", p.bytes, p.count, dataTypeName(type),
                reduces ? "sum" : "none", p.row.c_str(), p.seconds * 1e6, p.algBw, p.busBw, p.period);
  }
}

std::string jsonString(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

bool writeJson(const std::string& path, const Series& s, const Args& a, const Topology& topo) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return false;
  const bool reduces =
      a.kind == CallKind::kAllReduce || a.kind == CallKind::kReduceScatter || a.kind == CallKind::kReduce;
  f << "{\"schema\": \"ferry-perf/1\", \"tool\": \"ferry-sim\", \"library\": " << jsonString("ferry-sim " + s.name)
    << ", \"host\": " << jsonString(topo.name) << ", \"nranks\": " << a.ranks << ", \"results\": [";
  bool first = true;
  for (const SimPoint& p : s.points) {
    if (!p.error.empty()) continue;
    char m[256];
    std::snprintf(m, sizeof(m), "{\"time\": %.9g, \"alg_bw\": %.9g, \"bus_bw\": %.9g, \"nwrong\": null}",
                  p.seconds * 1e6, p.algBw, p.busBw);
    f << (first ? "" : ", ") << "{\"collective\": \"" << collectiveName(a.kind) << "\", \"size\": " << p.bytes
      << ", \"count\": " << p.count << ", \"type\": \"" << dataTypeName(a.type) << "\", \"redop\": \""
      << (reduces ? "sum" : "none")
      << "\", \"root\": " << (a.kind == CallKind::kBroadcast || a.kind == CallKind::kReduce ? 0 : -1)
      << ", \"algorithm\": \"" << p.row << "\", \"simulated_ranks\": " << p.period << ", \"out_of_place\": " << m
      << ", \"in_place\": " << m << "}";
    first = false;
  }
  f << "], \"errors\": []}\n";
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  // Recording allocates and frees the same small objects for every rank: keep the heap's memory
  // instead of returning it to the kernel and faulting it back in.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  Args a;
  std::string why;
  if (!parseArgs(argc, argv, a, why)) {
    if (why.empty()) {
      std::printf("%s", kUsage);
      return 0;
    }
    std::fprintf(stderr, "ferry-sim: %s\n%s", why.c_str(), kUsage);
    return 2;
  }
  auto topo = Topology::load(a.topology);
  if (!topo.isOk()) {
    std::fprintf(stderr, "ferry-sim: %s\n", topo.status().message().c_str());
    return 2;
  }
  if (a.jobs == 0) a.jobs = defaultJobs();
  const auto start = std::chrono::steady_clock::now();
  std::vector<const coll::AlgorithmRow*> rows;
  bool wantChoice = a.algos.empty();
  for (const std::string& name : a.algos) {
    if (name == "choice") {
      wantChoice = true;
      continue;
    }
    const coll::AlgorithmRow* found = nullptr;
    for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
      if (row->kind == a.kind && recordable(*row) && name == coll::algorithmName(row->algorithm)) found = row;
    }
    if (found == nullptr) {
      std::fprintf(stderr, "ferry-sim: --algo %s: no row of %s over messages has that name (%s)\n", name.c_str(),
                   collectiveName(a.kind), coll::algorithmList().c_str());
      return 2;
    }
    rows.push_back(found);
  }
  if (a.algos.empty()) {
    for (const coll::AlgorithmRow* row : coll::algorithmTable()) {
      if (row->kind == a.kind && recordable(*row)) rows.push_back(row);
    }
  }
  std::vector<size_t> sizes;
  for (double b = static_cast<double>(a.minBytes); b <= static_cast<double>(a.maxBytes) * 1.0000001; b *= a.factor) {
    sizes.push_back(static_cast<size_t>(b));
  }
  std::printf("# ferry-sim: %s, %d ranks (%d per host, %d NICs of %.1f GB/s, intra %.1f GB/s), %s %s\n",
              topo->name.c_str(), a.ranks, topo->ranksPerHost, topo->nics, topo->nicBw / 1e9, topo->intraBw / 1e9,
              collectiveName(a.kind), dataTypeName(a.type));
  std::vector<Series> all;
  for (const coll::AlgorithmRow* row : rows) {
    Series s{coll::algorithmName(row->algorithm), {}};
    // The rails ring with one rail is the ring, step for step: it takes the ring's replay (the
    // table lists the ring first).
    const Series* ring = nullptr;
    if (row->algorithm == coll::Algorithm::kRails) {
      for (const Series& done : all) {
        if (done.name == "ring") ring = &done;
      }
    }
    s.points.resize(sizes.size());
    forEachSize(sizes.size(), a.jobs, [&](size_t i) {
      const size_t b = sizes[i];
      if (ring != nullptr &&
          railsOf(*topo, a.kind, perfCount(a.kind, b, dataTypeSize(a.type), a.ranks), a.type, a.ranks) == 1) {
        s.points[i] = ring->points[i];
        s.points[i].row = s.name;
      } else {
        s.points[i] = simulate(*topo, *row, a.kind, b, a.type, a.ranks, a.maxOps, a.iters);
      }
    });
    printSeries(s, a.kind, a.type);
    all.push_back(std::move(s));
  }
  if (wantChoice) {
    Series s{"choice", std::vector<SimPoint>(sizes.size())};
    forEachSize(sizes.size(), a.jobs, [&](size_t i) {
      const size_t b = sizes[i];
      const size_t count = perfCount(a.kind, b, dataTypeSize(a.type), a.ranks);
      const coll::AlgorithmRow* row = modelChoice(*topo, a.kind, count, a.type, a.ranks);
      SimPoint known;
      bool reused = false;
      for (const Series& done : all) {
        for (const SimPoint& p : done.points) {
          if (row != nullptr && p.bytes == b && p.row == coll::algorithmName(row->algorithm)) known = p, reused = true;
        }
      }
      if (row == nullptr) {
        known.bytes = b;
        known.error = "no row over messages applies";
      } else if (!reused) {
        known = simulate(*topo, *row, a.kind, b, a.type, a.ranks, a.maxOps, a.iters);
      }
      s.points[i] = known;
    });
    printSeries(s, a.kind, a.type);
    all.push_back(std::move(s));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("#\n# simulated in %.1f s of wall time\n", wall);
  if (!a.json.empty()) {
    const std::string stem =
        a.json.size() > 5 && a.json.ends_with(".json") ? a.json.substr(0, a.json.size() - 5) : a.json;
    for (const Series& s : all) {
      const std::string path = stem + "-" + s.name + ".json";
      if (!writeJson(path, s, a, *topo)) {
        std::fprintf(stderr, "ferry-sim: -J: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}
