// The element-wise kernels, written once over GCC vector types and compiled once per instruction set.
//
// Why vector types: `a + b`, `a > b ? a : b` and __builtin_convertvector on a GCC vector compile to
// the widest instructions the translation unit's -m flags allow (xmm for SSE2, ymm for AVX2, zmm for
// AVX-512), so one source gives all three instruction sets. The only intrinsics are in the "codecs"
// each instruction-set file supplies to move float16/bfloat16 values in and out of float32 lanes
// (F16C, and 16 <-> 32-bit lane moves that GCC 12 lowers poorly from vector code). Unlike an
// auto-vectorised loop, the vector body does not depend on the compiler proving that dst does not
// overlap a or b, so the in-place case (dst == a or dst == b) runs vectorised too.
//
// Vocabulary:
// - W: vector width in bytes (16, 32, 64). A "step" handles one vector of results: W / sizeof(T)
//   elements, or W / 4 for float16/bfloat16 (computed in float32 lanes) and for 8-bit division
//   (computed in float32), W / 8 for 32-bit division (computed in float64).
// - Tail: the last count % step elements are staged through a zeroed stack buffer of one step and
//   run through the same vector code, so a tail never takes a different (scalar) arithmetic path.
//
// Arithmetic rules (the contract in reduce.hpp):
// - integer sum/prod run in unsigned lanes (wrap-around, no undefined behaviour);
// - max/min: (a > b ? a : b); equal operands (+0, -0) give max +0 and min -0; a NaN wins, and of
//   two NaNs the larger bit pattern (applySpecials). No case depends on which operand is a, so a
//   reduction's bits do not depend on the order of the ranks, and all instruction sets agree;
// - band/bor/bxor: &, |, ^ on integer lanes (no floating-point entries);
// - division: floats divide in their own precision (float32 for the half types) and round once;
//   integers truncate toward zero. 8-bit sums are divided in float32 and 32-bit sums in float64,
//   which is exact: the quotient's rounding error is smaller than its distance to the next integer,
//   so truncating the float quotient gives C's result. Divisors above 256 give 0 for 8-bit sums and
//   are clamped to 256 to stay exact in float32. 64-bit integers divide with scalar instructions.
//
// This header must be included only by the per-instruction-set files, each compiling it with its own
// -m flags. Everything is in an anonymous namespace so that no two instruction sets share a symbol.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/host/fp8.hpp"
#include "kernels/host/half.hpp"
#include "kernels/host/kernel_table.hpp"

