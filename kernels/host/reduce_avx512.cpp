// Host kernels for AVX-512 (64-byte vectors): F for the arithmetic, BW for 8-bit lanes, DQ for
// 64-bit multiply and float64 <-> integer conversion, VL for the narrower vectors the division
// kernels use.
//
// Compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl (see kernels/meson.build) and only ever
// called after the dispatcher checked that the CPU has all four. Sixteen float16 values widen to
// one zmm of float32 with vcvtph2ps and narrow back with vcvtps2ph in round-to-nearest-even mode;
// bfloat16 widens with vpmovzxwd and a shift and narrows with half.hpp's rounding and vpmovdw.
// (AVX512_BF16's vcvtneps2bf16 is not used: it flushes subnormals and is not in the required set.)
#include <immintrin.h>

#include "kernels/host/simd_kernels.hpp"

namespace ferry::kernels {
namespace {

using U16 = VecOf<uint32_t, 64>::type;
using F16 = VecOf<float, 64>::type;

// The codecs use the zero-masked intrinsics with an all-ones mask instead of the plain ones: those
// pass an "undefined" operand that trips GCC 12's -Wmaybe-uninitialized. The compiler drops the mask.

/// float16 <-> float32 lanes with the AVX-512 conversions, sixteen values per step.
struct Avx512F16Codec {
  static F16 load(const uint16_t* p) {
    return reinterpret_cast<F16>(
        _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static void store(uint16_t* p, F16 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_maskz_cvtps_ph(0xFFFF, reinterpret_cast<__m512>(v), _MM_FROUND_TO_NEAREST_INT));
  }
};

/// bfloat16 <-> float32 lanes, sixteen values per step.
struct Avx512Bf16Codec {
  static F16 load(const uint16_t* p) {
    const __m512i w = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return reinterpret_cast<F16>(bf16ToF32Bits(reinterpret_cast<U16>(w)));
  }
  static void store(uint16_t* p, F16 v) {
    const __m512i r = reinterpret_cast<__m512i>(f32ToBf16Bits(reinterpret_cast<U16>(v)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_cvtepi32_epi16(0xFFFF, r));
  }
};

}  // namespace

const KernelTable& avx512KernelTable() {
  static constexpr KernelTable kTable = SimdKernels<64, Avx512F16Codec, Avx512Bf16Codec>::makeTable(Isa::kAvx512);
  return kTable;
}

}  // namespace ferry::kernels
