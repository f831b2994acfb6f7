// The device reduce-copy primitive: dsts[*][i] = srcs[0][i] op srcs[1][i] op ... for a block.
//
// Every collective kernel is a loop over steps that each combine a few buffers (own input, peer
// buffers, FIFO slots) into a few others (own output, the next rank's FIFO slot). reduceCopy is
// that step; copyBytes is the step without arithmetic; the pack functions are the same arithmetic
// on the 8-byte words of the LL protocol.
//
// Arithmetic contract (the host kernels' one, kernels/host/reduce.hpp; results are bit-identical):
// - every step v = v op s is computed in Acc<T> (float32 for float16/bfloat16/float8, T otherwise)
//   and rounded back to T before the next step, so an nSrcs-way reduction equals nSrcs - 1 host
//   reduce() calls applied left to right;
// - integers wrap (sum and prod run in the unsigned type); max/min follow the host's rule for
//   special values (NaN wins, of two NaNs the larger bit pattern; max(-0, +0) = +0, min = -0), so
//   even the choice of NaN payload and of +0/-0 matches, in any order of the operands;
//   band/bor/bxor exist for the integer types only;
// - avg is a sum whose last step is fused with the division: v = (v + s_last) / divisor in Acc,
//   rounded once (host sumDivide), or v = s_0 / divisor for one source (host divide). Integers
//   truncate toward zero after wrapping, as C does.
//
// Phases of reduceCopy, all block-cooperative (thread t handles every blockDim.x-th 16-byte vector):
// 1. Alignment: when every pointer has the same offset modulo 16 (the usual case: all aligned),
//    a scalar head brings them to a 16-byte boundary; otherwise the whole range runs scalar.
// 2. Body: kUnroll vectors per thread per iteration. The thread loads all kUnroll vectors of
//    source 0, then all kUnroll of source 1 (issued back to back: kUnroll 16-byte loads in flight
//    per source, which is what saturates HBM), reduces, and so on; then stores to every dst.
// 3. Remainder vectors one at a time, then a scalar tail.
// Op and T are template parameters: no branch on them inside any loop. The only runtime branches
// are per iteration and uniform across the block (which source is last, whether to divide).
//
// Memory ordering: plain loads and stores. Callers order them against flags with fences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/dtypes.cuh"

/// Full unrolling of a loop with a compile-time trip count: nvcc's pragma in device code, GCC's in
/// the emulation, nothing in nvcc's host pass (where neither compiler would accept the other's).
#if defined(__CUDA_ARCH__)
#define FERRY_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define FERRY_UNROLL
#else
#define FERRY_UNROLL _Pragma("GCC unroll 16")
#endif

namespace ferry::gpu {

/// Largest fan-in and fan-out of one reduceCopy call.
inline constexpr int kMaxReduceSrcs = 8;
inline constexpr int kMaxReduceDsts = 8;

// ---- op functors ----------------------------------------------------------------------------
// Stateless; operator() takes and returns the accumulation type A. Integers wrap.

namespace op_detail {
template <typename A>
FERRY_HOST_DEVICE A wrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename A>
FERRY_HOST_DEVICE A wrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    // Products of 8-bit operands are computed in unsigned int (no promotion to signed int).
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(static_cast<std::make_unsigned_t<A>>(a)) *
                                         static_cast<U>(static_cast<std::make_unsigned_t<A>>(b))));
  } else {
    return a * b;
  }
}
/// The bits of a double (CUDA's intrinsic in device code, memcpy on the host).
FERRY_HOST_DEVICE uint64_t doubleToBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}
FERRY_HOST_DEVICE double bitsToDouble(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}
/// The host kernels' special values' rule on top of an ordered selection r (kernels/host/reduce.hpp):
/// equal operands give max the AND of their bits and min the OR (+0 and -0: max +0, min -0); a NaN
/// wins, and of two NaNs the larger bit pattern. Symmetric in a and b: the order of the ranks does
/// not change the bits.
template <bool kMax, typename A>
FERRY_HOST_DEVICE A applySpecials(A r, A a, A b) {
  if constexpr (std::is_same_v<A, float>) {
    const uint32_t ua = floatToBits(a), ub = floatToBits(b);
    if (a == b) r = bitsToFloat(kMax ? ua & ub : ua | ub);
    if (b != b) r = b;
    if (a != a) r = a;
    if (a != a && b != b) r = ua > ub ? a : b;
  } else if constexpr (std::is_same_v<A, double>) {
    const uint64_t ua = doubleToBits(a), ub = doubleToBits(b);
    if (a == b) r = bitsToDouble(kMax ? ua & ub : ua | ub);
    if (b != b) r = b;
    if (a != a) r = a;
    if (a != a && b != b) r = ua > ub ? a : b;
  }
  return r;
}
}  // namespace op_detail

