/*
 * A client of NCCL 2.28's host API, written only against nccl.h: built once with ferry's header and,
 * where NVIDIA's is installed, once with NVIDIA's, and run on ferry's libnccl.so.2 with
 * LD_BIND_NOW=1. It takes the address of every function of the 2.28.9 header (a missing one fails
 * the load), then runs what 2.22-2.28 added, with ranks as the communicators of ncclCommInitAll
 * driven by groups (one process, no launcher):
 *   config layouts (2.28's and a 2.21-level caller's 48-byte one), ncclCommInitRankScalable,
 *   ncclAlltoAll / ncclGather / ncclScatter, windows, ncclGroupSimulateEnd, ncclCommRevoke,
 *   ncclResetDebugInit, and the text of a bad-datatype error.
 *
 * It makes a known number of calls fail on purpose and prints "expected errors: N" last, so that
 * quiet_check.py can compare that with the WARN lines on stderr (the library says nothing else).
 * Exit status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L

#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>

enum { kRanks = 4, kCount = 1000 };

static int g_failed = 0;
static int g_expected_errors = 0;

#define EXPECT(cond, ...)                                    \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      ++g_failed;                                            \
    }                                                        \
  } while (0)
#define OK(call)                                                                                 \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    EXPECT(r_ == ncclSuccess, "%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), \
           ncclGetLastError(NULL));                                                              \
  } while (0)
/* A call that must fail with `code`: counted, since the library writes one WARN line for it. */
#define FAILS(code, call)                                                             \
  do {                                                                                \
    ncclResult_t r_ = (call);                                                         \
    ++g_expected_errors;                                                              \
    EXPECT(r_ == (code), "%s returned %d, expected %d", #call, (int)r_, (int)(code)); \
  } while (0)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Every function of NCCL 2.28.9's nccl.h with its pnccl twin: the loader must resolve each. */
static void (*const kEveryFunction[])(void) = {
#define F(name) (void (*)(void)) name, (void (*)(void))p##name
    F(ncclMemAlloc),
    F(ncclMemFree),
    F(ncclGetVersion),
    F(ncclGetUniqueId),
    F(ncclCommInitRankConfig),
    F(ncclCommInitRank),
    F(ncclCommInitAll),
    F(ncclCommFinalize),
    F(ncclCommDestroy),
    F(ncclCommAbort),
    F(ncclCommRevoke),
    F(ncclCommSplit),
    F(ncclCommShrink),
    F(ncclCommInitRankScalable),
    F(ncclGetErrorString),
    F(ncclGetLastError),
    F(ncclResetDebugInit),
    F(ncclCommGetAsyncError),
    F(ncclCommCount),
    F(ncclCommCuDevice),
    F(ncclCommUserRank),
    F(ncclCommRegister),
    F(ncclCommDeregister),
    F(ncclCommWindowRegister),
    F(ncclCommWindowDeregister),
    F(ncclRedOpCreatePreMulSum),
    F(ncclRedOpDestroy),
    F(ncclReduce),
    F(ncclBcast),
    F(ncclBroadcast),
    F(ncclAllReduce),
    F(ncclReduceScatter),
    F(ncclAllGather),
    F(ncclAlltoAll),
    F(ncclGather),
    F(ncclScatter),
    F(ncclSend),
    F(ncclRecv),
    F(ncclGroupStart),
    F(ncclGroupEnd),
    F(ncclGroupSimulateEnd),
#undef F
};
#pragma GCC diagnostic pop

/* The 48-byte config of NCCL 2.17-2.21 headers, as such a caller passes it. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} config_2_21;

static ncclResult_t wait_async(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return state;
}

static void test_versions_and_configs(void) {
  int version = 0;
  OK(ncclGetVersion(&version));
  EXPECT(version == NCCL_VERSION_CODE && version >= 22800, "version %d, header %d", version, NCCL_VERSION_CODE);

  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  EXPECT(sizeof(ncclConfig_t) == 80, "sizeof(ncclConfig_t) %zu", sizeof(ncclConfig_t));
  config.blocking = 1;
  config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  config.commName = "client_228";
  config.nvlsCTAs = 4;
  ncclComm_t comm = NULL;
  OK(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  OK(ncclCommDestroy(comm));

  config.CTAPolicy = 7;
  OK(ncclGetUniqueId(&id));
  FAILS(ncclInvalidArgument, ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  EXPECT(strstr(ncclGetLastError(NULL), "CTAPolicy") != NULL, "error text: %s", ncclGetLastError(NULL));

  /* A 2.21-level caller: its struct ends after splitShare; the bytes past it are garbage that the
   * library must not read (CTAPolicy's place would hold 7 here). */
  struct {
    config_2_21 c;
    int garbage[16];
  } old;
  memset(&old, 0x07, sizeof old);
  old.c = (config_2_21){sizeof(config_2_21), 0xcafebeef, 22105, 0, INT_MIN, INT_MIN, INT_MIN, NULL, INT_MIN};
  EXPECT(sizeof(config_2_21) == 48, "sizeof(config_2_21) %zu", sizeof(config_2_21));
  OK(ncclGetUniqueId(&id));
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, (ncclConfig_t*)&old.c);
  EXPECT(r == ncclInProgress || r == ncclSuccess, "2.21 config non-blocking init returned %d", (int)r);
  EXPECT(wait_async(comm) == ncclSuccess, "2.21 config init did not finish: %s", ncclGetLastError(comm));
  OK(ncclCommDestroy(comm));

  /* Several ids (up to one per rank), the same on every rank: 4 ranks joined in one group. */
  ncclUniqueId ids[2];
  OK(ncclGetUniqueId(&ids[0]));
  OK(ncclGetUniqueId(&ids[1]));
  ncclComm_t scalable[kRanks];
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) OK(ncclCommInitRankScalable(&scalable[r], kRanks, r, 2, ids, NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    int count = 0, me = -1;
    OK(ncclCommCount(scalable[r], &count));
    OK(ncclCommUserRank(scalable[r], &me));
    EXPECT(count == kRanks && me == r, "scalable comm %d: count %d rank %d", r, count, me);
  }
  for (int r = 0; r < kRanks; ++r) OK(ncclCommDestroy(scalable[r]));
  FAILS(ncclInvalidArgument, ncclCommInitRankScalable(&comm, 1, 0, 0, ids, NULL));
  FAILS(ncclInvalidArgument, ncclCommInitRankScalable(&comm, 1, 0, 2, ids, NULL));
}

