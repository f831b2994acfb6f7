/*
 * Checks for the C API tests: each failed check prints one line naming the rank, the place and
 * what differed (with ncclGetLastError's text for NCCL calls) and returns 1 from the test case.
 */
#ifndef FERRY_TEST_NCCL_CHECK_H
#define FERRY_TEST_NCCL_CHECK_H

#include <stdio.h>
#include <string.h>

#include "ferry/nccl.h"

/* This process's rank, for messages. */
extern int g_rank;

#define CHECK(cond, ...)                                                                         \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                              \
      fputc('\n', stderr);                                                                       \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

/* The call must succeed. */
#define CHECK_NCCL(call)                                                                                        \
  do {                                                                                                          \
    ncclResult_t r_ = (call);                                                                                   \
    if (r_ != ncclSuccess) {                                                                                    \
      fprintf(stderr, "[rank %d] %s:%d: %s returned %d (%s): %s\n", g_rank, __FILE__, __LINE__, #call, (int)r_, \
              ncclGetErrorString(r_), ncclGetLastError(NULL));                                                  \
      return 1;                                                                                                 \
    }                                                                                                           \
  } while (0)

/* The call must fail with `code`, and ncclGetLastError must then contain `words`. */
#define CHECK_FAILS(call, code, words)                                                                               \
  do {                                                                                                               \
    ncclResult_t r_ = (call);                                                                                        \
    if (r_ != (code)) {                                                                                              \
      fprintf(stderr, "[rank %d] %s:%d: %s returned %d, expected %d (%s)\n", g_rank, __FILE__, __LINE__, #call,      \
              (int)r_, (int)(code), ncclGetErrorString(code));                                                       \
      return 1;                                                                                                      \
    }                                                                                                                \
    CHECK(strstr(ncclGetLastError(NULL), (words)) != NULL, "last error \"%s\" lacks \"%s\"", ncclGetLastError(NULL), \
          (words));                                                                                                  \
  } while (0)

/* Run one test case; return from the caller on failure. */
#define RUN(test, ...)                                         \
  do {                                                         \
    if ((test)(__VA_ARGS__) != 0) {                            \
      fprintf(stderr, "[rank %d] %s failed\n", g_rank, #test); \
      return 1;                                                \
    }                                                          \
  } while (0)

#endif
