// Host kernels for baseline x86-64 (SSE2, 16-byte vectors): the fallback every x86-64 CPU runs.
//
// Compiled without extra -m flags. There is no F16C, so float16 goes through the integer
// conversion in half.hpp, four lanes at a time; it gives the same bits as F16C (the tests compare
// every float16 pattern across instruction sets). The 16 <-> 32-bit lane moves use SSE2 unpack and
// pack instructions directly: GCC 12 turns the generic vector conversions into much longer
// sequences here. On a target other than x86 the portable codecs stand in.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/host/simd_kernels.hpp"

namespace ferry::kernels {
namespace {

#if defined(__SSE2__)
using U4 = VecOf<uint32_t, 16>::type;
using F4 = VecOf<float, 16>::type;

/// Four 16-bit values from p, zero-extended to 32-bit lanes (shifted up by 16 when kHigh).
template <bool kHigh>
inline U4 widen4(const uint16_t* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i zero = _mm_setzero_si128();
  return reinterpret_cast<U4>(kHigh ? _mm_unpacklo_epi16(zero, h) : _mm_unpacklo_epi16(h, zero));
}

/// Stores the low 16 bits of four 32-bit lanes to p.
inline void narrow4(uint16_t* p, U4 r) {
  const __m128i s = reinterpret_cast<__m128i>(signExtend16(r));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(s, s));
}

/// float16 <-> float32 with the integer conversion of half.hpp.
struct Sse2F16Codec {
  static F4 load(const uint16_t* p) { return reinterpret_cast<F4>(f16ToF32Bits(widen4<false>(p))); }
  static void store(uint16_t* p, F4 v) { narrow4(p, f32ToF16Bits(reinterpret_cast<U4>(v))); }
};

/// bfloat16 <-> float32: widening is placing the 16 bits on top of a zero half.
struct Sse2Bf16Codec {
  static F4 load(const uint16_t* p) { return reinterpret_cast<F4>(widen4<true>(p)); }
  static void store(uint16_t* p, F4 v) { narrow4(p, f32ToBf16Bits(reinterpret_cast<U4>(v))); }
};

using BaselineKernels = SimdKernels<16, Sse2F16Codec, Sse2Bf16Codec>;
#else
using BaselineKernels = SimdKernels<16, PortableF16Codec<16>, PortableBf16Codec<16> >;
#endif

}  // namespace

const KernelTable& baselineKernelTable() {
  static constexpr KernelTable kTable = BaselineKernels::makeTable(Isa::kBaseline);
  return kTable;
}

}  // namespace ferry::kernels
