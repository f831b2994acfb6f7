// The nvcc-built reduce-copy kernel on a real GPU against the host kernels ('gpu' suite).
//
// Same comparison as test_reduce_copy.cpp (host reduce applied left to right, the last step fused
// with the divide), over every type and op, 1..4 sources, 1..2 destinations, aligned and misaligned
// buffers and a length large enough for many blocks. One difference is allowed: a NaN produced by
// GPU arithmetic is the canonical NaN, not the x86 one, so floating NaNs compare as "both NaN".
// Then the bandwidth of a 1 GiB two-source reduce (bfloat16, float32) next to a device-to-device
// copy, printed for the record. Exits 77 (meson: skipped) when there is no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/reduce_copy_kernel.hpp"
#include "kernels/host/reduce.hpp"

namespace {

using ferry::DataType;
using ferry::RedOp;

constexpr int kSkip = 77;

bool isNanBits(DataType type, const unsigned char* p) {
  uint64_t b = 0;
  std::memcpy(&b, p, ferry::dataTypeSize(type));
  switch (type) {
    case DataType::kFloat16: return (b & 0x7FFF) > 0x7C00;
    case DataType::kBfloat16: return (b & 0x7FFF) > 0x7F80;
    case DataType::kFloat32: return (b & 0x7FFFFFFF) > 0x7F800000;
    case DataType::kFloat64: return (b & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000;
    case DataType::kFloat8e4m3: return (b & 0x7F) == 0x7F;
    case DataType::kFloat8e5m2: return (b & 0x7F) > 0x7C;
    default: return false;
  }
}

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

int checkAll() {
  constexpr size_t kCounts[] = {0, 1, 17, 4099, 300001};
  constexpr size_t kMaxBytes = 300001 * 8 + 64;
  std::vector<void*> dev(6);
  for (auto& p : dev) CHECK_CUDA(cudaMalloc(&p, kMaxBytes));
  std::mt19937_64 rng(7);
  int failures = 0;
  for (int t = 0; t < ferry::kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const size_t es = ferry::dataTypeSize(type);
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg}) {
      const uint32_t divisor = op == RedOp::kAvg ? 3 : 0;
      for (int nSrcs = 1; nSrcs <= 4; ++nSrcs) {
        for (size_t n : kCounts) {
          for (int misaligned = 0; misaligned < 2; ++misaligned) {
            const int nDsts = 1 + (nSrcs + misaligned) % 2;
            const size_t shift = misaligned ? es : 0;
            std::vector<std::vector<unsigned char>> srcs(nSrcs, std::vector<unsigned char>(n * es));
            for (auto& s : srcs) {
              for (size_t i = 0; i < s.size(); i += 8) {
                const uint64_t r = rng();
                std::memcpy(&s[i], &r, std::min<size_t>(8, s.size() - i));
              }
            }
            const void* srcPtrs[4];
            void* dstPtrs[2];
            for (int k = 0; k < nSrcs; ++k) {
              srcPtrs[k] = static_cast<char*>(dev[k]) + shift;
              CHECK_CUDA(cudaMemcpy(const_cast<void*>(srcPtrs[k]), srcs[k].data(), n * es, cudaMemcpyHostToDevice));
            }
            for (int d = 0; d < nDsts; ++d) dstPtrs[d] = static_cast<char*>(dev[4 + d]) + shift;
            std::vector<unsigned char> want = srcs[0];
            for (int k = 1; k < nSrcs; ++k) {
              if (divisor != 0 && k == nSrcs - 1)
                ferry::kernels::sumDivide(type, want.data(), want.data(), srcs[k].data(), n, divisor);
              else
                ferry::kernels::reduce(type, op == RedOp::kAvg ? RedOp::kSum : op, want.data(), want.data(),
                                       srcs[k].data(), n);
            }
            if (nSrcs == 1 && divisor != 0) ferry::kernels::divide(type, want.data(), want.data(), n, divisor);
            CHECK_CUDA(static_cast<cudaError_t>(
                ferry::gpu::launchReduceCopy(type, op, nSrcs, srcPtrs, nDsts, dstPtrs, n, divisor, 64, 256, nullptr)));
            CHECK_CUDA(cudaDeviceSynchronize());
            for (int d = 0; d < nDsts; ++d) {
              std::vector<unsigned char> got(n * es);
              CHECK_CUDA(cudaMemcpy(got.data(), dstPtrs[d], n * es, cudaMemcpyDeviceToHost));
              for (size_t i = 0; i < n; ++i) {
                const unsigned char* g = &got[i * es];
                const unsigned char* w = &want[i * es];
                if (std::memcmp(g, w, es) == 0 || (isNanBits(type, g) && isNanBits(type, w))) continue;
                if (failures++ < 20) {
                  uint64_t gb = 0, wb = 0;
                  std::memcpy(&gb, g, es);
                  std::memcpy(&wb, w, es);
                  std::printf("FAIL %s %s nSrcs %d n %zu misaligned %d dst %d [%zu]: got %#llx want %#llx\n",
                              ferry::dataTypeName(type), ferry::redOpName(op), nSrcs, n, misaligned, d, i,
                              static_cast<unsigned long long>(gb), static_cast<unsigned long long>(wb));
                }
                break;
              }
            }
          }
        }
      }
    }
  }
  for (void* p : dev) cudaFree(p);
  std::printf("correctness: %d failing cases\n", failures);
  return failures == 0 ? 0 : 1;
}

int bandwidth() {
  constexpr size_t kBytes = size_t{1} << 30;
  void *a, *b, *c;
  CHECK_CUDA(cudaMalloc(&a, kBytes));
  CHECK_CUDA(cudaMalloc(&b, kBytes));
  CHECK_CUDA(cudaMalloc(&c, kBytes));
  CHECK_CUDA(cudaMemset(a, 0, kBytes));
  CHECK_CUDA(cudaMemset(b, 0, kBytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto time = [&](auto&& body) {
    body();
    cudaEventRecord(start);
    for (int i = 0; i < 5; ++i) body();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms / 5;
  };
  const float copyMs = time([&] { cudaMemcpyAsync(c, a, kBytes, cudaMemcpyDeviceToDevice); });
  const double copyBw = 2.0 * kBytes / (copyMs * 1e6);
  std::printf("device copy 1 GiB: %.3f ms, %.0f GB/s (read + write)\n", copyMs, copyBw);
  for (DataType type : {DataType::kBfloat16, DataType::kFloat32}) {
    const void* srcs[2] = {a, b};
    void* dsts[1] = {c};
    const size_t n = kBytes / ferry::dataTypeSize(type);
    for (int perSm : {2, 4, 8, 16}) {
      for (int threads : {256, 512}) {
        const float ms = time([&] {
          ferry::gpu::launchReduceCopy(type, RedOp::kSum, 2, srcs, 1, dsts, n, 0, sms * perSm, threads, nullptr);
        });
        const double bw = 3.0 * kBytes / (ms * 1e6);
        std::printf("reduceCopy %s 2 srcs 1 GiB, %d blocks x %d threads: %.3f ms, %.0f GB/s, %.1f%% of copy\n",
                    ferry::dataTypeName(type), sms * perSm, threads, ms, bw, 100 * bw / copyBw);
      }
    }
  }
  CHECK_CUDA(cudaGetLastError());
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return kSkip;
  }
  const bool bench = argc > 1 && std::strcmp(argv[1], "--bandwidth") == 0;
  const int rc = checkAll();
  if (rc != 0 || !bench) return rc;
  return bandwidth();
}
