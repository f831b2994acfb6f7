/* Communicators: queries, memory, split, non-blocking init, ncclCommInitAll, inits inside a group,
 * and ncclCommAbort while another thread is blocked in a collective. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "check.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Poll ncclCommGetAsyncError while it says ncclInProgress (at most 60 s). */
static ncclResult_t wait_ready(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 60000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) sleep_ms(1);
  }
  return state;
}

int test_queries_and_memory(ncclComm_t comm, int rank, int n) {
  int value = -1, version = 0;
  CHECK_NCCL(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE && version == NCCL_VERSION(2, 28, 9), "version %d", version);
  CHECK_NCCL(ncclCommCount(comm, &value));
  CHECK(value == n, "count %d", value);
  CHECK_NCCL(ncclCommUserRank(comm, &value));
  CHECK(value == rank, "user rank %d", value);
  CHECK_NCCL(ncclCommCuDevice(comm, &value));
  CHECK(value == 0, "device %d", value);

  enum { kCount = 1 << 18 };
  float* buf = NULL;
  void* handle = NULL;
  CHECK_NCCL(ncclMemAlloc((void**)&buf, kCount * sizeof(float)));
  CHECK(buf != NULL && (uintptr_t)buf % 4096 == 0, "ncclMemAlloc gives page-aligned memory");
  CHECK_NCCL(ncclCommRegister(comm, buf, kCount * sizeof(float), &handle));
  for (int i = 0; i < kCount; ++i) buf[i] = (float)(rank + 1);
  CHECK_NCCL(ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (int i = 0; i < kCount; ++i) CHECK(buf[i] == (float)(n * (n + 1) / 2), "registered buffer [%d]", i);
  CHECK_NCCL(ncclCommDeregister(comm, handle));
  CHECK_NCCL(ncclMemFree(buf));
  CHECK_NCCL(ncclMemFree(NULL));
  return 0;
}

/* color = rank % 2, key = n - rank (reversed order within a color); with 3+ ranks the last rank
 * joins nothing. The split comm is non-blocking and ready at once. */
int test_split(ncclComm_t comm, int rank, int n) {
  int nocolor = n >= 3 && rank == n - 1;
  int color = nocolor ? NCCL_SPLIT_NOCOLOR : rank % 2;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t sub = NULL;
  CHECK_NCCL(ncclCommSplit(comm, color, n - rank, &sub, &config));
  if (nocolor) {
    CHECK(sub == NULL, "NCCL_SPLIT_NOCOLOR gives NULL");
    return 0;
  }
  int members = 0, position = 0;
  for (int r = 0; r < n; ++r) {
    if (r % 2 != color || (n >= 3 && r == n - 1)) continue;
    ++members;
    if (r > rank) ++position; /* higher ranks have smaller keys */
  }
  int value = -1;
  CHECK(wait_ready(sub) == ncclSuccess, "split comm ready");
  CHECK_NCCL(ncclCommCount(sub, &value));
  CHECK(value == members, "split size %d, expected %d", value, members);
  CHECK_NCCL(ncclCommUserRank(sub, &value));
  CHECK(value == position, "split rank %d, expected %d", value, position);
  int32_t mine = rank, sum = -1, want = 0;
  for (int r = 0; r < n; ++r) want += (r % 2 == color && !(n >= 3 && r == n - 1)) ? r : 0;
  CHECK_NCCL(ncclAllReduce(&mine, &sum, 1, ncclInt32, ncclSum, sub, NULL));
  CHECK(sum == want, "split all-reduce %d, expected %d", sum, want);
  CHECK_NCCL(ncclCommDestroy(sub));
  return 0;
}

/* Rank 0's new id travels by ncclBroadcast; the init returns at once and is polled. */
int test_nonblocking_init(ncclComm_t comm, int rank, int n) {
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclBroadcast(&id, &id, sizeof id, ncclUint8, 0, comm, NULL));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nb = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&nb, n, id, rank, &config);
  CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", (int)r);
  CHECK(nb != NULL, "the handle exists before the init completes");
  CHECK(wait_ready(nb) == ncclSuccess, "non-blocking init completes: %s", ncclGetLastError(nb));
  double x = rank, sum = 0;
  CHECK_NCCL(ncclAllReduce(&x, &sum, 1, ncclFloat64, ncclSum, nb, NULL));
  CHECK(sum == n * (n - 1) / 2.0, "sum %g", sum);
  CHECK_NCCL(ncclCommFinalize(nb));
  CHECK_FAILS(ncclAllReduce(&x, &sum, 1, ncclFloat64, ncclSum, nb, NULL), ncclInvalidUsage, "finalized");
  CHECK_NCCL(ncclCommDestroy(nb));
  return 0;
}

