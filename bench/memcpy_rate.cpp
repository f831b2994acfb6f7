// memcpy-rate: how fast one core copies memory, the ceiling against which bench/compare reads the
// host collectives' bandwidths.
//
//   memcpy-rate [SIZE ...] [-J FILE]     sizes with K, M, G (powers of 1024); default 16M 256M
//
// For each size: two page-aligned buffers, written once so that no page fault is timed, then
// memcpy from one to the other, repeated, the best (shortest) copy kept. The rate is bytes copied
// per second in GB/s (10^9 bytes/s); the memory system moves twice that (each byte is read and
// written). Repeats: enough for about 2 GiB of copies per size, at least 5. The process runs on
// whatever core the scheduler gives it; bench/compare runs it before and after the libraries.
// With -J the results are also written as JSON: {"schema": "ferry-memcpy/1", "host", "cpu",
// "results": [{"size", "repeats", "best_seconds", "median_seconds", "best_gbps", "median_gbps"}]}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "size_arg.hpp"

namespace {

struct Rate {
  size_t size = 0;
  int repeats = 0;
  double bestSeconds = 0;
  double medianSeconds = 0;
};

// Keeps the compiler from proving the copy's result unused.
void touch(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

bool measure(size_t size, Rate* rate) {
  void* src = nullptr;
  void* dst = nullptr;
  if (posix_memalign(&src, 4096, size) != 0 || posix_memalign(&dst, 4096, size) != 0) {
    std::fprintf(stderr, "memcpy-rate: cannot allocate two buffers of %zu bytes\n", size);
    std::free(src);
    return false;
  }
  std::memset(src, 1, size);
  std::memset(dst, 2, size);
  const int repeats = static_cast<int>(std::max<size_t>(5, (size_t{2} << 30) / size));
  std::vector<double> seconds;
  for (int i = 0; i < repeats + 1; ++i) {  // the first copy warms caches and TLBs, untimed
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst, src, size);
    touch(dst);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  *rate = {size, repeats, seconds.front(), seconds[seconds.size() / 2]};
  std::free(src);
  std::free(dst);
  return true;
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
    }
  }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    size_t s = 0;
    if (std::strcmp(argv[i], "-J") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (ferry::bench::parseSizeArg(argv[i], &s)) {
      sizes.push_back(s);
    } else {
      std::fprintf(stderr, "memcpy-rate: '%s' is not a size (K, M, G are powers of 1024)\n"
                   "usage: memcpy-rate [SIZE ...] [-J FILE]\n", argv[i]);
      return 2;
    }
  }
  if (sizes.empty()) sizes = {size_t{16} << 20, size_t{256} << 20};

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string out = "{\n  \"schema\": \"ferry-memcpy/1\",\n  \"host\": \"" + std::string(host) + "\",\n  \"cpu\": \"" +
                    cpuModel() + "\",\n  \"results\": [";
  std::printf("# memcpy-rate: one core, best of N copies (GB/s = 1e9 bytes copied per second)\n");
  std::printf("# %12s  %7s  %10s  %10s\n", "size (B)", "repeats", "best GB/s", "median GB/s");
  for (size_t i = 0; i < sizes.size(); ++i) {
    Rate r;
    if (!measure(sizes[i], &r)) return 1;
    const double best = static_cast<double>(r.size) / r.bestSeconds / 1e9;
    const double median = static_cast<double>(r.size) / r.medianSeconds / 1e9;
    std::printf("  %12zu  %7d  %10.2f  %10.2f\n", r.size, r.repeats, best, median);
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "%s\n    {\"size\": %zu, \"repeats\": %d, \"best_seconds\": %.9g, \"median_seconds\": %.9g, "
                  "\"best_gbps\": %.6g, \"median_gbps\": %.6g}",
                  i ? "," : "", r.size, r.repeats, r.bestSeconds, r.medianSeconds, best, median);
    out += buf;
  }
  out += "\n  ]\n}\n";
  if (!json.empty()) {
    std::ofstream f(json, std::ios::trunc);
    f << out;
    if (!f) {
      std::fprintf(stderr, "memcpy-rate: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return 0;
}
