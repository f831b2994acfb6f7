// Streaming copy (kernels/host/copy.hpp). SSE2 only, so this file builds for baseline x86-64 and
// runs on every x86-64 CPU: the loop is bound by memory, where 16-byte stores fill a
// write-combining buffer as fast as wider ones.
#include "kernels/host/copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ferry::kernels {

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  constexpr size_t kLine = 64;
  if (bytes < 4096) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Ordinary stores up to the first cache line of dst, so that each streaming store below fills
  // whole lines: a partly written line is flushed to memory with a read-modify-write.
  const size_t head = (kLine - reinterpret_cast<uintptr_t>(d) % kLine) % kLine;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes & ~(kLine - 1);
  for (size_t i = 0; i < body; i += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  _mm_sfence();
  std::memcpy(d + body, s + body, bytes - body);
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace ferry::kernels
