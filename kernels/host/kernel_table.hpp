// The table of host kernels one instruction set provides (private to kernels/host).
//
// Each instruction set is a separate translation unit compiled with its own -m flags and exports
// exactly one function returning its table. The dispatcher (reduce.cpp) picks a table once, from
// what the CPU supports, and every call afterwards costs one load and one indirect call: no CPU
// detection and no switch over types on the hot path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/types.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::kernels {

/// dst[i] = a[i] op b[i].
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
/// dst[i] = (a[i] + b[i]) / divisor.
using SumDivideFn = void (*)(void* dst, const void* a, const void* b, size_t count, uint32_t divisor);
/// dst[i] = src[i] / divisor.
using DivideFn = void (*)(void* dst, const void* src, size_t count, uint32_t divisor);

/// All kernels of one instruction set, indexed by DataType and RedOp values. A reduce entry is null
/// where the op is not element-wise (avg: sumDivide/divide do its last step) or not defined on the
/// type (the bitwise ops on floating-point types).
struct KernelTable {
  Isa isa;
  ReduceFn reduce[kNumDataTypes][kNumRedOps];
  SumDivideFn sumDivide[kNumDataTypes];
  DivideFn divide[kNumDataTypes];
};

/// Kernels built for baseline x86-64 (SSE2); run on any x86-64 CPU.
const KernelTable& baselineKernelTable();
#if defined(__x86_64__)
/// Kernels built for AVX2 + F16C + FMA. Call only where isaSupported(Isa::kAvx2).
const KernelTable& avx2KernelTable();
/// Kernels built for AVX-512 F/BW/DQ/VL. Call only where isaSupported(Isa::kAvx512).
const KernelTable& avx512KernelTable();
#endif

}  // namespace ferry::kernels