namespace ferry::kernels {
namespace {

/// Unaligned load of a whole vector (or any trivially copyable V) from p.
template <typename V, typename T>
inline V loadVec(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

/// Unaligned store of a whole vector to p.
template <typename T, typename V>
inline void storeVec(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

/// bfloat16 <-> float32 lanes with portable vector code: the codec for targets without x86
/// intrinsics. (On x86, GCC 12 lowers these 16 <-> 32-bit lane conversions poorly, so each x86
/// instruction-set file brings its own codecs built on a few intrinsics.)
template <unsigned W>
struct PortableBf16Codec {
  using F = typename VecOf<float, W>::type;
  using U = typename VecOf<uint32_t, W>::type;
  using H = typename VecOf<uint16_t, W / 2>::type;
  static F load(const uint16_t* p) {
    return reinterpret_cast<F>(bf16ToF32Bits(__builtin_convertvector(loadVec<H>(p), U)));
  }
  static void store(uint16_t* p, F v) {
    storeVec(p, __builtin_convertvector(f32ToBf16Bits(reinterpret_cast<U>(v)), H));
  }
};

/// float16 <-> float32 lanes with portable vector code (integer conversion from half.hpp).
template <unsigned W>
struct PortableF16Codec {
  using F = typename VecOf<float, W>::type;
  using U = typename VecOf<uint32_t, W>::type;
  using H = typename VecOf<uint16_t, W / 2>::type;
  static F load(const uint16_t* p) {
    return reinterpret_cast<F>(f16ToF32Bits(__builtin_convertvector(loadVec<H>(p), U)));
  }
  static void store(uint16_t* p, F v) { storeVec(p, __builtin_convertvector(f32ToF16Bits(reinterpret_cast<U>(v)), H)); }
};

/// float8 <-> float32 lanes: W / 4 bytes widen to one vector of float32. No x86 instruction set
/// converts float8, so every instruction set uses this portable code and gets the same bits.
template <unsigned W, typename Format>
struct PortableFp8Codec {
  using Storage = uint8_t;
  using F = typename VecOf<float, W>::type;
  using U = typename VecOf<uint32_t, W>::type;
  using B = typename VecOf<uint8_t, W / 4>::type;
  static F load(const uint8_t* p) {
    return reinterpret_cast<F>(fp8ToF32Bits<Format>(__builtin_convertvector(loadVec<B>(p), U)));
  }
  static void store(uint8_t* p, F v) {
    storeVec(p, __builtin_convertvector(f32ToFp8Bits<Format>(reinterpret_cast<U>(v)), B));
  }
};

/// The element type a codec reads and writes: its Storage, else uint16_t (the half codecs).
template <typename Codec, typename = void>
struct CodecStorage {
  using type = uint16_t;
};
template <typename Codec>
struct CodecStorage<Codec, std::void_t<typename Codec::Storage>> {
  using type = typename Codec::Storage;
};

/// 16-bit results in the low half of each 32-bit lane, sign-extended, so that a signed-saturating
/// pack (packssdw) narrows them without changing any bit.
template <typename U>
inline U signExtend16(U r) {
  return (r ^ 0x8000u) - 0x8000u;
}

/// All kernels for vectors of W bytes. The codecs convert W / 4 float16 (F16Codec), bfloat16
/// (Bf16Codec) or float8 (PortableFp8Codec, the same on every instruction set) values to one
/// vector of float32 lanes (load) and back (store).
template <unsigned W, typename F16Codec, typename Bf16Codec>
struct SimdKernels {
  template <typename T>
  using Vec = typename VecOf<T, W>::type;
  template <typename T>
  static constexpr size_t kLanes = W / sizeof(T);

  // ---- element-wise ops on whole vectors ----------------------------------------------------

  struct Sum {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      if constexpr (std::is_integral_v<T>) {
        using UV = Vec<std::make_unsigned_t<T>>;
        return reinterpret_cast<Vec<T>>(reinterpret_cast<UV>(a) + reinterpret_cast<UV>(b));
      } else {
        return a + b;
      }
    }
  };
  struct Prod {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      if constexpr (std::is_integral_v<T>) {
        using UV = Vec<std::make_unsigned_t<T>>;
        return reinterpret_cast<Vec<T>>(reinterpret_cast<UV>(a) * reinterpret_cast<UV>(b));
      } else {
        return a * b;
      }
    }
  };
  /// The special values' rule (reduce.hpp) on top of an ordered selection r: operands that compare
  /// equal give max the AND of their bits and min the OR (so +0 and -0 give max +0, min -0);
  /// a NaN operand wins, and of two NaNs the larger bit pattern. Every case is symmetric in a and
  /// b, so a reduction's result does not depend on the order of its operands.
  template <typename T, bool kMax>
  static Vec<T> applySpecials(Vec<T> r, Vec<T> a, Vec<T> b) {
    if constexpr (std::is_floating_point_v<T>) {
      using UV = Vec<std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
      const UV ua = reinterpret_cast<UV>(a), ub = reinterpret_cast<UV>(b);
      r = a == b ? reinterpret_cast<Vec<T>>(kMax ? ua & ub : ua | ub) : r;
      r = b != b ? b : r;
      r = a != a ? a : r;
      r = (a != a) & (b != b) ? (ua > ub ? a : b) : r;
    }
    return r;
  }
  struct Max {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      return applySpecials<T, true>(a > b ? a : b, a, b);
    }
  };
  struct Min {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      return applySpecials<T, false>(a < b ? a : b, a, b);
    }
  };

