// ferry-gpu-micro: the two device bandwidths bench/gpu_check.sh compares everything with.
//
//   ferry-gpu-micro copy [-s 1G] [-n 20]
//       cudaMemcpyAsync device to device of -s bytes, -n timed runs after two untimed ones;
//       bandwidth counts the bytes read plus the bytes written (2 x size), as the memory sees it.
//   ferry-gpu-micro reduce_copy [-d float32|bfloat16] [-s 1G] [-n 5]
//       the CUDA kernels' reduce-copy (kernels/cuda/reduce_copy_kernel.hpp): two inputs of -s bytes
//       summed into one output, over a sweep of grid and block sizes; bandwidth counts 3 x size
//       (two read, one written). The copy is measured in the same run, the best configuration is
//       reported with its fraction of the copy bandwidth, and its output is checked (1 + 2 = 3).
//
// Output: '#' comment lines, then one line "result KEY=VALUE ..." that gpu_check.sh parses.
// Exit status 0, 1 when CUDA fails or there is no device (the message says "no CUDA device"),
// 2 for bad usage.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/types.hpp"
#include "bench/perf/dtypes.hpp"
#include "bench/perf/options.hpp"

#if FERRY_MICRO_REDUCE_COPY
#include "kernels/cuda/reduce_copy_kernel.hpp"
// The launcher's namespace is the kernels' own; name every candidate so the call below finds it.
namespace ferry::kernels {}
namespace ferry::gpu {}
using namespace ferry;
using namespace ferry::kernels;
using namespace ferry::gpu;
#endif

