// A standalone reduce-copy kernel over a whole grid, for benchmarks and tests of reduceCopy.
//
// The collective kernels call reduceCopy (reduce_copy.cuh) from inside their own loops; this
// launcher runs it alone: the range is cut into nBlocks contiguous parts (multiples of 16 bytes, so
// each part keeps the buffers' alignment) and each block reduces its part. It is the device
// counterpart of one host kernels::reduce / sumDivide call, generalised to several sources and
// destinations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/types.hpp"

namespace ferry::gpu {

/// Most threads per block launchReduceCopy accepts: at 1024 the kernel's registers (unrolled
/// 16-byte vectors of every source) exceed the multiprocessor's file and the launch fails.
inline constexpr int kMaxReduceCopyThreads = 512;

/// Run reduceCopy over `count` elements of `type`: for each i, dsts[*][i] = srcs[0][i] op ... op
/// srcs[nSrcs-1][i], divided by `divisor` in the last step when divisor != 0 (op kAvg behaves as
/// kSum; pass the divisor). nSrcs in [1, 8], nDsts in [0, 8]; the arrays are read on the host and
/// passed by value. Launches nBlocks blocks of nThreads threads on `stream` (a cudaStream_t) and
/// returns its cudaError_t without synchronising. In the emulated build (no nvcc) runs the grid
/// on host threads, returns when done, and gives 0; keep nBlocks * nThreads small there.
/// Returns cudaErrorInvalidValue (1) for arguments out of range (nThreads above
/// kMaxReduceCopyThreads included, and a bitwise op on a floating-point type), before launching anything. Many blocks
/// of 256 threads per multiprocessor come closest to the device-to-device copy bandwidth
/// (test/kernels/test_reduce_copy_gpu.cpp --bandwidth; figures: docs/PERFORMANCE.md, "GPU").
int launchReduceCopy(DataType type, RedOp op, int nSrcs, const void* const* srcs, int nDsts, void* const* dsts,
                     size_t count, uint32_t divisor, int nBlocks, int nThreads, void* stream);

}  // namespace ferry::gpu
