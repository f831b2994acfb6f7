/*
 * Element access by ncclDataType_t, for tests whose expected values are small integers: those are
 * exact in every type (float16 up to 2048, bfloat16 up to 256, float8e4m3 up to 16, float8e5m2 up
 * to 8), so results compare exactly.
 */
#ifndef FERRY_TEST_NCCL_VALUES_H
#define FERRY_TEST_NCCL_VALUES_H

#include <stddef.h>

#include "ferry/nccl.h"

/* Bytes of one element. */
size_t type_size(ncclDataType_t type);
/* Lower-case name ("float16"). */
const char* type_name(ncclDataType_t type);
/* buf[i] = v (v a small integer; negative only for signed and floating types). */
void set_value(void* buf, ncclDataType_t type, size_t i, long v);
/* buf[i] as an integer (floating values are exact small integers in these tests). */
long get_value(const void* buf, ncclDataType_t type, size_t i);

#endif
