// The standalone reduce-copy kernel: see reduce_copy_kernel.hpp.
//
// One instantiation per (type, op): 12 x 4 kernels, and 6 x 3 more for the integer types' bitwise
// ops, each a single call of reduceCopy. The pointer
// arrays travel by value in the kernel parameters (ReduceCopyParams, under 200 bytes); each block
// offsets them to its part in local arrays before the call.
#include "kernels/cuda/reduce_copy_kernel.hpp"

#include "kernels/cuda/reduce_copy.cuh"

#if !FERRY_SIMT_EMULATED
#include <cuda_runtime.h>
#endif

namespace ferry::gpu {
namespace {

/// Everything one launch needs, by value.
struct ReduceCopyParams {
  const void* srcs[kMaxReduceSrcs];
  void* dsts[kMaxReduceDsts];
  size_t count;
  size_t perBlock;  ///< elements per block, a multiple of 16 bytes' worth
  int nSrcs;
  int nDsts;
  uint32_t divisor;
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxReduceCopyThreads, 1) reduceCopyKernel(ReduceCopyParams p) {
  const size_t begin = p.perBlock * blockIdx.x;
  if (begin >= p.count) return;  // uniform across the block
  const size_t n = p.count - begin < p.perBlock ? p.count - begin : p.perBlock;
  const T* srcs[kMaxReduceSrcs];
  T* dsts[kMaxReduceDsts];
  for (int s = 0; s < p.nSrcs; ++s) srcs[s] = static_cast<const T*>(p.srcs[s]) + begin;
  for (int d = 0; d < p.nDsts; ++d) dsts[d] = static_cast<T*>(p.dsts[d]) + begin;
  reduceCopy<T, Op>(p.nSrcs, srcs, p.nDsts, dsts, n, p.divisor);
}

}  // namespace

int launchReduceCopy(DataType type, RedOp op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                     size_t count, uint32_t divisor, int nBlocks, int nThreads, void* stream) {
  constexpr int kInvalidValue = 1;  // cudaErrorInvalidValue
  if (!isValidDataType(static_cast<int>(type)) || !isValidRedOp(static_cast<int>(op)) || !redOpDefinedFor(op, type) ||
      nSrcs < 1 || nSrcs > kMaxReduceSrcs || nDsts < 0 || nDsts > kMaxReduceDsts || nBlocks < 1 || nThreads < 1 ||
      nThreads > kMaxReduceCopyThreads) {
    return kInvalidValue;
  }
  ReduceCopyParams p{};
  for (int s = 0; s < nSrcs; ++s) p.srcs[s] = srcs[s];
  for (int d = 0; d < nDsts; ++d) p.dsts[d] = dsts[d];
  p.count = count;
  p.nSrcs = nSrcs;
  p.nDsts = nDsts;
  p.divisor = divisor;
  // Parts of whole 16-byte vectors, so that every block starts at the buffers' common alignment.
  const size_t elemsPer16 = 16 / dataTypeSize(type);
  const size_t per = (count + nBlocks - 1) / static_cast<size_t>(nBlocks);
  p.perBlock = (per + elemsPer16 - 1) / elemsPer16 * elemsPer16;
  if (p.perBlock == 0) p.perBlock = elemsPer16;
  int rc = 0;
  dispatchTypeOp(type, op, [&]<typename T, typename Op>() {
#if FERRY_SIMT_EMULATED
    (void)stream;
    rc = simt::launch(dim3(nBlocks), dim3(nThreads), reduceCopyKernel<T, Op>, p);
#else
    reduceCopyKernel<T, Op><<<nBlocks, nThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    rc = static_cast<int>(cudaGetLastError());
#endif
  });
  return rc;
}

}  // namespace ferry::gpu