/* Fill: element i of rank r's block b is r * 1000000 + b * 1000 + i (exact in int32). */
static int32_t value(int r, int b, int i) { return r * 1000000 + b * 1000 + i; }

static void test_new_collectives(ncclComm_t* comms) {
  int32_t* send[kRanks];
  int32_t* recv[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    send[r] = malloc(sizeof(int32_t) * kRanks * kCount);
    recv[r] = malloc(sizeof(int32_t) * kRanks * kCount);
    for (int b = 0; b < kRanks; ++b) {
      for (int i = 0; i < kCount; ++i) send[r][b * kCount + i] = value(r, b, i);
    }
  }
  /* all-to-all: rank r's block s comes from rank s's block r. */
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) OK(ncclAlltoAll(send[r], recv[r], kCount, ncclInt32, comms[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    for (int s = 0; s < kRanks; ++s) {
      for (int i = 0; i < kCount; i += 97) {
        EXPECT(recv[r][s * kCount + i] == value(s, r, i), "alltoall rank %d [%d][%d] = %d", r, s, i,
               recv[r][s * kCount + i]);
      }
    }
  }
  /* gather to root 2: block s of the root's output is rank s's block 0; in place on the root. */
  const int root = 2;
  for (int inplace = 0; inplace < 2; ++inplace) {
    memset(recv[root], 0xff, sizeof(int32_t) * kRanks * kCount);
    if (inplace) memcpy(recv[root] + root * kCount, send[root], sizeof(int32_t) * kCount);
    OK(ncclGroupStart());
    for (int r = 0; r < kRanks; ++r) {
      const int32_t* in = (inplace && r == root) ? recv[root] + root * kCount : send[r];
      OK(ncclGather(in, r == root ? recv[root] : NULL, kCount, ncclInt32, root, comms[r], NULL));
    }
    OK(ncclGroupEnd());
    for (int s = 0; s < kRanks; ++s) {
      for (int i = 0; i < kCount; i += 89) {
        EXPECT(recv[root][s * kCount + i] == value(s, 0, i), "gather%s [%d][%d] = %d", inplace ? " in place" : "", s, i,
               recv[root][s * kCount + i]);
      }
    }
  }
  /* scatter from root 1: rank r receives the root's block r. */
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    memset(recv[r], 0xff, sizeof(int32_t) * kCount);
    OK(ncclScatter(r == 1 ? send[1] : NULL, recv[r], kCount, ncclInt32, 1, comms[r], NULL));
  }
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kCount; i += 83) {
      EXPECT(recv[r][i] == value(1, r, i), "scatter rank %d [%d] = %d", r, i, recv[r][i]);
    }
  }
  FAILS(ncclInvalidArgument, ncclGather(send[0], recv[0], kCount, ncclInt32, kRanks, comms[0], NULL));
  for (int r = 0; r < kRanks; ++r) {
    free(send[r]);
    free(recv[r]);
  }
}