/* In this process only: ncclCommInitAll with a device list, then one thread drives every rank
 * through a group; then two ranks of a new id initialized inside one group, as nccl-tests does
 * with several GPUs per thread. */
int test_init_all_and_group_init(int n) {
  ncclComm_t comms[8];
  int devs[8];
  for (int i = 0; i < n; ++i) devs[i] = 10 + i;
  CHECK_NCCL(ncclCommInitAll(comms, n, devs));
  int32_t in[8], out[8];
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    int value = -1;
    CHECK_NCCL(ncclCommCuDevice(comms[i], &value));
    CHECK(value == 10 + i, "device %d of comm %d", value, i);
    in[i] = i + 1;
    CHECK_NCCL(ncclAllReduce(&in[i], &out[i], 1, ncclInt32, ncclSum, comms[i], NULL));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < n; ++i) {
    CHECK(out[i] == n * (n + 1) / 2, "InitAll comm %d sum %d", i, out[i]);
    CHECK_NCCL(ncclCommDestroy(comms[i]));
  }

  ncclUniqueId id;
  ncclComm_t pair[2];
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < 2; ++i) CHECK_NCCL(ncclCommInitRank(&pair[i], 2, id, i));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < 2; ++i) {
    in[i] = 5 * (i + 1);
    CHECK_NCCL(ncclAllReduce(&in[i], &out[i], 1, ncclInt32, ncclSum, pair[i], NULL));
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK(out[0] == 15 && out[1] == 15, "group-initialized pair: %d %d", out[0], out[1]);
  for (int i = 0; i < 2; ++i) CHECK_NCCL(ncclCommDestroy(pair[i]));
  return 0;
}

static void* wait_for_init_thread(void* arg) {
  ncclComm_t comm = arg;
  static int32_t x = 1, y = 0;
  ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL); /* waits for the init */
  return (void*)(intptr_t)r;
}

/* A non-blocking init whose second rank never comes: ncclCommAbort returns at once, and a call
 * waiting for the init returns ncclInvalidUsage (the init thread ends by its own deadline). */
int test_abort_during_init(void) {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t lonely = NULL;
  CHECK(ncclCommInitRankConfig(&lonely, 2, id, 0, &config) == ncclInProgress, "non-blocking init in progress");
  ncclResult_t state = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(lonely, &state));
  CHECK(state == ncclInProgress, "async state %d while rank 1 is missing", (int)state);
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, wait_for_init_thread, lonely) == 0, "pthread_create");
  sleep_ms(100);
  double start = now_s();
  CHECK_NCCL(ncclCommAbort(lonely));
  void* result = NULL;
  pthread_join(thread, &result);
  CHECK(now_s() - start < 2.0, "abort during init took %.1f s", now_s() - start);
  CHECK((ncclResult_t)(intptr_t)result == ncclInvalidUsage, "the waiting call returned %d", (int)(intptr_t)result);
  return 0;
}

struct blocked_call {
  ncclComm_t comm;
  int rank;
  volatile int done; /* read by the main thread only after join, or as a hint while polling */
  ncclResult_t result;
  char error[512];
};

