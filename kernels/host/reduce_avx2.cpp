// Host kernels for AVX2 (32-byte vectors), with F16C for float16 conversion.
//
// Compiled with -mavx2 -mf16c -mfma (see kernels/meson.build) and only ever called after the
// dispatcher checked that the CPU has all three. Eight float16 values widen to one ymm of float32
// with vcvtph2ps and narrow back with vcvtps2ph in round-to-nearest-even mode; bfloat16 widens
// with vpmovzxwd and a shift, and narrows with the integer rounding of half.hpp and vpackssdw.
#include <immintrin.h>

#include "kernels/host/simd_kernels.hpp"

namespace ferry::kernels {
namespace {

using U8 = VecOf<uint32_t, 32>::type;
using F8 = VecOf<float, 32>::type;

/// float16 <-> float32 lanes with F16C, eight values per step.
struct F16cCodec {
  static F8 load(const uint16_t* p) {
    return reinterpret_cast<F8>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(uint16_t* p, F8 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(reinterpret_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
  }
};

/// bfloat16 <-> float32 lanes, eight values per step.
struct Avx2Bf16Codec {
  static F8 load(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return reinterpret_cast<F8>(_mm256_slli_epi32(w, 16));
  }
  static void store(uint16_t* p, F8 v) {
    const __m256i r = reinterpret_cast<__m256i>(signExtend16(f32ToBf16Bits(reinterpret_cast<U8>(v))));
    const __m128i packed = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};

}  // namespace

const KernelTable& avx2KernelTable() {
  static constexpr KernelTable kTable = SimdKernels<32, F16cCodec, Avx2Bf16Codec>::makeTable(Isa::kAvx2);
  return kTable;
}

}  // namespace ferry::kernels