/// a + b (integers wrap).
struct OpSum {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return op_detail::wrapAdd(a, b);
  }
};
/// a * b (integers wrap).
struct OpProd {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return op_detail::wrapMul(a, b);
  }
};
/// max(a, b); NaN if either is NaN; max(-0, +0) = +0 (op_detail::applySpecials).
struct OpMax {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return op_detail::applySpecials<true>(a > b ? a : b, a, b);
  }
};
/// min(a, b); NaN if either is NaN; min(-0, +0) = -0 (op_detail::applySpecials).
struct OpMin {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return op_detail::applySpecials<false>(a < b ? a : b, a, b);
  }
};
/// a & b, integers only (dispatchTypeOp never pairs the bitwise functors with a floating type).
struct OpBand {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return static_cast<A>(a & b);
  }
};
/// a | b, integers only.
struct OpBor {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return static_cast<A>(a | b);
  }
};
/// a ^ b, integers only.
struct OpBxor {
  template <typename A>
  FERRY_HOST_DEVICE A operator()(A a, A b) const {
    return static_cast<A>(a ^ b);
  }
};

namespace op_detail {
/// The op half of dispatchTypeOp, as a functor for dispatchType (a lambda would take the
/// execution space of its enclosing function and trip nvcc's host/device call check).
template <typename F>
struct OpDispatch {
  RedOp op;
  F& f;
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <typename T>
  FERRY_HOST_DEVICE void operator()() const {
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: f.template operator()<T, OpSum>(); break;
      case RedOp::kProd: f.template operator()<T, OpProd>(); break;
      case RedOp::kMax: f.template operator()<T, OpMax>(); break;
      case RedOp::kMin: f.template operator()<T, OpMin>(); break;
      case RedOp::kBand: bitwise<T, OpBand>(); break;
      case RedOp::kBor: bitwise<T, OpBor>(); break;
      case RedOp::kBxor: bitwise<T, OpBxor>(); break;
    }
  }
  /// The bitwise ops exist for integer types only: no instantiation (and no call) for the others.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <typename T, typename Op>
  FERRY_HOST_DEVICE void bitwise() const {
    if constexpr (std::is_integral_v<T>) f.template operator()<T, Op>();
  }
};
}  // namespace op_detail

/// Calls f.template operator()<T, Op>() for the storage type T of `type` and the functor of `op`;
/// kAvg dispatches as OpSum (the caller passes the divisor). Nothing for invalid values, nor for a
/// bitwise op on a floating-point type (callers validate: redOpDefinedFor). Callable
/// from host code too (launchers choose their kernel instantiation with it).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename F>
FERRY_HOST_DEVICE void dispatchTypeOp(DataType type, RedOp op, F&& f) {
  dispatchType(type, op_detail::OpDispatch<std::remove_reference_t<F>>{op, f});
}

// ---- element arithmetic ---------------------------------------------------------------------

namespace rc_detail {

/// v / divisor in Acc<T>, rounded once. Integers: C truncation of the (wrapped) value.
template <typename T>
FERRY_HOST_DEVICE T divideAcc(Acc<T> v, uint32_t divisor) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (sizeof(T) == 8) {
      return static_cast<T>(v / static_cast<T>(divisor));
    } else if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(v) / static_cast<int64_t>(divisor));
    } else {
      return static_cast<T>(static_cast<uint64_t>(v) / divisor);
    }
  } else {
    return Arith<T>::fromAcc(v / static_cast<Acc<T>>(divisor));
  }
}

template <typename T, typename Op>
FERRY_HOST_DEVICE T apply(T a, T b) {
  return Arith<T>::fromAcc(Op()(Arith<T>::toAcc(a), Arith<T>::toAcc(b)));
}
template <typename T, typename Op>
FERRY_HOST_DEVICE T applyDivide(T a, T b, uint32_t divisor) {
  // Integers: Op already wrapped the result to T, the value C's division then truncates.
  return divideAcc<T>(Op()(Arith<T>::toAcc(a), Arith<T>::toAcc(b)), divisor);
}
template <typename T>
FERRY_HOST_DEVICE T divide(T a, uint32_t divisor) {
  return divideAcc<T>(Arith<T>::toAcc(a), divisor);
}

