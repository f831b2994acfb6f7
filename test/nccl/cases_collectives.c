/* Collectives on host memory with exact results: every type, every reduction, every root. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "check.h"
#include "values.h"

/* Above one pipelining slice (256 KiB of float32), so the ring runs several slices per step. */
enum { kLarge = 70001 };

/* sum over ranks of (r + i % 5) for every type, in and out of place, counts 0, 1 and 1000; float8
 * holds few integers exactly, so it sums i % 2 (at most 8 with 8 ranks). */
int test_allreduce_all_types(ncclComm_t comm, int rank, int n) {
  const size_t counts[] = {0, 1, 1000};
  for (int t = 0; t < ncclNumTypes; ++t) {
    ncclDataType_t type = (ncclDataType_t)t;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      size_t count = counts[c];
      char* in = malloc(count * 8 + 8);
      char* out = malloc(count * 8 + 8);
      const int fp8 = type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
      for (size_t i = 0; i < count; ++i) set_value(in, type, i, fp8 ? (long)(i % 2) : rank + (long)(i % 5));
      CHECK_NCCL(ncclAllReduce(in, out, count, type, ncclSum, comm, NULL));
      CHECK_NCCL(ncclAllReduce(in, in, count, type, ncclSum, comm, NULL)); /* in place */
      for (size_t i = 0; i < count; ++i) {
        long want = fp8 ? (long)n * (long)(i % 2) : (long)n * (long)(i % 5) + (long)n * (n - 1) / 2;
        CHECK(get_value(out, type, i) == want, "%s count %zu [%zu] = %ld, expected %ld", type_name(type), count, i,
              get_value(out, type, i), want);
        CHECK(get_value(in, type, i) == want, "in place %s [%zu]", type_name(type), i);
      }
      free(in);
      free(out);
    }
  }
  return 0;
}

/* prod, max, min on int32 and avg on float32 over kLarge elements: x = (rank + 1) * (i % 3 + 1). */
int test_allreduce_ops(ncclComm_t comm, int rank, int n) {
  int32_t* in = malloc(kLarge * sizeof(int32_t));
  int32_t* out = malloc(kLarge * sizeof(int32_t));
  float* fin = malloc(kLarge * sizeof(float));
  float* fout = malloc(kLarge * sizeof(float));
  long factorial = 1;
  for (int r = 1; r <= n; ++r) factorial *= r;
  for (size_t i = 0; i < kLarge; ++i) {
    in[i] = (rank + 1) * (int32_t)(i % 3 + 1);
    fin[i] = (float)in[i];
  }
  const ncclRedOp_t ops[] = {ncclProd, ncclMax, ncclMin};
  for (int o = 0; o < 3; ++o) {
    CHECK_NCCL(ncclAllReduce(in, out, kLarge, ncclInt32, ops[o], comm, NULL));
    for (size_t i = 0; i < kLarge; ++i) {
      long k = (long)(i % 3 + 1), want = k;
      if (ops[o] == ncclProd) {
        want = factorial;
        for (int r = 0; r < n; ++r) want *= k;
      } else if (ops[o] == ncclMax) {
        want = n * k;
      }
      CHECK(out[i] == want, "op %d [%zu] = %d, expected %ld", (int)ops[o], i, out[i], want);
    }
  }
  CHECK_NCCL(ncclAllReduce(fin, fout, kLarge, ncclFloat32, ncclAvg, comm, NULL));
  for (size_t i = 0; i < kLarge; ++i) {
    float want = (float)(i % 3 + 1) * (float)(n + 1) / 2.0f;
    CHECK(fout[i] == want, "avg [%zu] = %g, expected %g", i, (double)fout[i], (double)want);
  }
  free(in);
  free(out);
  free(fin);
  free(fout);
  return 0;
}

/* ncclBroadcast, ncclBcast and ncclReduce from every root. */
int test_rooted(ncclComm_t comm, int rank, int n) {
  enum { kCount = 3000 };
  int64_t* buf = malloc(kCount * sizeof(int64_t));
  int64_t* out = malloc(kCount * sizeof(int64_t));
  for (int root = 0; root < n; ++root) {
    for (int i = 0; i < kCount; ++i) buf[i] = rank == root ? root * 100000 + i : -1;
    memset(out, 0, kCount * sizeof(int64_t));
    CHECK_NCCL(ncclBroadcast(buf, out, kCount, ncclInt64, root, comm, NULL));
    CHECK_NCCL(ncclBcast(buf, kCount, ncclInt64, root, comm, NULL));
    for (int i = 0; i < kCount; ++i) {
      CHECK(out[i] == root * 100000 + i && buf[i] == out[i], "broadcast root %d [%d] = %lld / %lld", root, i,
            (long long)out[i], (long long)buf[i]);
    }
    for (int i = 0; i < kCount; ++i) buf[i] = (rank + 1) * (i + 1);
    memset(out, 0, kCount * sizeof(int64_t));
    CHECK_NCCL(ncclReduce(buf, rank == root ? out : NULL, kCount, ncclInt64, ncclSum, root, comm, NULL));
    for (int i = 0; i < kCount && rank == root; ++i) {
      CHECK(out[i] == (int64_t)n * (n + 1) / 2 * (i + 1), "reduce root %d [%d] = %lld", root, i, (long long)out[i]);
    }
  }
  free(buf);
  free(out);
  return 0;
}

