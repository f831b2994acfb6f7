/* Element access by ncclDataType_t (values.h), with float16 and bfloat16 built bit by bit. */
#include "values.h"

#include <stdint.h>
#include <string.h>

size_t type_size(ncclDataType_t type) {
  static const size_t sizes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sizes[type];
}

const char* type_name(ncclDataType_t type) {
  static const char* const names[ncclNumTypes] = {"int8",    "uint8",    "int32",      "uint32",
                                                  "int64",   "uint64",   "float16",    "float32",
                                                  "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return names[type];
}

/* Integers below 2^11 are normal float16 numbers with an exact significand. */
static uint16_t half_of(long v) {
  uint16_t sign = v < 0 ? 0x8000u : 0;
  unsigned long m = (unsigned long)(v < 0 ? -v : v);
  if (m == 0) return sign;
  int e = 0;
  while ((m >> (e + 1)) != 0) ++e;
  return (uint16_t)(sign | (unsigned)(e + 15) << 10 | (unsigned)((m << (10 - e)) & 0x3ffu));
}

static long of_half(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  if (e == 0) return 0;
  long m = (long)((h & 0x3ffu) | 0x400u);
  long v = e >= 25 ? m << (e - 25) : m >> (25 - e);
  return (h & 0x8000u) ? -v : v;
}

/* Integers up to 16 (e4m3, 3 mantissa bits) or 8 (e5m2, 2 bits) are exact float8 values; larger
 * ones are not used with float8. */
static uint8_t fp8_of(long v, int mant_bits) {
  const int bias = mant_bits == 3 ? 7 : 15;
  uint8_t sign = v < 0 ? 0x80u : 0;
  unsigned long m = (unsigned long)(v < 0 ? -v : v);
  if (m == 0) return sign;
  int e = 0;
  while ((m >> (e + 1)) != 0) ++e;
  unsigned frac = e >= mant_bits ? (unsigned)(m >> (e - mant_bits)) : (unsigned)(m << (mant_bits - e));
  return (uint8_t)(sign | (unsigned)(e + bias) << mant_bits | (frac & ((1u << mant_bits) - 1)));
}

static long of_fp8(uint8_t b, int mant_bits) {
  const int bias = mant_bits == 3 ? 7 : 15;
  int e = (b & 0x7f) >> mant_bits;
  if (e == 0) return 0;
  long m = (long)((b & ((1u << mant_bits) - 1)) | (1u << mant_bits));
  int shift = e - bias - mant_bits;
  long v = shift >= 0 ? m << shift : m >> -shift;
  return (b & 0x80u) ? -v : v;
}

void set_value(void* buf, ncclDataType_t type, size_t i, long v) {
  char* p = (char*)buf + i * type_size(type);
  switch (type) {
    case ncclInt8: {
      int8_t x = (int8_t)v;
      memcpy(p, &x, 1);
      break;
    }
    case ncclUint8: {
      uint8_t x = (uint8_t)v;
      memcpy(p, &x, 1);
      break;
    }
    case ncclInt32: {
      int32_t x = (int32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclUint32: {
      uint32_t x = (uint32_t)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclInt64: {
      int64_t x = (int64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclUint64: {
      uint64_t x = (uint64_t)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclFloat16: {
      uint16_t x = half_of(v);
      memcpy(p, &x, 2);
      break;
    }
    case ncclFloat8e4m3: {
      uint8_t x = fp8_of(v, 3);
      memcpy(p, &x, 1);
      break;
    }
    case ncclFloat8e5m2: {
      uint8_t x = fp8_of(v, 2);
      memcpy(p, &x, 1);
      break;
    }
    case ncclFloat32: {
      float x = (float)v;
      memcpy(p, &x, 4);
      break;
    }
    case ncclFloat64: {
      double x = (double)v;
      memcpy(p, &x, 8);
      break;
    }
    case ncclBfloat16: {
      /* bfloat16 is the top half of a float32; small integers lose nothing. */
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t x = (uint16_t)(bits >> 16);
      memcpy(p, &x, 2);
      break;
    }
    default: break;
  }
}

long get_value(const void* buf, ncclDataType_t type, size_t i) {
  const char* p = (const char*)buf + i * type_size(type);
  switch (type) {
    case ncclInt8: {
      int8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case ncclUint8: {
      uint8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case ncclInt32: {
      int32_t x;
      memcpy(&x, p, 4);
      return x;
    }
    case ncclUint32: {
      uint32_t x;
      memcpy(&x, p, 4);
      return (long)x;
    }
    case ncclInt64: {
      int64_t x;
      memcpy(&x, p, 8);
      return (long)x;
    }
    case ncclUint64: {
      uint64_t x;
      memcpy(&x, p, 8);
      return (long)x;
    }
    case ncclFloat16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return of_half(x);
    }
    case ncclFloat8e4m3: {
      uint8_t x;
      memcpy(&x, p, 1);
      return of_fp8(x, 3);
    }
    case ncclFloat8e5m2: {
      uint8_t x;
      memcpy(&x, p, 1);
      return of_fp8(x, 2);
    }
    case ncclFloat32: {
      float x;
      memcpy(&x, p, 4);
      return (long)x;
    }
    case ncclFloat64: {
      double x;
      memcpy(&x, p, 8);
      return (long)x;
    }
    case ncclBfloat16: {
      uint16_t x;
      memcpy(&x, p, 2);
      uint32_t bits = (uint32_t)x << 16;
      float f;
      memcpy(&f, &bits, 4);
      return (long)f;
    }
    default: return 0;
  }
}