/// A word of W bytes viewed as W / sizeof(T) elements.
template <typename T, typename Word>
struct Lanes {
  static constexpr int kN = sizeof(Word) / sizeof(T);
  T e[kN];
};

template <typename T, typename Word>
FERRY_HOST_DEVICE Lanes<T, Word> unpack(Word w) {
  Lanes<T, Word> l;
  memcpy(&l, &w, sizeof(Word));
  return l;
}
template <typename T, typename Word>
FERRY_HOST_DEVICE Word pack(const Lanes<T, Word>& l) {
  Word w;
  memcpy(&w, &l, sizeof(Word));
  return w;
}

template <typename T, typename Op, typename Word>
FERRY_HOST_DEVICE Word applyWord(Word a, Word b) {
  Lanes<T, Word> x = unpack<T>(a);
  const Lanes<T, Word> y = unpack<T>(b);
  FERRY_UNROLL
  for (int i = 0; i < Lanes<T, Word>::kN; ++i) x.e[i] = apply<T, Op>(x.e[i], y.e[i]);
  return pack<T, Word>(x);
}
template <typename T, typename Op, typename Word>
FERRY_HOST_DEVICE Word applyDivideWord(Word a, Word b, uint32_t divisor) {
  Lanes<T, Word> x = unpack<T>(a);
  const Lanes<T, Word> y = unpack<T>(b);
  FERRY_UNROLL
  for (int i = 0; i < Lanes<T, Word>::kN; ++i) x.e[i] = applyDivide<T, Op>(x.e[i], y.e[i], divisor);
  return pack<T, Word>(x);
}
template <typename T, typename Word>
FERRY_HOST_DEVICE Word divideWord(Word a, uint32_t divisor) {
  Lanes<T, Word> x = unpack<T>(a);
  FERRY_UNROLL
  for (int i = 0; i < Lanes<T, Word>::kN; ++i) x.e[i] = divide<T>(x.e[i], divisor);
  return pack<T, Word>(x);
}

/// 16-byte vectors (or single elements, Word = T) `v` of every source combined; see reduceCopy.
/// kN words per thread at indices base + u * stride (u < kN), all in range.
template <typename T, typename Op, typename Word, int kN>
__device__ __forceinline__ void combineWords(int nSrcs, const T* const* srcs, int nDsts, T* const* dsts, size_t base,
                                             size_t stride, uint32_t divisor) {
  constexpr bool kDivides = std::is_same_v<Op, OpSum>;  // see reduceCopy
  Word acc[kN];
  const Word* s0 = reinterpret_cast<const Word*>(srcs[0]);
  FERRY_UNROLL
  for (int u = 0; u < kN; ++u) acc[u] = s0[base + u * stride];
  for (int s = 1; s < nSrcs; ++s) {
    const Word* sp = reinterpret_cast<const Word*>(srcs[s]);
    Word in[kN];
    FERRY_UNROLL
    for (int u = 0; u < kN; ++u) in[u] = sp[base + u * stride];
    if constexpr (kDivides) {
      if (divisor != 0 && s == nSrcs - 1) {
        FERRY_UNROLL
        for (int u = 0; u < kN; ++u) acc[u] = applyDivideWord<T, Op>(acc[u], in[u], divisor);
        continue;
      }
    }
    FERRY_UNROLL
    for (int u = 0; u < kN; ++u) acc[u] = applyWord<T, Op>(acc[u], in[u]);
  }
  if constexpr (kDivides) {
    if (nSrcs == 1 && divisor != 0) {
      FERRY_UNROLL
      for (int u = 0; u < kN; ++u) acc[u] = divideWord<T>(acc[u], divisor);
    }
  }
  for (int d = 0; d < nDsts; ++d) {
    Word* dp = reinterpret_cast<Word*>(dsts[d]);
    FERRY_UNROLL
    for (int u = 0; u < kN; ++u) dp[base + u * stride] = acc[u];
  }
}