/* Windows on ncclMemAlloc memory, used in place by a collective; a window handle is not a
 * ncclCommRegister handle, flags are checked, and a window is deregistered once. */
static void test_windows(ncclComm_t* comms) {
  enum { kFloats = 1000 };
  float* buf[kRanks];
  ncclWindow_t win[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    OK(ncclMemAlloc((void**)&buf[r], kFloats * sizeof(float)));
    for (int i = 0; i < kFloats; ++i) buf[r][i] = (float)(r + i);
    win[r] = NULL;
    OK(ncclCommWindowRegister(comms[r], buf[r], kFloats * sizeof(float), &win[r], NCCL_WIN_COLL_SYMMETRIC));
    EXPECT(win[r] != NULL, "no window on rank %d", r);
  }
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) OK(ncclAllReduce(buf[r], buf[r], kFloats, ncclFloat32, ncclSum, comms[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kFloats; i += 101) {
      EXPECT(buf[r][i] == (float)(kRanks * i + kRanks * (kRanks - 1) / 2), "window all-reduce rank %d [%d] = %f", r, i,
             (double)buf[r][i]);
    }
  }
  FAILS(ncclInvalidArgument, ncclCommDeregister(comms[0], (void*)win[0]));
  ncclWindow_t other = NULL;
  FAILS(ncclInvalidArgument, ncclCommWindowRegister(comms[0], buf[0], 64, &other, 0x10));
  for (int r = 0; r < kRanks; ++r) OK(ncclCommWindowDeregister(comms[r], win[r]));
  FAILS(ncclInvalidArgument, ncclCommWindowDeregister(comms[0], win[0]));
  for (int r = 0; r < kRanks; ++r) OK(ncclMemFree(buf[r]));
}

/* The /proc/self/maps line of the mapping holding `p` contains `what`. */
static int mapped_as(const void* p, const char* what) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
      found = strstr(line, what) != NULL;
      break;
    }
  }
  fclose(f);
  return found;
}

/* Windows and registrations on plain host memory (posix_memalign) are ferry's shared memory in
 * place while registered, with the same bytes, and private again once deregistered. */
static void test_host_windows(ncclComm_t* comms) {
  enum { kFloats = 64 * 1024 };
  float* buf[kRanks];
  ncclWindow_t win[kRanks];
  void* reg[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    EXPECT(posix_memalign((void**)&buf[r], 4096, kFloats * sizeof(float)) == 0, "posix_memalign");
    for (int i = 0; i < kFloats; ++i) buf[r][i] = (float)(r + i % 1000);
    OK(ncclCommWindowRegister(comms[r], buf[r], kFloats * sizeof(float), &win[r], NCCL_WIN_DEFAULT));
    EXPECT(mapped_as(buf[r], "memfd:ferry-host-"), "rank %d's window is not shared memory in place", r);
    EXPECT(buf[r][kFloats - 1] == (float)(r + (kFloats - 1) % 1000), "registration changed rank %d's bytes", r);
  }
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) OK(ncclAllReduce(buf[r], buf[r], kFloats, ncclFloat32, ncclSum, comms[r], NULL));
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kFloats; i += 997) {
      EXPECT(buf[r][i] == (float)(kRanks * (i % 1000) + kRanks * (kRanks - 1) / 2),
             "host window all-reduce rank %d [%d]", r, i);
    }
    OK(ncclCommWindowDeregister(comms[r], win[r]));
    EXPECT(!mapped_as(buf[r], "memfd:ferry-host-"), "rank %d's buffer is still shared after deregistration", r);
    /* ncclCommRegister shares it the same way. */
    OK(ncclCommRegister(comms[r], buf[r], kFloats * sizeof(float), &reg[r]));
    EXPECT(mapped_as(buf[r], "memfd:ferry-host-"), "rank %d's registered buffer is not shared memory in place", r);
    OK(ncclCommDeregister(comms[r], reg[r]));
    EXPECT(buf[r][0] == (float)(kRanks * (kRanks - 1) / 2), "deregistration changed rank %d's bytes", r);
    free(buf[r]);
  }
}

