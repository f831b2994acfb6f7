// Temporary stand-in for kernels/cuda/reduce_copy.cuh (engineer H1's, branch `dtypes`), with the same
// interface: dispatchTypeOp, reduceCopy, copyBytes, applyPack8, applyPack8Divide, dividePack8.
//
// Why this file exists: the collective kernels are written against H1's interface before it lands.
// This version is scalar (one element per thread per iteration) and covers the ten NCCL types
// without fp8; its rounding follows kernels/host (float16/bfloat16 in float32, round to nearest even;
// integers wrap; max/min propagate NaN; avg divides once, in the accumulation precision), so the
// emulated tests compare bit for bit against the host kernels. Delete it when reduce_copy.cuh lands
// (kernels.cu includes whichever exists, see FERRY_HAVE_KERNELS_REDUCE_COPY).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ferry/types.hpp"
#include "kernels/cuda/simt.hpp"

namespace ferry::kernels::cuda {

/// float16 and bfloat16 storage types (bits only; arithmetic goes through float).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

namespace fallback {

__device__ __forceinline__ float f16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, em = h & 0x7FFFu;
  uint32_t r;
  if (em >= 0x7C00u) {
    r = 0x7F800000u | ((em & 0x3FFu) << 13) | (em > 0x7C00u ? 0x00400000u : 0u);
  } else if (em < 0x0400u) {
    r = __float_as_uint(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  } else {
    r = (em << 13) + (112u << 23);
  }
  return __uint_as_float(r | sign);
}
__device__ __forceinline__ uint16_t floatToF16(float f) {
  const uint32_t x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  uint32_t r;
  if (ax > 0x7F800000u) {
    r = 0x7E00u | ((ax >> 13) & 0x03FFu);
  } else if (ax >= 0x477FF000u) {
    r = 0x7C00u;
  } else if (ax < 0x38800000u) {
    r = __float_as_uint(__uint_as_float(ax) + 0.5f) - 0x3F000000u;
  } else {
    uint32_t n = ax - (112u << 23);
    r = (n + 0x0FFFu + ((n >> 13) & 1u)) >> 13;
  }
  return static_cast<uint16_t>(r | sign);
}
__device__ __forceinline__ float bf16ToFloat(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
__device__ __forceinline__ uint16_t floatToBf16(float f) {
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/// Arithmetic view of a storage type: Acc is what the op computes in.
template <typename T>
struct Num {
  using Acc = T;
  __device__ static Acc load(T v) { return v; }
  __device__ static T store(Acc v) { return v; }
};
template <>
struct Num<Half> {
  using Acc = float;
  __device__ static float load(Half v) { return f16ToFloat(v.bits); }
  __device__ static Half store(float v) { return Half{floatToF16(v)}; }
};
template <>
struct Num<BFloat16> {
  using Acc = float;
  __device__ static float load(BFloat16 v) { return bf16ToFloat(v.bits); }
  __device__ static BFloat16 store(float v) { return BFloat16{floatToBf16(v)}; }
};

template <typename A>
__device__ __forceinline__ bool isNan(A v) {
  return v != v;  // false for integers
}
template <typename A>
__device__ __forceinline__ A wrapAdd(A a, A b) {
  if constexpr (static_cast<A>(-1) > static_cast<A>(0) || static_cast<A>(0.5) != 0) {
    return static_cast<A>(a + b);  // unsigned (wraps) or floating point
  } else {
    using U = decltype(static_cast<unsigned long long>(a));
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  }
}
template <typename A>
__device__ __forceinline__ A wrapMul(A a, A b) {
  if constexpr (static_cast<A>(0.5) != 0) {
    return a * b;
  } else {
    return static_cast<A>(static_cast<unsigned long long>(a) * static_cast<unsigned long long>(b));
  }
}
/// s / divisor: floating types in their accumulation precision, integers truncating toward zero.
template <typename A>
__device__ __forceinline__ A divideBy(A s, uint32_t divisor) {
  if constexpr (static_cast<A>(0.5) != 0) {
    return s / static_cast<A>(divisor);
  } else if constexpr (sizeof(A) < 8) {
    return static_cast<A>(static_cast<long long>(s) / static_cast<long long>(divisor));
  } else {
    return static_cast<A>(s / static_cast<A>(divisor));
  }
}

}  // namespace fallback

/// Reduction functors: apply(a, b) = a op b in the accumulation type.
struct OpSum {
  template <typename A>
  __device__ static A apply(A a, A b) { return fallback::wrapAdd(a, b); }
};
struct OpProd {
  template <typename A>
  __device__ static A apply(A a, A b) { return fallback::wrapMul(a, b); }
};
struct OpMax {
  template <typename A>
  __device__ static A apply(A a, A b) {
    A r = a > b ? a : b;
    r = fallback::isNan(b) ? b : r;
    return fallback::isNan(a) ? a : r;
  }
};
struct OpMin {
  template <typename A>
  __device__ static A apply(A a, A b) {
    A r = a < b ? a : b;
    r = fallback::isNan(b) ? b : r;
    return fallback::isNan(a) ? a : r;
  }
};

/// Calls f.template operator()<T, Op>() for the element type and op (kAvg as OpSum).
template <typename F>
__device__ void dispatchTypeOp(DataType type, RedOp op, F&& f) {
  auto withOp = [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case RedOp::kProd: f.template operator()<T, OpProd>(); break;
      case RedOp::kMax: f.template operator()<T, OpMax>(); break;
      case RedOp::kMin: f.template operator()<T, OpMin>(); break;
      default: f.template operator()<T, OpSum>(); break;
    }
  };
  switch (type) {
    case DataType::kInt8: withOp(int8_t{}); break;
    case DataType::kUint8: withOp(uint8_t{}); break;
    case DataType::kInt32: withOp(int32_t{}); break;
    case DataType::kUint32: withOp(uint32_t{}); break;
    case DataType::kInt64: withOp(int64_t{}); break;
    case DataType::kUint64: withOp(uint64_t{}); break;
    case DataType::kFloat16: withOp(Half{}); break;
    case DataType::kFloat32: withOp(float{}); break;
    case DataType::kFloat64: withOp(double{}); break;
    case DataType::kBfloat16: withOp(BFloat16{}); break;
    default: break;
  }
}

namespace fallback {
template <typename T, typename Op>
__device__ __forceinline__ T combine(T a, T b) {
  return Num<T>::store(Op::apply(Num<T>::load(a), Num<T>::load(b)));
}
template <typename T, typename Op>
__device__ __forceinline__ T combineDivide(T a, T b, uint32_t divisor) {
  return Num<T>::store(divideBy(Op::apply(Num<T>::load(a), Num<T>::load(b)), divisor));
}
template <typename T>
__device__ __forceinline__ T divideOnly(T a, uint32_t divisor) {
  return Num<T>::store(divideBy(Num<T>::load(a), divisor));
}
}  // namespace fallback

/// Block-cooperative reduce-and-copy (see reduce_copy.cuh's contract). dsts may alias srcs exactly.
template <typename T, typename Op>
__device__ void reduceCopy(int nSrcs, const T* const* srcs, int nDsts, T* const* dsts, size_t count, uint32_t divisor) {
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    T v = srcs[0][i];
    if (nSrcs == 1 && divisor != 0) v = fallback::divideOnly(v, divisor);
    for (int k = 1; k < nSrcs; ++k) {
      v = (k == nSrcs - 1 && divisor != 0) ? fallback::combineDivide<T, Op>(v, srcs[k][i], divisor)
                                           : fallback::combine<T, Op>(v, srcs[k][i]);
    }
    for (int d = 0; d < nDsts; ++d) dsts[d][i] = v;
  }
}

/// Block-cooperative copy of `bytes` bytes to every dst (dst may equal src).
__device__ inline void copyBytes(int nDsts, void* const* dsts, const void* src, size_t bytes) {
  const auto* s = static_cast<const uint8_t*>(src);
  bool aligned = (reinterpret_cast<uintptr_t>(s) & 7) == 0;
  for (int d = 0; d < nDsts; ++d) aligned = aligned && (reinterpret_cast<uintptr_t>(dsts[d]) & 7) == 0;
  size_t done = 0;
  if (aligned) {
    const size_t words = bytes / 8;
    for (size_t i = threadIdx.x; i < words; i += blockDim.x) {
      const uint64_t v = reinterpret_cast<const uint64_t*>(s)[i];
      for (int d = 0; d < nDsts; ++d) static_cast<uint64_t*>(dsts[d])[i] = v;
    }
    done = words * 8;
  }
  for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) {
    const uint8_t v = s[i];
    for (int d = 0; d < nDsts; ++d) static_cast<uint8_t*>(dsts[d])[i] = v;
  }
}

