// Host reduction kernels: element-wise dst = a op b for every data type and reduction op.
//
// Contract (shared with the CUDA kernels):
// - dst may alias a or b exactly (in-place accumulate); partial overlap is not allowed.
// - Integers wrap around (two's complement) for sum and prod; no undefined behaviour on overflow.
// - float16 and bfloat16 are computed in float32 and rounded back with round-to-nearest-even.
// - max/min, floating types (PyTorch's rule, made independent of the operands' order): if either
//   input is NaN the result is NaN (the NaN itself; of two NaNs, the one whose bits read as an
//   unsigned integer are larger); max(-0, +0) = max(+0, -0) = +0 and min(-0, +0) = min(+0, -0) = -0;
//   infinities order as usual. float16/bfloat16/float8 apply it in float32 lanes, like every op.
// - band/bor/bxor are defined on the integer types only (bitwise on the two's complement bits).
// - avg is not an op here: collectives sum, then apply sumDivide/divide once at the end.
// The implementation is chosen at run time from the widest instruction set the CPU has (AVX-512,
// AVX2, baseline x86-64), so one binary runs everywhere.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/types.hpp"

namespace ferry::kernels {

/// Instruction sets the host kernels are built for.
enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

/// dst[i] = a[i] op b[i] for i < count. op must not be kAvg; kBand, kBor and kBxor need an integer
/// type. Anything else does nothing (and logs a warning: callers validate first).
void reduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count);

/// dst[i] = (a[i] + b[i]) / divisor: the last step of an avg reduction. Floating types divide in
/// their accumulation precision (float32 for float16/bfloat16) and round once; integers truncate
/// toward zero as C does.
void sumDivide(DataType type, void* dst, const void* a, const void* b, size_t count, uint32_t divisor);

/// dst[i] = src[i] / divisor, same rules as sumDivide. dst may alias src.
void divide(DataType type, void* dst, const void* src, size_t count, uint32_t divisor);

/// The instruction set in use ("avx512", "avx2", "x86-64").
Isa activeIsa();
const char* isaName(Isa isa);
/// True when this CPU can run kernels built for `isa`.
bool isaSupported(Isa isa);
/// Use `isa` from now on (tests compare every supported set against the scalar reference).
/// Returns false, changing nothing, when the CPU lacks it.
bool setIsa(Isa isa);

}  // namespace ferry::kernels