/// Element range [begin, end) one element at a time (Word = T: a one-lane "vector").
template <typename T, typename Op>
__device__ __forceinline__ void combineScalar(int nSrcs, const T* const* srcs, int nDsts, T* const* dsts, size_t begin,
                                              size_t end, uint32_t divisor) {
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    T v = srcs[0][i];
    for (int s = 1; s < nSrcs; ++s) {
      v = (divisor != 0 && s == nSrcs - 1) ? applyDivide<T, Op>(v, srcs[s][i], divisor) : apply<T, Op>(v, srcs[s][i]);
    }
    if (nSrcs == 1 && divisor != 0) v = divide<T>(v, divisor);
    for (int d = 0; d < nDsts; ++d) dsts[d][i] = v;
  }
}

}  // namespace rc_detail

/// Vectors each thread keeps in flight per source in reduceCopy's body.
inline constexpr int kReduceCopyUnroll = 4;
/// The same for one element type. float16 and float8 convert every lane with a dozen integer
/// operations (16 lanes per vector for float8), so unrolling them four times made each of their
/// instantiations tens of thousands of PTX lines and the collective kernel's ptxas run several
/// minutes; they keep fewer vectors in flight (their reductions are rarer than float32/bfloat16).
template <typename T>
inline constexpr int kReduceCopyUnrollFor = std::is_same_v<T, Float8e4m3> || std::is_same_v<T, Float8e5m2> ? 1
                                            : std::is_same_v<T, Float16>                                   ? 2
                                                                         : kReduceCopyUnroll;

/// Block-cooperative reduce-copy (see the top of the file). Every thread of the block calls it
/// with the same arguments. srcs and dsts may alias exactly. nSrcs in [1, kMaxReduceSrcs], nDsts in
/// [0, kMaxReduceDsts]. divisor 0: no division.
/// Registers: the unrolled body holds 2 x kReduceCopyUnroll 16-byte vectors plus their float32
/// lanes, more than 64 registers per thread, so a kernel calling it launches with at most 512
/// threads per block unless it caps registers (__launch_bounds__), which costs spills.
/// Performance: many blocks of 256 threads come closer to the device-to-device copy bandwidth than
/// a few of 512, whose loads in flight do not cover the memory latency (evidence:
/// docs/PERFORMANCE.md, "GPU").
template <typename T, typename Op>
__device__ void reduceCopy(int nSrcs, const T* const* srcs, int nDsts, T* const* dsts, size_t count, uint32_t divisor) {
  constexpr size_t kVecElems = sizeof(uint4) / sizeof(T);
  if constexpr (!std::is_same_v<Op, OpSum>) {
    // Only avg (a sum) divides in practice; other ops honour a divisor on the scalar path, which
    // keeps the unrolled vector code, and nvcc's time, to one variant per op.
    if (divisor != 0) {
      rc_detail::combineScalar<T, Op>(nSrcs, srcs, nDsts, dsts, 0, count, divisor);
      return;
    }
  }
  // Phase 1: the common offset modulo 16 of every pointer, or "none".
  const uintptr_t offset = reinterpret_cast<uintptr_t>(srcs[0]) & 15u;
  bool common = offset % sizeof(T) == 0;
  for (int s = 1; s < nSrcs; ++s) common = common && (reinterpret_cast<uintptr_t>(srcs[s]) & 15u) == offset;
  for (int d = 0; d < nDsts; ++d) common = common && (reinterpret_cast<uintptr_t>(dsts[d]) & 15u) == offset;
  if (!common) {
    rc_detail::combineScalar<T, Op>(nSrcs, srcs, nDsts, dsts, 0, count, divisor);
    return;
  }
  size_t head = offset == 0 ? 0 : (16u - offset) / sizeof(T);
  if (head > count) head = count;
  rc_detail::combineScalar<T, Op>(nSrcs, srcs, nDsts, dsts, 0, head, divisor);

  // Phase 2: the aligned body, through pointers advanced past the head.
  const T* alignedSrcs[kMaxReduceSrcs];
  T* alignedDsts[kMaxReduceDsts];
  for (int s = 0; s < nSrcs; ++s) alignedSrcs[s] = srcs[s] + head;
  for (int d = 0; d < nDsts; ++d) alignedDsts[d] = dsts[d] + head;
  const size_t nVec = (count - head) / kVecElems;
  const size_t stride = blockDim.x;
  size_t v = threadIdx.x;
  constexpr int kUnroll = kReduceCopyUnrollFor<T>;
  if constexpr (kUnroll > 1) {
    for (; v + (kUnroll - 1) * stride < nVec; v += kUnroll * stride) {
      rc_detail::combineWords<T, Op, uint4, kUnroll>(nSrcs, alignedSrcs, nDsts, alignedDsts, v, stride, divisor);
    }
  }
  // Phase 3: remaining vectors, then the scalar tail.
  for (; v < nVec; v += stride) {
    rc_detail::combineWords<T, Op, uint4, 1>(nSrcs, alignedSrcs, nDsts, alignedDsts, v, stride, divisor);
  }
  rc_detail::combineScalar<T, Op>(nSrcs, srcs, nDsts, dsts, head + nVec * kVecElems, count, divisor);
}