  /// Bitwise ops, for integer T only (the table leaves them null for floating-point types).
  struct Band {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      return a & b;
    }
  };
  struct Bor {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      return a | b;
    }
  };
  struct Bxor {
    template <typename T>
    static Vec<T> apply(Vec<T> a, Vec<T> b) {
      return a ^ b;
    }
  };

  // ---- loop driver ------------------------------------------------------------------------

  /// Runs step(d, x, y) over count elements, kStep at a time, four steps per iteration, and the
  /// tail through a staged step. y may equal x (unary kernels ignore it).
  template <typename T, size_t kStep, typename Step>
  static void forEachStep(T* dst, const T* a, const T* b, size_t count, Step step) {
    size_t i = 0;
    for (; i + 4 * kStep <= count; i += 4 * kStep) {
      step(dst + i, a + i, b + i);
      step(dst + i + kStep, a + i + kStep, b + i + kStep);
      step(dst + i + 2 * kStep, a + i + 2 * kStep, b + i + 2 * kStep);
      step(dst + i + 3 * kStep, a + i + 3 * kStep, b + i + 3 * kStep);
    }
    for (; i + kStep <= count; i += kStep) {
      step(dst + i, a + i, b + i);
    }
    if (i < count) {
      T ta[kStep] = {};
      T tb[kStep] = {};
      T td[kStep];
      const size_t bytes = (count - i) * sizeof(T);
      __builtin_memcpy(ta, a + i, bytes);
      __builtin_memcpy(tb, b + i, bytes);
      step(td, ta, tb);
      __builtin_memcpy(dst + i, td, bytes);
    }
  }

  // ---- reduce -----------------------------------------------------------------------------

  /// Integer and float32/float64 types: one vector of T per step.
  template <typename T, typename Op>
  static void reduceKernel(void* dst, const void* a, const void* b, size_t count) {
    forEachStep<T, kLanes<T>>(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count,
                              [](T* d, const T* x, const T* y) {
                                storeVec(d, Op::template apply<T>(loadVec<Vec<T>>(x), loadVec<Vec<T>>(y)));
                              });
  }

  /// float16/bfloat16/float8: widen to float32 lanes, compute, round back once.
  template <typename Codec, typename Op>
  static void reduceHalfKernel(void* dst, const void* a, const void* b, size_t count) {
    using S = typename CodecStorage<Codec>::type;
    forEachStep<S, kLanes<float>>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), count,
                                  [](S* d, const S* x, const S* y) {
                                    Codec::store(d, Op::template apply<float>(Codec::load(x), Codec::load(y)));
                                  });
  }

  // ---- sumDivide / divide -----------------------------------------------------------------

  /// Integer sum with wrap-around on a vector of any width.
  template <typename T, typename V>
  static V wrapSum(V a, V b) {
    using UV = typename VecOf<std::make_unsigned_t<T>, sizeof(V)>::type;
    return reinterpret_cast<V>(reinterpret_cast<UV>(a) + reinterpret_cast<UV>(b));
  }

  /// dst = (a + b) / divisor when kSum, else a / divisor (b is then ignored).
  template <typename T, bool kSum>
  static void divideKernel(T* dst, const T* a, const T* b, size_t count, uint32_t divisor) {
    if constexpr (std::is_floating_point_v<T>) {
      const Vec<T> dv = Vec<T>{} + static_cast<T>(divisor);
      forEachStep<T, kLanes<T>>(dst, a, b, count, [dv](T* d, const T* x, const T* y) {
        Vec<T> s = loadVec<Vec<T>>(x);
        if constexpr (kSum) s += loadVec<Vec<T>>(y);
        storeVec(d, s / dv);
      });
    } else if constexpr (sizeof(T) == 1) {
      // |sum| <= 255, so any divisor above 256 truncates to 0 just as 256 does.
      using N = typename VecOf<T, W / 4>::type;
      const Vec<float> dv = Vec<float>{} + static_cast<float>(divisor < 256u ? divisor : 256u);
      forEachStep<T, kLanes<float>>(dst, a, b, count, [dv](T* d, const T* x, const T* y) {
        N s = loadVec<N>(x);
        if constexpr (kSum) s = wrapSum<T>(s, loadVec<N>(y));
        const Vec<float> q = __builtin_convertvector(s, Vec<float>) / dv;
        storeVec(d, __builtin_convertvector(__builtin_convertvector(q, Vec<int32_t>), N));
      });
    } else if constexpr (sizeof(T) == 4) {
      using N = typename VecOf<T, W / 2>::type;
      const Vec<double> dv = Vec<double>{} + static_cast<double>(divisor);
      forEachStep<T, kLanes<double>>(dst, a, b, count, [dv](T* d, const T* x, const T* y) {
        N s = loadVec<N>(x);
        if constexpr (kSum) s = wrapSum<T>(s, loadVec<N>(y));
        storeVec(d, __builtin_convertvector(__builtin_convertvector(s, Vec<double>) / dv, N));
      });
    } else {
      // 64-bit: no SIMD integer division and no exact float path; wrap in unsigned, divide as T.
      using U = std::make_unsigned_t<T>;
      const T dv = static_cast<T>(divisor);
      for (size_t i = 0; i < count; ++i) {
        const U s = kSum ? static_cast<U>(static_cast<U>(a[i]) + static_cast<U>(b[i])) : static_cast<U>(a[i]);
        dst[i] = static_cast<T>(static_cast<T>(s) / dv);
      }
    }
  }

  template <typename Codec, bool kSum, typename S = typename CodecStorage<Codec>::type>
  static void divideHalfKernel(S* dst, const S* a, const S* b, size_t count, uint32_t divisor) {
    const Vec<float> dv = Vec<float>{} + static_cast<float>(divisor);
    forEachStep<S, kLanes<float>>(dst, a, b, count, [dv](S* d, const S* x, const S* y) {
      Vec<float> s = Codec::load(x);
      if constexpr (kSum) s += Codec::load(y);
      Codec::store(d, s / dv);
    });
  }

  /// Adapters from the table's untyped signatures. Elem is T, or a codec for the half types.
  template <typename Elem>
  static void sumDivide(void* dst, const void* a, const void* b, size_t count, uint32_t divisor) {
    if constexpr (std::is_arithmetic_v<Elem>) {
      divideKernel<Elem, true>(static_cast<Elem*>(dst), static_cast<const Elem*>(a), static_cast<const Elem*>(b), count,
                               divisor);
    } else {
      using S = typename CodecStorage<Elem>::type;
      divideHalfKernel<Elem, true>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), count,
                                   divisor);
    }
  }
  template <typename Elem>
  static void divide(void* dst, const void* src, size_t count, uint32_t divisor) {
    if constexpr (std::is_arithmetic_v<Elem>) {
      const Elem* s = static_cast<const Elem*>(src);
      divideKernel<Elem, false>(static_cast<Elem*>(dst), s, s, count, divisor);
    } else {
      using S = typename CodecStorage<Elem>::type;
      const S* s = static_cast<const S*>(src);
      divideHalfKernel<Elem, false>(static_cast<S*>(dst), s, s, count, divisor);
    }
  }

  // ---- table ------------------------------------------------------------------------------

  template <typename Elem>
  static constexpr void fill(KernelTable& t, DataType type) {
    const int k = static_cast<int>(type);
    if constexpr (std::is_arithmetic_v<Elem>) {
      t.reduce[k][static_cast<int>(RedOp::kSum)] = &reduceKernel<Elem, Sum>;
      t.reduce[k][static_cast<int>(RedOp::kProd)] = &reduceKernel<Elem, Prod>;
      t.reduce[k][static_cast<int>(RedOp::kMax)] = &reduceKernel<Elem, Max>;
      t.reduce[k][static_cast<int>(RedOp::kMin)] = &reduceKernel<Elem, Min>;
      if constexpr (std::is_integral_v<Elem>) {
        t.reduce[k][static_cast<int>(RedOp::kBand)] = &reduceKernel<Elem, Band>;
        t.reduce[k][static_cast<int>(RedOp::kBor)] = &reduceKernel<Elem, Bor>;
        t.reduce[k][static_cast<int>(RedOp::kBxor)] = &reduceKernel<Elem, Bxor>;
      }
    } else {
      t.reduce[k][static_cast<int>(RedOp::kSum)] = &reduceHalfKernel<Elem, Sum>;
      t.reduce[k][static_cast<int>(RedOp::kProd)] = &reduceHalfKernel<Elem, Prod>;
      t.reduce[k][static_cast<int>(RedOp::kMax)] = &reduceHalfKernel<Elem, Max>;
      t.reduce[k][static_cast<int>(RedOp::kMin)] = &reduceHalfKernel<Elem, Min>;
    }
    t.sumDivide[k] = &sumDivide<Elem>;
    t.divide[k] = &divide<Elem>;
  }

  /// The complete table, built at compile time.
  static constexpr KernelTable makeTable(Isa isa) {
    KernelTable t{};
    t.isa = isa;
    fill<int8_t>(t, DataType::kInt8);
    fill<uint8_t>(t, DataType::kUint8);
    fill<int32_t>(t, DataType::kInt32);
    fill<uint32_t>(t, DataType::kUint32);
    fill<int64_t>(t, DataType::kInt64);
    fill<uint64_t>(t, DataType::kUint64);
    fill<F16Codec>(t, DataType::kFloat16);
    fill<float>(t, DataType::kFloat32);
    fill<double>(t, DataType::kFloat64);
    fill<Bf16Codec>(t, DataType::kBfloat16);
    fill<PortableFp8Codec<W, E4m3>>(t, DataType::kFloat8e4m3);
    fill<PortableFp8Codec<W, E5m2>>(t, DataType::kFloat8e5m2);
    return t;
  }
};

}  // namespace
}  // namespace ferry::kernels
