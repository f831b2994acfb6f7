// ferry-perf: collective bandwidth benchmark with nccl-tests' table layout.
//
// Runs under any launcher ferry understands (ranks from the environment). For each size it times
// `iters` calls after `warmup` calls, out-of-place then in-place, and prints time per call, algbw
// (bytes / time) and busbw (algbw × the collective's bus factor, nccl-tests' definition: all_reduce
// 2(n-1)/n), with the number of wrong elements from a check of the last result.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  int factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
};

size_t parseSize(const char* flag, const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  double mult = 1;
  if (end != nullptr && *end != '\0') {
    switch (*end) {
      case 'K': case 'k': mult = 1024.0; break;
      case 'M': case 'm': mult = 1024.0 * 1024; break;
      case 'G': case 'g': mult = 1024.0 * 1024 * 1024; break;
      default:
        std::fprintf(stderr, "ferry-perf: %s '%s' is not a size (expected a number with optional K, M or G)\n", flag, text);
        std::exit(2);
    }
  }
  if (end == text || v < 0) {
    std::fprintf(stderr, "ferry-perf: %s '%s' is not a size (expected a number with optional K, M or G)\n", flag, text);
    std::exit(2);
  }
  return static_cast<size_t>(v * mult);
}

int parseInt(const char* flag, const char* text, int min) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min) {
    std::fprintf(stderr, "ferry-perf: %s '%s' is invalid (expected an integer >= %d)\n", flag, text, min);
    std::exit(2);
  }
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "all_reduce") continue;
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ferry-perf: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-b" || a == "--minbytes") o.minBytes = parseSize(a.c_str(), value());
    else if (a == "-e" || a == "--maxbytes") o.maxBytes = parseSize(a.c_str(), value());
    else if (a == "-f" || a == "--stepfactor") o.factor = parseInt(a.c_str(), value(), 2);
    else if (a == "-n" || a == "--iters") o.iters = parseInt(a.c_str(), value(), 1);
    else if (a == "-w" || a == "--warmup_iters") o.warmup = parseInt(a.c_str(), value(), 0);
    else if (a == "-c" || a == "--check") o.check = parseInt(a.c_str(), value(), 0);
    else {
      std::fprintf(stderr, "ferry-perf: unknown flag '%s'\nusage: ferry-perf [all_reduce] [-b minbytes] [-e maxbytes] [-f factor] [-n iters] [-w warmup] [-c check]\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

struct Row {
  double us;
  size_t wrong;
};

Row measure(ferry::Comm& c, const Options& o, std::vector<float>& in, std::vector<float>& out, size_t count,
            bool inPlace) {
  float* dst = inPlace ? in.data() : out.data();
  auto reset = [&] { std::fill(in.begin(), in.begin() + count, static_cast<float>(c.rank() + 1)); };
  for (int i = 0; i < o.warmup; ++i) {
    if (auto s = c.allReduce(in.data(), dst, count, ferry::DataType::kFloat32, ferry::RedOp::kSum); !s.isOk()) {
      std::fprintf(stderr, "ferry-perf: %s\n", s.toString().c_str());
      std::exit(1);
    }
  }
  (void)c.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) {
    if (auto s = c.allReduce(in.data(), dst, count, ferry::DataType::kFloat32, ferry::RedOp::kSum); !s.isOk()) {
      std::fprintf(stderr, "ferry-perf: %s\n", s.toString().c_str());
      std::exit(1);
    }
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
  // Every rank reports the slowest rank's time, as nccl-tests does.
  double maxUs = us;
  (void)c.allReduce(&us, &maxUs, 1, ferry::DataType::kFloat64, ferry::RedOp::kMax);
  size_t wrong = 0;
  if (o.check > 0) {
    reset();
    (void)c.allReduce(in.data(), dst, count, ferry::DataType::kFloat32, ferry::RedOp::kSum);
    const float expect = static_cast<float>(c.size() * (c.size() + 1) / 2);
    for (size_t i = 0; i < count; ++i) wrong += dst[i] != expect;
    uint64_t w = wrong, total = 0;
    (void)c.allReduce(&w, &total, 1, ferry::DataType::kUint64, ferry::RedOp::kSum);
    wrong = total;
  }
  reset();
  return {maxUs, wrong};
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  auto comm = ferry::Comm::fromEnv();
  if (!comm.isOk()) {
    std::fprintf(stderr, "ferry-perf: %s\n", comm.status().toString().c_str());
    return 1;
  }
  ferry::Comm& c = **comm;
  const int n = c.size();
  const bool root = c.rank() == 0;
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  if (root) {
    std::printf("# ferry-perf all_reduce: nranks %d minBytes %zu maxBytes %zu step: %d(factor) warmup iters: %d iters: %d validation: %d\n#\n",
                n, o.minBytes, o.maxBytes, o.factor, o.warmup, o.iters, o.check);
    std::printf("# Using devices\n");
  }
  for (int r = 0; r < n; ++r) {
    (void)c.barrier();
    if (r == c.rank()) {
      std::printf("#  Rank %2d Pid %6d on %10s device cpu\n", r, getpid(), host);
      std::fflush(stdout);
    }
  }
  (void)c.barrier();
  if (root) {
    std::printf("#\n#%75s%32s\n", "out-of-place", "in-place");
    std::printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  const size_t maxCount = std::max<size_t>(1, o.maxBytes / sizeof(float));
  std::vector<float> in(maxCount, static_cast<float>(c.rank() + 1)), out(maxCount);
  double busSum = 0;
  int rows = 0;
  size_t wrongTotal = 0;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.factor) {
    size_t count = std::max<size_t>(1, bytes / sizeof(float));
    size_t realBytes = count * sizeof(float);
    Row op = measure(c, o, in, out, count, false);
    Row ip = measure(c, o, in, out, count, true);
    double factor = 2.0 * (n - 1) / n;
    double algOp = realBytes / op.us / 1e3, algIp = realBytes / ip.us / 1e3;
    busSum += algIp * factor;
    ++rows;
    wrongTotal += op.wrong + ip.wrong;
    if (root) {
      std::printf(" %11zu %12zu %8s %6s %6d %8.2f %7.2f %7.2f %6zu %8.2f %7.2f %7.2f %6zu\n", realBytes, count, "float",
                  "sum", -1, op.us, algOp, algOp * factor, op.wrong, ip.us, algIp, algIp * factor, ip.wrong);
      std::fflush(stdout);
    }
    if (bytes == 0) break;
  }
  if (root) {
    std::printf("# Out of bounds values : %zu %s\n", wrongTotal, wrongTotal == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g \n#\n", rows > 0 ? busSum / rows : 0.0);
  }
  return wrongTotal == 0 ? 0 : 1;
}
