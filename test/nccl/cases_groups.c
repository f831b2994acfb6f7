/* Point-to-point and groups: any order on each rank, nesting, and errors reported at the end. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "check.h"

/* A ring shift inside a group (even ranks post the receive first, odd ranks the send), then plain
 * ncclSend / ncclRecv outside a group between pairs of ranks. */
int test_send_recv(ncclComm_t comm, int rank, int n) {
  enum { kCount = 100000 };
  int32_t* out = malloc(kCount * sizeof(int32_t));
  int32_t* in = malloc(kCount * sizeof(int32_t));
  for (int i = 0; i < kCount; ++i) out[i] = rank * 1000000 + i;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  CHECK_NCCL(ncclGroupStart());
  if (rank % 2 == 0) {
    CHECK_NCCL(ncclRecv(in, kCount, ncclInt32, prev, comm, NULL));
    CHECK_NCCL(ncclSend(out, kCount, ncclInt32, next, comm, NULL));
  } else {
    CHECK_NCCL(ncclSend(out, kCount, ncclInt32, next, comm, NULL));
    CHECK_NCCL(ncclRecv(in, kCount, ncclInt32, prev, comm, NULL));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < kCount; ++i) CHECK(in[i] == prev * 1000000 + i, "ring [%d] = %d", i, in[i]);

  int partner = rank ^ 1;
  if (partner < n) {
    memset(in, 0, kCount * sizeof(int32_t));
    if (rank % 2 == 0) {
      CHECK_NCCL(ncclSend(out, kCount, ncclInt32, partner, comm, NULL));
      CHECK_NCCL(ncclRecv(in, kCount, ncclInt32, partner, comm, NULL));
    } else {
      CHECK_NCCL(ncclRecv(in, kCount, ncclInt32, partner, comm, NULL));
      CHECK_NCCL(ncclSend(out, kCount, ncclInt32, partner, comm, NULL));
    }
    for (int i = 0; i < kCount; ++i) CHECK(in[i] == partner * 1000000 + i, "pair [%d] = %d", i, in[i]);
  }
  free(out);
  free(in);
  return 0;
}

/* An all-to-all of sends and receives (self included), listed in a different order on every rank
 * and interleaved with two all-reduces: one group, no deadlock, every result exact. */
int test_group_any_order(ncclComm_t comm, int rank, int n) {
  enum { kCount = 5000 };
  int64_t* send = malloc((size_t)n * kCount * sizeof(int64_t));
  int64_t* recv = malloc((size_t)n * kCount * sizeof(int64_t));
  for (int p = 0; p < n; ++p) {
    for (int i = 0; i < kCount; ++i) send[(size_t)p * kCount + i] = rank * 1000000 + p * 10000 + i;
  }
  int64_t a = rank + 1, b = 10 * (rank + 1), asum = 0, bsum = 0;
  CHECK_NCCL(ncclGroupStart());
  for (int k = 0; k < n; ++k) {
    int p = (rank + (rank % 2 ? n - k : k)) % n; /* odd ranks walk their peers backwards */
    if (k == n / 2) CHECK_NCCL(ncclAllReduce(&a, &asum, 1, ncclInt64, ncclSum, comm, NULL));
    if ((rank + k) % 2) {
      CHECK_NCCL(ncclRecv(recv + (size_t)p * kCount, kCount, ncclInt64, p, comm, NULL));
      CHECK_NCCL(ncclSend(send + (size_t)p * kCount, kCount, ncclInt64, p, comm, NULL));
    } else {
      CHECK_NCCL(ncclSend(send + (size_t)p * kCount, kCount, ncclInt64, p, comm, NULL));
      CHECK_NCCL(ncclRecv(recv + (size_t)p * kCount, kCount, ncclInt64, p, comm, NULL));
    }
  }
  CHECK_NCCL(ncclAllReduce(&b, &bsum, 1, ncclInt64, ncclSum, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  for (int p = 0; p < n; ++p) {
    for (int i = 0; i < kCount; ++i) {
      int64_t want = (int64_t)p * 1000000 + rank * 10000 + i;
      CHECK(recv[(size_t)p * kCount + i] == want, "from %d [%d] = %lld", p, i, (long long)recv[(size_t)p * kCount + i]);
    }
  }
  CHECK(asum == (int64_t)n * (n + 1) / 2 && bsum == 10 * asum, "all-reduces in the group: %lld %lld", (long long)asum,
        (long long)bsum);
  free(send);
  free(recv);
  return 0;
}

/* Nested groups issue at the outermost end only; a failed call inside a group is reported by the
 * call and again by the end, and nothing of that group runs; ncclGroupEnd without a start fails. */
int test_group_nesting_and_errors(ncclComm_t comm, int rank, int n) {
  int32_t x = rank + 1, y = -1, z = -1;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  CHECK(y == -1, "the inner ncclGroupEnd must not issue anything (y = %d)", y);
  CHECK_NCCL(ncclAllReduce(&x, &z, 1, ncclInt32, ncclMax, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  CHECK(y == n * (n + 1) / 2 && z == n, "nested group results %d %d", y, z);

  y = -1;
  CHECK_NCCL(ncclGroupStart());
  CHECK_FAILS(ncclAllReduce(&x, &y, 1, (ncclDataType_t)42, ncclSum, comm, NULL), ncclInvalidArgument, "type 42");
  CHECK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK_FAILS(ncclGroupEnd(), ncclInvalidArgument, "type 42");
  CHECK(y == -1, "a failed group must run nothing (y = %d)", y);

  CHECK_FAILS(ncclGroupEnd(), ncclInvalidUsage, "no group is open");
  /* The communicator is still usable, and has no asynchronous error. */
  CHECK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(y == n * (n + 1) / 2, "after the failed group: %d", y);
  ncclResult_t async = ncclInternalError;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d after argument errors", (int)async);
  return 0;
}