/// LL packs: 8 bytes of elements, element-wise a op b (and the fused divide of avg).
template <typename T, typename Op>
__device__ uint64_t applyPack8(uint64_t a, uint64_t b) {
  T x[8 / sizeof(T)], y[8 / sizeof(T)];
  memcpy(x, &a, 8);
  memcpy(y, &b, 8);
  for (size_t i = 0; i < 8 / sizeof(T); ++i) x[i] = fallback::combine<T, Op>(x[i], y[i]);
  memcpy(&a, x, 8);
  return a;
}
template <typename T, typename Op>
__device__ uint64_t applyPack8Divide(uint64_t a, uint64_t b, uint32_t divisor) {
  T x[8 / sizeof(T)], y[8 / sizeof(T)];
  memcpy(x, &a, 8);
  memcpy(y, &b, 8);
  for (size_t i = 0; i < 8 / sizeof(T); ++i) x[i] = fallback::combineDivide<T, Op>(x[i], y[i], divisor);
  memcpy(&a, x, 8);
  return a;
}
template <typename T>
__device__ uint64_t dividePack8(uint64_t a, uint32_t divisor) {
  T x[8 / sizeof(T)];
  memcpy(x, &a, 8);
  for (size_t i = 0; i < 8 / sizeof(T); ++i) x[i] = fallback::divideOnly(x[i], divisor);
  memcpy(&a, x, 8);
  return a;
}

}  // namespace ferry::kernels::cuda