static void* blocked_thread(void* arg) {
  struct blocked_call* b = arg;
  static int32_t x[1024], y[1024];
  if (b->rank == 0) {
    b->result = ncclAllReduce(x, y, 1024, ncclInt32, ncclSum, b->comm, NULL); /* nobody else joins */
  } else {
    b->result = ncclRecv(y, 1024, ncclInt32, 0, b->comm, NULL); /* rank 0 never sends */
  }
  strncpy(b->error, ncclGetLastError(NULL), sizeof b->error - 1);
  b->done = 1;
  return NULL;
}

/* Rank 0 blocks in an all-reduce nobody else calls and rank 1 in a receive nobody sends; rank 0's
 * main thread aborts: its call returns ncclInvalidUsage, rank 1's learns of it (ncclRemoteError). */
int test_abort_blocked(ncclComm_t comm, int rank, int n) {
  ncclComm_t victim = NULL;
  CHECK_NCCL(ncclCommSplit(comm, 0, rank, &victim, NULL));
  struct blocked_call b = {victim, rank, 0, ncclSuccess, {0}};
  pthread_t thread;
  int blocks = rank <= 1;
  if (blocks) CHECK(pthread_create(&thread, NULL, blocked_thread, &b) == 0, "pthread_create");
  if (rank == 0) {
    sleep_ms(300);
    CHECK(!b.done, "the all-reduce returned without its peers: %d", (int)b.result);
    double start = now_s();
    CHECK_NCCL(ncclCommAbort(victim));
    pthread_join(thread, NULL);
    CHECK(now_s() - start < 10.0, "abort took %.1f s", now_s() - start);
    CHECK(b.result == ncclInvalidUsage, "the aborted call returned %d (%s)", (int)b.result, b.error);
    CHECK(strstr(b.error, "abort") != NULL, "its last error: %s", b.error);
  } else if (rank == 1) {
    pthread_join(thread, NULL);
    CHECK(b.result == ncclRemoteError, "rank 1's receive returned %d (%s)", (int)b.result, b.error);
    CHECK(strstr(b.error, "rank 0") != NULL, "its last error names rank 0: %s", b.error);
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(victim, &async));
    CHECK(async == ncclRemoteError, "rank 1's async error %d", (int)async);
  }
  int32_t one = 1, sum = 0;
  CHECK_NCCL(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL)); /* the world comm still works */
  CHECK(sum == n, "world sum %d after the abort", sum);
  if (rank != 0) CHECK_NCCL(ncclCommDestroy(victim));
  return 0;
}

/* The last rank leaves; the others shrink a split of the world without it (NCCL_SHRINK_ABORT: no
 * call is in flight, the abort only marks the parent) and reduce over the result. */
int test_shrink(ncclComm_t comm, int rank, int n) {
  ncclComm_t parent = NULL, shrunk = NULL;
  CHECK_NCCL(ncclCommSplit(comm, 0, rank, &parent, NULL));
  if (rank != n - 1) {
    int excluded[1] = {n - 1};
    CHECK_NCCL(ncclCommShrink(parent, excluded, 1, &shrunk, NULL, NCCL_SHRINK_ABORT));
    int count = 0, me = -1;
    CHECK_NCCL(ncclCommCount(shrunk, &count));
    CHECK_NCCL(ncclCommUserRank(shrunk, &me));
    CHECK(count == n - 1 && me == rank, "shrunk to rank %d of %d", me, count);
    int32_t one = 1, sum = 0;
    CHECK_NCCL(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, shrunk, NULL));
    CHECK(sum == n - 1, "sum %d over the shrunk communicator", sum);
    CHECK_NCCL(ncclCommDestroy(shrunk));
  }
  CHECK_NCCL(ncclCommAbort(parent));
  int32_t one = 1, sum = 0;
  CHECK_NCCL(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, comm, NULL)); /* the world comm still works */
  CHECK(sum == n, "world sum %d after the shrink", sum);
  return 0;
}