/* ncclAllGather and ncclReduceScatter, out of place and in place. */
int test_gather_scatter(ncclComm_t comm, int rank, int n) {
  enum { kCount = 2000 };
  int32_t* big = malloc((size_t)n * kCount * sizeof(int32_t));
  int32_t* part = malloc(kCount * sizeof(int32_t));
  for (int inplace = 0; inplace < 2; ++inplace) {
    int32_t* mine = inplace ? big + (size_t)rank * kCount : part;
    memset(big, 0xff, (size_t)n * kCount * sizeof(int32_t));
    for (int i = 0; i < kCount; ++i) mine[i] = rank * 10000 + i;
    CHECK_NCCL(ncclAllGather(mine, big, kCount, ncclInt32, comm, NULL));
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < kCount; ++i) {
        CHECK(big[(size_t)r * kCount + i] == r * 10000 + i, "allgather%s [%d][%d]", inplace ? " in place" : "", r, i);
      }
    }
    /* reduce-scatter: element j of every rank's input is rank + j; this rank keeps its block. */
    for (size_t j = 0; j < (size_t)n * kCount; ++j) big[j] = rank + (int32_t)j;
    int32_t* result = inplace ? big + (size_t)rank * kCount : part;
    CHECK_NCCL(ncclReduceScatter(big, result, kCount, ncclInt32, ncclSum, comm, NULL));
    for (int i = 0; i < kCount; ++i) {
      long j = (long)rank * kCount + i;
      CHECK(result[i] == n * j + (long)n * (n - 1) / 2, "reducescatter%s [%d] = %d", inplace ? " in place" : "", i,
            result[i]);
    }
  }
  free(big);
  free(part);
  return 0;
}

/* PreMulSum: host-immediate float32 scalars (rank + 1), and an int32 scalar in "device" memory that
 * is read when the collective runs, through allreduce, reduce and reduce-scatter. */
int test_premulsum(ncclComm_t comm, int rank, int n) {
  enum { kCount = 1500 };
  float fin[kCount], fout[kCount];
  float fscalar = (float)(rank + 1);
  ncclRedOp_t fop;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&fop, &fscalar, ncclFloat32, ncclScalarHostImmediate, comm));
  fscalar = 1000.0f; /* read at creation: this change must not matter */
  for (int i = 0; i < kCount; ++i) fin[i] = (float)(i % 4 + 1);
  CHECK_NCCL(ncclAllReduce(fin, fout, kCount, ncclFloat32, fop, comm, NULL));
  for (int i = 0; i < kCount; ++i) {
    CHECK(fout[i] == (float)(i % 4 + 1) * (float)(n * (n + 1) / 2), "premulsum float [%d] = %g", i, (double)fout[i]);
    CHECK(fin[i] == (float)(i % 4 + 1), "the input must not change");
  }
  CHECK_NCCL(ncclRedOpDestroy(fop, comm));

  int32_t scalar = 2;
  ncclRedOp_t iop;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&iop, &scalar, ncclInt32, ncclScalarDevice, comm));
  /* The one live handle is 5, the value of ferry's own band: an int32 call with it must scale and sum. */
  CHECK((int)iop == ncclNumOps, "the first PreMulSum handle is %d", (int)iop);
  scalar = 3; /* "device" residence: read at each use */
  int32_t* in = malloc((size_t)n * kCount * sizeof(int32_t));
  int32_t out[kCount];
  for (size_t j = 0; j < (size_t)n * kCount; ++j) in[j] = rank + (int32_t)j;
  CHECK_NCCL(ncclAllReduce(in, out, kCount, ncclInt32, iop, comm, NULL));
  for (int i = 0; i < kCount; ++i) CHECK(out[i] == 3 * (n * i + n * (n - 1) / 2), "premulsum int allreduce [%d]", i);
  CHECK_NCCL(ncclReduce(in, out, kCount, ncclInt32, iop, n - 1, comm, NULL));
  for (int i = 0; i < kCount && rank == n - 1; ++i) CHECK(out[i] == 3 * (n * i + n * (n - 1) / 2), "reduce [%d]", i);
  CHECK_NCCL(ncclReduceScatter(in, out, kCount, ncclInt32, iop, comm, NULL));
  for (int i = 0; i < kCount; ++i) {
    long j = (long)rank * kCount + i;
    CHECK(out[i] == 3 * (n * j + (long)n * (n - 1) / 2), "premulsum reducescatter [%d] = %d", i, out[i]);
  }
  CHECK_NCCL(ncclRedOpDestroy(iop, comm));

  /* As nccl-tests does: create, queue in a group, destroy, then end the group. */
  int32_t two = 2;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&iop, &two, ncclInt32, ncclScalarHostImmediate, comm));
  CHECK_NCCL(ncclAllReduce(in, out, kCount, ncclInt32, iop, comm, NULL));
  CHECK_NCCL(ncclRedOpDestroy(iop, comm));
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < kCount; ++i) CHECK(out[i] == 2 * (n * i + n * (n - 1) / 2), "premulsum in group [%d]", i);
  free(in);
  return 0;
}
