/* Bad arguments: each call fails with NCCL's code and ncclGetLastError names the problem; none of
 * them breaks the communicator. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <string.h>

#include "cases.h"
#include "check.h"

int test_bad_arguments(ncclComm_t comm, int rank, int n, const ncclUniqueId* id) {
  float buf[4] = {0};
  int value = 0;
  (void)rank;

  /* Library-level calls. */
  CHECK_FAILS(ncclGetVersion(NULL), ncclInvalidArgument, "version is NULL");
  CHECK_FAILS(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId is NULL");
  for (int r = 0; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString((ncclResult_t)r);
    CHECK(s != NULL && s[0] != '\0', "ncclGetErrorString(%d)", r);
    for (int q = 0; q < r; ++q) CHECK(strcmp(s, ncclGetErrorString((ncclResult_t)q)) != 0, "strings %d and %d", q, r);
  }
  CHECK(strcmp(ncclGetErrorString((ncclResult_t)99), "unknown result code") == 0, "code 99");

  /* A null communicator. */
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclSend(buf, 4, ncclFloat32, 0, NULL, NULL), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclCommCount(NULL, &value), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclCommUserRank(NULL, &value), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclCommCuDevice(NULL, &value), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclCommFinalize(NULL), ncclInvalidArgument, "comm is NULL");
  CHECK_NCCL(ncclCommDestroy(NULL)); /* as NCCL: nothing to do */
  CHECK_NCCL(ncclCommAbort(NULL));

  /* Bad data type, reduction, root, peer, count and buffers. */
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, (ncclDataType_t)42, ncclSum, comm, NULL), ncclInvalidArgument,
              "type 42 is not a data type");
  CHECK_FAILS(ncclAllGather(buf, buf, 4, (ncclDataType_t)-1, comm, NULL), ncclInvalidArgument, "type -1");
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)99, comm, NULL), ncclInvalidArgument, "op 99");
  /* ncclRedOp_t 5..7 are PreMulSum handles in NCCL, never ferry's bitwise ops of the same values: not
   * created, they are refused, on an integer type too. */
  int32_t ibuf[4] = {0};
  CHECK_FAILS(ncclAllReduce(ibuf, ibuf, 4, ncclInt32, (ncclRedOp_t)5, comm, NULL), ncclInvalidArgument,
              "op 5 is not a reduction");
  CHECK_FAILS(ncclReduce(ibuf, ibuf, 4, ncclInt32, (ncclRedOp_t)6, 0, comm, NULL), ncclInvalidArgument,
              "neither a built-in one (0..4: sum, prod, max, min, avg)");
  CHECK_FAILS(ncclAllReduce(ibuf, ibuf, 4, ncclUint8, (ncclRedOp_t)7, comm, NULL), ncclInvalidArgument,
              "nor a live PreMulSum");
  CHECK_FAILS(ncclBroadcast(buf, buf, 4, ncclFloat32, n, comm, NULL), ncclInvalidArgument, "root");
  CHECK_FAILS(ncclReduce(buf, buf, 4, ncclFloat32, ncclSum, -1, comm, NULL), ncclInvalidArgument, "root -1");
  CHECK_FAILS(ncclBcast(buf, 4, ncclFloat32, n + 5, comm, NULL), ncclInvalidArgument, "out of range");
  CHECK_FAILS(ncclSend(buf, 4, ncclFloat32, n, comm, NULL), ncclInvalidArgument, "peer");
  CHECK_FAILS(ncclRecv(buf, 4, ncclFloat32, -2, comm, NULL), ncclInvalidArgument, "peer -2");
  CHECK_FAILS(ncclAllReduce(buf, buf, SIZE_MAX / 2, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  CHECK_FAILS(ncclAllGather(buf, buf, SIZE_MAX / 4 / (size_t)n + 1, ncclFloat32, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  CHECK_FAILS(ncclReduceScatter(buf, buf, SIZE_MAX / 8 + 1, ncclFloat64, ncclSum, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  /* One-byte types overflow nothing, but no buffer that large can exist (these crashed once). */
  CHECK_FAILS(ncclAllReduce(buf, buf, (size_t)1 << 62, ncclInt8, ncclSum, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  CHECK_FAILS(ncclBroadcast(buf, buf, SIZE_MAX, ncclUint8, 0, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  CHECK_FAILS(ncclAllGather(buf, buf, (size_t)1 << 62, ncclUint8, comm, NULL), ncclInvalidArgument,
              "larger than the address space");
  CHECK_FAILS(ncclBroadcast(buf, buf, 4, ncclFloat32, INT32_MIN, comm, NULL), ncclInvalidArgument,
              "root -2147483648 is out of range");
  CHECK_FAILS(ncclReduce(buf, buf, 4, ncclFloat32, ncclSum, INT32_MIN, comm, NULL), ncclInvalidArgument,
              "root -2147483648");
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)-2, comm, NULL), ncclInvalidArgument,
              "op -2 is not a reduction");
  CHECK_FAILS(ncclAllReduce(buf, buf + 1, 2, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument,
              "overlap without being in place");
  CHECK_FAILS(ncclAllReduce(NULL, buf, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "send buffer");
  CHECK_FAILS(ncclAllReduce(buf, NULL, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument, "receive buffer");

  /* Queries and reductions. */
  CHECK_FAILS(ncclCommCount(comm, NULL), ncclInvalidArgument, "count is NULL");
  CHECK_FAILS(ncclCommUserRank(comm, NULL), ncclInvalidArgument, "rank is NULL");
  CHECK_FAILS(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument, "asyncError is NULL");
  CHECK_FAILS(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in");
  CHECK_FAILS(ncclRedOpDestroy((ncclRedOp_t)1000, comm), ncclInvalidArgument, "not a live reduction");
  float scalar = 2.0f;
  ncclRedOp_t op;
  CHECK_FAILS(ncclRedOpCreatePreMulSum(NULL, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclInvalidArgument,
              "op is NULL");
  CHECK_FAILS(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, (ncclScalarResidence_t)7, comm), ncclInvalidArgument,
              "residence 7");
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, ncclFloat64, op, comm, NULL), ncclInvalidArgument, "created for float32");
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
  CHECK_FAILS(ncclAllReduce(buf, buf, 4, ncclFloat32, op, comm, NULL), ncclInvalidArgument, "neither");

  /* Memory. */
  void* handle = NULL;
  CHECK_FAILS(ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ptr is NULL");
  CHECK_FAILS(ncclCommRegister(comm, buf, sizeof buf, NULL), ncclInvalidArgument, "handle is NULL");
  CHECK_FAILS(ncclCommDeregister(comm, &handle), ncclInvalidArgument, "was not returned");

  /* Creating communicators: these fail before any communication. */
  ncclComm_t bad = NULL;
  CHECK_FAILS(ncclCommInitRank(&bad, 2, *id, 5), ncclInvalidArgument, "rank 5 is out of range");
  CHECK_FAILS(ncclCommInitRank(&bad, 0, *id, 0), ncclInvalidArgument, "nranks 0");
  CHECK_FAILS(ncclCommInitRank(NULL, 1, *id, 0), ncclInvalidArgument, "comm is NULL");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  CHECK_FAILS(ncclCommInitRankConfig(&bad, 1, *id, 0, &config), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  ncclConfig_t config2 = NCCL_CONFIG_INITIALIZER;
  config2.blocking = 7;
  CHECK_FAILS(ncclCommInitRankConfig(&bad, 1, *id, 0, &config2), ncclInvalidArgument, "blocking 7");
  CHECK(bad == NULL, "a failed init leaves *comm NULL");
  CHECK_FAILS(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument, "comm is NULL");
  CHECK_FAILS(ncclCommInitAll(&bad, 0, NULL), ncclInvalidArgument, "ndev 0");
  CHECK_FAILS(ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
  ncclComm_t shrunk = NULL;
  int excluded[1] = {rank};
  CHECK_FAILS(ncclCommShrink(comm, NULL, 0, NULL, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, "newcomm is NULL");
  CHECK_FAILS(ncclCommShrink(comm, NULL, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
              "excludeRanksList is NULL");
  CHECK_FAILS(ncclCommShrink(comm, excluded, -1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
              "excludeRanksCount is -1");
  CHECK_FAILS(ncclCommShrink(comm, excluded, 0, &shrunk, NULL, 5), ncclInvalidArgument, "shrinkFlags is 5");
  CHECK_FAILS(ncclCommShrink(comm, excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
              "this rank itself");
  CHECK(shrunk == NULL, "a failed shrink leaves *newcomm NULL");

  /* None of this hurt the communicator. */
  ncclResult_t async = ncclInternalError;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  float one = 1.0f, sum = 0.0f;
  CHECK_NCCL(ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, comm, NULL));
  CHECK(sum == (float)n, "sum %g after the errors", (double)sum);
  return 0;
}
