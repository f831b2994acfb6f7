// Bandwidth of the host reduction kernels, per instruction set, next to memcpy.
//
// Why: the host kernels reduce buffers far larger than the caches, so what matters is how close
// they get to memory bandwidth. memcpy over the same buffer size is the practical ceiling.
//
// Method: three buffers (a, b, dst) of the given size (64 MiB by default), touched once before
// timing so page faults are not measured. Each case runs `iterations` times; the best run counts
// (the least disturbed by other load on the machine). GB/s counts every byte moved: for reduce,
// two buffers read and one written (3 x size); for memcpy, one read and one written (2 x size).
//
// Usage: reduce_bench [MiB per buffer, default 64] [iterations, default 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/host/reduce.hpp"

namespace {

using ferry::DataType;
using ferry::RedOp;
using ferry::kernels::Isa;

/// Seconds of the fastest of `iterations` runs of fn.
template <typename Fn>
double bestSeconds(int iterations, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
  }
  return best;
}

void printRow(const char* what, const char* isa, const char* dtype, double bytesMoved, double seconds) {
  std::printf("%-8s %-8s %-9s %10.2f GB/s  (%.2f ms)\n", what, isa, dtype, bytesMoved / seconds / 1e9, seconds * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  if (mib == 0 || iterations <= 0) {
    std::fprintf(stderr, "usage: %s [MiB per buffer > 0] [iterations > 0]\n", argv[0]);
    return 2;
  }
  const size_t bytes = mib << 20;
  // Filled with small values (float32 1.0 / bfloat16 pairs of 1.0) so no lane is NaN or subnormal.
  std::vector<unsigned char> a(bytes), b(bytes), dst(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    const uint32_t one = 0x3F800000u, pair = 0x3F803F80u;
    std::memcpy(&a[i], &one, 4);
    std::memcpy(&b[i], &pair, 4);
  }
  std::memset(dst.data(), 0, bytes);

  std::printf("buffers: %zu MiB each, best of %d runs; active isa: %s\n", mib, iterations,
              ferry::kernels::isaName(ferry::kernels::activeIsa()));
  const double copySeconds = bestSeconds(iterations, [&] { std::memcpy(dst.data(), a.data(), bytes); });
  printRow("memcpy", "-", "-", 2.0 * static_cast<double>(bytes), copySeconds);

  const Isa restore = ferry::kernels::activeIsa();
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    if (!ferry::kernels::setIsa(isa)) {
      std::printf("%-8s %-8s (not supported by this CPU)\n", "reduce", ferry::kernels::isaName(isa));
      continue;
    }
    for (DataType type : {DataType::kFloat32, DataType::kBfloat16}) {
      const size_t count = bytes / ferry::dataTypeSize(type);
      const double seconds = bestSeconds(iterations, [&] {
        ferry::kernels::reduce(type, RedOp::kSum, dst.data(), a.data(), b.data(), count);
      });
      printRow("reduce", ferry::kernels::isaName(isa), ferry::dataTypeName(type), 3.0 * static_cast<double>(bytes),
               seconds);
    }
  }
  ferry::kernels::setIsa(restore);
  return 0;
}