namespace {

// CUDA failures end the tool: it measures, it has nothing to recover.
#define FERRY_MICRO_CUDA(call)                                                                \
  do {                                                                                        \
    const cudaError_t micro_e_ = (call);                                                      \
    if (micro_e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "ferry-gpu-micro: %s: %s\n", #call, cudaGetErrorString(micro_e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

struct Args {
  std::string mode;
  size_t bytes = size_t{1} << 30;
  int runs = 0;  // 0: the mode's default
  ferry::DataType type = ferry::DataType::kFloat32;
};

// Events around `fn` on `stream`, `runs` times; returns the seconds of each run, sorted.
template <typename Fn>
std::vector<double> timeRuns(cudaStream_t stream, int runs, Fn fn) {
  cudaEvent_t a, b;
  FERRY_MICRO_CUDA(cudaEventCreate(&a));
  FERRY_MICRO_CUDA(cudaEventCreate(&b));
  std::vector<double> out;
  for (int i = 0; i < runs; ++i) {
    FERRY_MICRO_CUDA(cudaEventRecord(a, stream));
    fn();
    FERRY_MICRO_CUDA(cudaEventRecord(b, stream));
    FERRY_MICRO_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    FERRY_MICRO_CUDA(cudaEventElapsedTime(&ms, a, b));
    out.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(out.begin(), out.end());
  return out;
}

double gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

// Best and median D2D copy bandwidth (read + write) of `bytes`.
void measureCopy(void* dst, const void* src, size_t bytes, int runs, cudaStream_t stream, double& best,
                 double& median) {
  for (int i = 0; i < 2; ++i) FERRY_MICRO_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  FERRY_MICRO_CUDA(cudaStreamSynchronize(stream));
  const std::vector<double> t = timeRuns(stream, runs, [&] {
    FERRY_MICRO_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  best = gbps(2.0 * bytes, t.front());
  median = gbps(2.0 * bytes, t[t.size() / 2]);
}

int runCopy(const Args& a) {
  void *src, *dst;
  cudaStream_t stream;
  FERRY_MICRO_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FERRY_MICRO_CUDA(cudaMalloc(&src, a.bytes));
  FERRY_MICRO_CUDA(cudaMalloc(&dst, a.bytes));
  FERRY_MICRO_CUDA(cudaMemset(src, 1, a.bytes));
  double best = 0, median = 0;
  const int runs = a.runs > 0 ? a.runs : 20;
  measureCopy(dst, src, a.bytes, runs, stream, best, median);
  std::printf("# cudaMemcpyAsync device to device, %zu bytes, %d runs; GB/s count read + write\n", a.bytes, runs);
  std::printf("result copy bytes=%zu best_gbps=%.1f median_gbps=%.1f\n", a.bytes, best, median);
  cudaFree(src);
  cudaFree(dst);
  return 0;
}

#if FERRY_MICRO_REDUCE_COPY
// Fill `bytes` of device memory with copies of one element's `bits` (`elt` bytes).
void fillPattern(void* dst, size_t bytes, uint32_t bits, size_t elt) {
  std::vector<uint8_t> chunk(size_t{16} << 20);
  for (size_t i = 0; i < chunk.size(); i += elt) std::memcpy(&chunk[i], &bits, elt);
  for (size_t off = 0; off < bytes; off += chunk.size()) {
    FERRY_MICRO_CUDA(cudaMemcpy(static_cast<uint8_t*>(dst) + off, chunk.data(), std::min(chunk.size(), bytes - off),
                                cudaMemcpyHostToDevice));
  }
}

int runReduceCopy(const Args& a, const cudaDeviceProp& prop) {
  const ferry::perf::TypeInfo& info = ferry::perf::typeInfo(a.type);
  const size_t count = a.bytes / info.size;
  const size_t bytes = count * info.size;
  void *src0, *src1, *dst;
  cudaStream_t stream;
  FERRY_MICRO_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  FERRY_MICRO_CUDA(cudaMalloc(&src0, bytes));
  FERRY_MICRO_CUDA(cudaMalloc(&src1, bytes));
  FERRY_MICRO_CUDA(cudaMalloc(&dst, bytes));
  // 1.0 and 2.0, whose sum 3.0 is exact in both types.
  const bool bf16 = a.type == ferry::DataType::kBfloat16;
  fillPattern(src0, bytes, bf16 ? 0x3F80u : 0x3F800000u, info.size);
  fillPattern(src1, bytes, bf16 ? 0x4000u : 0x40000000u, info.size);
  FERRY_MICRO_CUDA(cudaMemset(dst, 0, bytes));

  double copyBest = 0, copyMedian = 0;
  measureCopy(dst, src0, bytes, 10, stream, copyBest, copyMedian);

  const void* srcs[2] = {src0, src1};
  void* dsts[1] = {dst};
  const int runs = a.runs > 0 ? a.runs : 5;
  double best = 0;
  int bestBlocks = 0, bestThreads = 0;
  std::printf("# reduce_copy %s sum, 2 inputs -> 1 output of %zu bytes, %d SMs; GB/s count 3 x size\n", info.ferryName,
              bytes, prop.multiProcessorCount);
  std::printf("# %8s %8s %12s %12s\n", "blocks", "threads", "best GB/s", "median GB/s");
  for (int threads : {256, 512, 1024}) {
    for (int perSm : {1, 2, 4, 8, 16, 32}) {
      const int blocks = perSm * prop.multiProcessorCount;
      int failed = 0;
      auto launch = [&] {
        failed = launchReduceCopy(a.type, ferry::RedOp::kSum, 2, srcs, 1, dsts, count, 1, blocks, threads, stream);
      };
      launch();
      if (failed == 0) failed = static_cast<int>(cudaStreamSynchronize(stream));
      if (failed != 0) {  // a configuration the launcher refuses is reported and skipped
        std::printf("  %8d %8d  failed: %s\n", blocks, threads, cudaGetErrorString(static_cast<cudaError_t>(failed)));
        (void)cudaGetLastError();
        continue;
      }
      const std::vector<double> t = timeRuns(stream, runs, launch);
      const double b = gbps(3.0 * bytes, t.front());
      std::printf("  %8d %8d %12.1f %12.1f\n", blocks, threads, b, gbps(3.0 * bytes, t[t.size() / 2]));
      if (b > best) {
        best = b;
        bestBlocks = blocks;
        bestThreads = threads;
      }
    }
  }
  // The output of the last configuration that ran: every element must be 3.0 (first and last 16 MiB).
  uint64_t wrong = 0;
  std::vector<uint8_t> back(std::min(bytes, size_t{16} << 20));
  const uint32_t three = bf16 ? 0x4040u : 0x40400000u;
  for (size_t off : {size_t{0}, bytes - back.size()}) {
    FERRY_MICRO_CUDA(cudaMemcpy(back.data(), static_cast<uint8_t*>(dst) + off, back.size(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < back.size(); i += info.size) {
      uint32_t v = 0;
      std::memcpy(&v, &back[i], info.size);
      wrong += v != three;
    }
  }
  std::printf(
      "result reduce_copy type=%s bytes=%zu best_gbps=%.1f blocks=%d threads=%d copy_gbps=%.1f "
      "fraction=%.3f wrong=%llu\n",
      info.ferryName, bytes, best, bestBlocks, bestThreads, copyBest, copyBest > 0 ? best / copyBest : 0.0,
      static_cast<unsigned long long>(wrong));
  cudaFree(src0);
  cudaFree(src1);
  cudaFree(dst);
  return wrong == 0 ? 0 : 1;
}
#endif

int usage(const char* why) {
  if (why) std::fprintf(stderr, "ferry-gpu-micro: %s\n", why);
  std::fprintf(why ? stderr : stdout,
               "usage: ferry-gpu-micro copy [-s SIZE] [-n RUNS]\n"
               "       ferry-gpu-micro reduce_copy [-d float32|bfloat16] [-s SIZE] [-n RUNS]\n"
               "SIZE takes K, M, G suffixes (default 1G). GB/s count bytes read plus written.\n");
  return why ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-h" || s == "--help") return usage(nullptr);
    if (s == "copy" || s == "reduce_copy") {
      a.mode = s;
      continue;
    }
    if (s.empty() || s[0] != '-') return usage(("unknown argument " + s).c_str());
    if (i + 1 >= argc) return usage((s + " needs a value").c_str());
    const std::string v = argv[++i];
    if (s == "-s") {
      auto b = ferry::perf::parseSize("-s", v);
      if (!b.isOk() || *b == 0) return usage(("-s " + v + " is not a size").c_str());
      a.bytes = *b;
    } else if (s == "-n") {
      a.runs = std::atoi(v.c_str());
      if (a.runs < 1) return usage(("-n " + v + " is not a positive count").c_str());
    } else if (s == "-d") {
      auto t = ferry::perf::parseTypeName(v);
      if (!t || (*t != ferry::DataType::kFloat32 && *t != ferry::DataType::kBfloat16)) {
        return usage(("-d " + v + ": expected float32 or bfloat16").c_str());
      }
      a.type = *t;
    } else {
      return usage(("unknown argument " + s).c_str());
    }
  }
  if (a.mode.empty()) return usage("no mode: expected copy or reduce_copy");
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "ferry-gpu-micro: no CUDA device: %s\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
    return 1;
  }
  cudaDeviceProp prop{};
  FERRY_MICRO_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device 0: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (a.mode == "copy") return runCopy(a);
#if FERRY_MICRO_REDUCE_COPY
  return runReduceCopy(a, prop);
#else
  std::fprintf(stderr, "ferry-gpu-micro: reduce_copy is not built: kernels/cuda/reduce_copy_kernel.hpp was missing\n");
  return 1;
#endif
}