/// Block-cooperative copy of `bytes` bytes from src to every dst (16-byte vectors, kReduceCopyUnroll
/// in flight per thread, when the pointers share their offset modulo 16; bytes otherwise). dsts may
/// include src itself. Written apart from reduceCopy<uint8_t>: that one carries the reduction loops
/// over sources and lanes, and the collective kernel copies at a dozen call sites, which made nvcc's
/// code (and ptxas's time) several times larger for nothing.
__device__ inline void copyBytes(int nDsts, void* const* dsts, const void* src, size_t bytes) {
  const auto* s = static_cast<const uint8_t*>(src);
  const uintptr_t offset = reinterpret_cast<uintptr_t>(s) & 15u;
  bool common = true;
  for (int d = 0; d < nDsts; ++d) common = common && (reinterpret_cast<uintptr_t>(dsts[d]) & 15u) == offset;
  size_t head = common ? (16u - offset) & 15u : bytes;
  if (head > bytes) head = bytes;
  for (size_t i = threadIdx.x; i < head; i += blockDim.x) {
    const uint8_t v = s[i];
    for (int d = 0; d < nDsts; ++d) static_cast<uint8_t*>(dsts[d])[i] = v;
  }
  if (head == bytes) return;
  const size_t nVec = (bytes - head) / 16, stride = blockDim.x;
  const auto* sv = reinterpret_cast<const uint4*>(s + head);
  size_t v = threadIdx.x;
  for (; v + (kReduceCopyUnroll - 1) * stride < nVec; v += kReduceCopyUnroll * stride) {
    uint4 x[kReduceCopyUnroll];
    FERRY_UNROLL
    for (int u = 0; u < kReduceCopyUnroll; ++u) x[u] = sv[v + u * stride];
    for (int d = 0; d < nDsts; ++d) {
      auto* dv = reinterpret_cast<uint4*>(static_cast<uint8_t*>(dsts[d]) + head);
      FERRY_UNROLL
      for (int u = 0; u < kReduceCopyUnroll; ++u) dv[v + u * stride] = x[u];
    }
  }
  for (; v < nVec; v += stride) {
    const uint4 x = sv[v];
    for (int d = 0; d < nDsts; ++d) reinterpret_cast<uint4*>(static_cast<uint8_t*>(dsts[d]) + head)[v] = x;
  }
  for (size_t i = head + nVec * 16 + threadIdx.x; i < bytes; i += blockDim.x) {
    const uint8_t b = s[i];
    for (int d = 0; d < nDsts; ++d) static_cast<uint8_t*>(dsts[d])[i] = b;
  }
}

// ---- LL packs -------------------------------------------------------------------------------

/// a op b on the 8 / sizeof(T) elements packed in each word (little-endian lanes).
template <typename T, typename Op>
__device__ __forceinline__ uint64_t applyPack8(uint64_t a, uint64_t b) {
  return rc_detail::applyWord<T, Op, uint64_t>(a, b);
}
/// (a op b) / divisor per element, rounded once (host sumDivide for Op = OpSum).
template <typename T, typename Op>
__device__ __forceinline__ uint64_t applyPack8Divide(uint64_t a, uint64_t b, uint32_t divisor) {
  return rc_detail::applyDivideWord<T, Op, uint64_t>(a, b, divisor);
}
/// a / divisor per element (host divide).
template <typename T>
__device__ __forceinline__ uint64_t dividePack8(uint64_t a, uint32_t divisor) {
  return rc_detail::divideWord<T, uint64_t>(a, divisor);
}

}  // namespace ferry::gpu