static void test_simulate(ncclComm_t* comms) {
  enum { kBig = 1 << 18 };
  float* bufs[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    bufs[r] = malloc(sizeof(float) * kBig);
    for (int i = 0; i < kBig; ++i) bufs[r][i] = 1.0f;
  }
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT(info.estimatedTime == NCCL_UNDEF_FLOAT, "initializer %f", (double)info.estimatedTime);
  OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) OK(ncclAllReduce(bufs[r], bufs[r], kBig, ncclFloat32, ncclSum, comms[r], NULL));
  OK(ncclGroupSimulateEnd(&info));
  /* Priced by the tuner, and nothing ran. */
  EXPECT(info.estimatedTime > 0.0f, "estimatedTime %f", (double)info.estimatedTime);
  EXPECT(bufs[0][0] == 1.0f && bufs[kRanks - 1][kBig - 1] == 1.0f, "the simulated group ran");
  printf("simulated all-reduce of 1 MiB on %d ranks: %.1f us\n", kRanks, (double)info.estimatedTime);
  ncclSimInfo_t bad = {0};
  OK(ncclGroupStart());
  FAILS(ncclInvalidArgument, ncclGroupSimulateEnd(&bad));
  OK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) free(bufs[r]);
}

static void test_errors_name_types(ncclComm_t comm) {
  float x = 0;
  FAILS(ncclInvalidArgument, ncclAllReduce(&x, &x, 1, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL));
  const char* text = ncclGetLastError(comm);
  EXPECT(strstr(text, "float8e4m3") != NULL && strstr(text, "float8e5m2") != NULL, "error text: %s", text);
  ncclRedOp_t op;
  FAILS(ncclInvalidArgument, ncclRedOpCreatePreMulSum(&op, &x, (ncclDataType_t)12, ncclScalarHostImmediate, comm));
  text = ncclGetLastError(comm);
  EXPECT(strstr(text, "float8e5m2") != NULL && strstr(text, "0..9") == NULL, "error text: %s", text);
}

static void test_revoke(ncclComm_t* comms) {
  FAILS(ncclInvalidArgument, ncclCommRevoke(comms[0], 1));
  float x = 1;
  for (int r = 0; r < kRanks; ++r) OK(ncclCommRevoke(comms[r], NCCL_REVOKE_DEFAULT));
  ncclResult_t state = ncclInternalError;
  OK(ncclCommGetAsyncError(comms[0], &state));
  EXPECT(state == ncclSuccess, "async state after revoke %d", (int)state);
  FAILS(ncclInvalidUsage, ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], NULL));
  FAILS(ncclInvalidUsage, ncclCommFinalize(comms[0]));
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = (int)(sizeof kEveryFunction / sizeof kEveryFunction[0]);
  for (int i = 0; i < n; ++i) EXPECT(kEveryFunction[i] != NULL, "function %d", i);
  printf("%d functions resolved (NCCL %d.%d.%d header)\n", n / 2, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
#pragma GCC diagnostic pop

  test_versions_and_configs();
  ncclComm_t comms[kRanks];
  OK(ncclCommInitAll(comms, kRanks, NULL));
  test_new_collectives(comms);
  test_windows(comms);
  test_host_windows(comms);
  test_simulate(comms);
  test_errors_name_types(comms[0]);
  test_revoke(comms);
  for (int r = 0; r < kRanks; ++r) OK(ncclCommDestroy(comms[r]));

  printf("%s: %d check(s) failed\n", g_failed ? "FAILED" : "passed", g_failed);
  printf("expected errors: %d\n", g_expected_errors);
  return g_failed ? 1 : 0;
}
