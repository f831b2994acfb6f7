/*
 * ferry's NCCL-compatible C API.
 *
 * A program written against NCCL's nccl.h compiles against this header unchanged, and a program
 * already built against NCCL runs on ferry's libnccl.so.2 (LD_LIBRARY_PATH or LD_PRELOAD).
 * Names, types, enum values and struct layouts are those of NCCL's ABI; the text is ferry's.
 *
 * Version. The header declares NCCL 2.28.9 and the library implements every host function of
 * that level (docs/NCCL.md lists where ferry's semantics differ, and the device API of
 * nccl_device.h, which it does not provide). Programs built against an older nccl.h keep working:
 * ncclConfig_t says by its size and version which layout the caller passed.
 *
 * Memory. Buffers may be host memory (every call on them completes before it returns and
 * `stream` is ignored; NULL is accepted) or, in a CUDA build, device memory (stream-ordered).
 *
 * Every function also exists as pnccl<Name> (the profiling interface): same behaviour, same code.
 */
#ifndef NCCL_H_
#define NCCL_H_

/* CUDA programs expect nccl.h to bring in the CUDA runtime and its half types, as NCCL's does. */
#if defined(__has_include) && !defined(FERRY_NCCL_NO_CUDA)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#define FERRY_NCCL_HAVE_CUDA_HEADERS 1
#endif
#endif

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* Version codes: 1000*major + 100*minor + patch up to 2.8, 10000*major + 100*minor + patch after. */
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

/* Defined by ferry's header only, so a program can tell which library it was built for. */
#define FERRY_NCCL 1

#if defined(__GNUC__) || defined(__clang__)
#define FERRY_NCCL_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define FERRY_NCCL_DEPRECATED(why)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifndef FERRY_NCCL_HAVE_CUDA_HEADERS
/* The CUDA runtime's stream handle, declared exactly as CUDA declares it. */
typedef struct CUstream_st* cudaStream_t;
#endif

/** Opaque handle of one rank's communicator. */
typedef struct ncclComm* ncclComm_t;
/** Opaque handle of a buffer registered with ncclCommWindowRegister. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/** What one rank hands the others so they can join the same communicator. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** Status of every call. ferry's ErrorCode maps onto these (docs/NCCL.md). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /**< a CUDA call failed */
  ncclSystemError = 2,        /**< a system call or outside library failed (socket, memory) */
  ncclInternalError = 3,      /**< a bug inside the library */
  ncclInvalidArgument = 4,    /**< an argument has a value the call cannot accept */
  ncclInvalidUsage = 5,       /**< a valid call at the wrong time (after abort, group misuse) */
  ncclRemoteError = 6,        /**< a peer failed, left, or did not answer in time */
  ncclInProgress = 7,         /**< a non-blocking operation has not finished yet */
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/** ncclCommSplit's color for ranks that join no new communicator (they get NULL). */
#define NCCL_SPLIT_NOCOLOR -1
/** A float field the caller left unset (ncclSimInfo_t.estimatedTime before the simulation). */
#define NCCL_UNDEF_FLOAT -1.0f

/** ncclCommWindowRegister's flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01 /**< every rank registers a buffer at the same offset of a like pool */
/** The alignment NCCL asks of symmetric windows (ferry accepts any host buffer). */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/** ncclConfig_t.CTAPolicy: how many GPU thread blocks the communicator may take. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/** ncclCommShrink's flags. */
#define NCCL_SHRINK_DEFAULT 0x00 /**< leave the parent's operations alone */
#define NCCL_SHRINK_ABORT 0x01   /**< first abort the parent's operations in flight (after a failure) */

/** ncclCommRevoke's flags: none is defined yet, so 0 is the only valid value. */
#define NCCL_REVOKE_DEFAULT 0x00

/**
 * Options of ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommSplit and ncclCommShrink.
 * Always start from NCCL_CONFIG_INITIALIZER: the first three fields tell the library which layout
 * the caller was built with (an older header's struct ends after splitShare; the library reads
 * only the fields the caller's `size` covers). ferry honours `blocking` and `commName`, checks
 * `CTAPolicy`, and accepts the GPU resource knobs without effect (docs/NCCL.md).
 */
typedef struct ncclConfig_v22800 {
  size_t size;          /**< sizeof the caller's struct; never set by hand */
  unsigned int magic;   /**< 0xcafebeef; never set by hand */
  unsigned int version; /**< NCCL_VERSION_CODE of the caller's header; never set by hand */
  int blocking;         /**< 1 (default): init blocks; 0: init returns ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName; /**< a name for logs */
  int collnetEnable;
  int CTAPolicy; /**< NCCL_CTA_POLICY_* */
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                                \
  {                                                                                                            \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT                                                                                  \
  }

/** What ncclGroupSimulateEnd reports. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;        /**< sizeof the caller's struct; never set by hand */
  unsigned int magic; /**< 0x74685283; never set by hand */
  unsigned int version;
  float estimatedTime; /**< predicted time of the group's calls, in microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/** Keeps ncclRedOp_t the size of an int whatever the compiler's enum sizing. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/** Reductions. Values from ncclNumOps up are created by ncclRedOpCreatePreMulSum. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /**< sum divided by the number of ranks */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/** Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /**< OCP FP8 E4M3 (no infinity, largest finite 448); conversions saturate */
  ncclFloat8e5m2 = 11, /**< OCP FP8 E5M2 (largest finite 57344); conversions saturate */
  ncclNumTypes = 12
} ncclDataType_t;

/** Where ncclRedOpCreatePreMulSum's scalar lives. */
typedef enum {
  ncclScalarDevice = 0,       /**< read when each collective runs (host memory in ferry today) */
  ncclScalarHostImmediate = 1 /**< read once, before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ---- Library ---------------------------------------------------------------------------------- */

/** The NCCL version this library implements, as NCCL_VERSION_CODE (22809). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/** A short sentence for a status code (never NULL). */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/** What went wrong in this thread's last failed call, in a sentence ("" when nothing failed). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/** NCCL: read the logging variables again. ferry reads its knobs once per process, so this only
 *  re-applies the library's default (silent unless NCCL_DEBUG / FERRY_DEBUG is set). Deprecated by
 *  NCCL, which keeps it outside its API; provided for programs that still call it. */
FERRY_NCCL_DEPRECATED("ncclResetDebugInit is not part of the NCCL API")
void ncclResetDebugInit(void);
FERRY_NCCL_DEPRECATED("pncclResetDebugInit is not part of the NCCL API")
void pncclResetDebugInit(void);

/* ---- Communicators ---------------------------------------------------------------------------- */

/**
 * Make the id of a new communicator. Call it on one rank and pass the bytes to the others. With
 * NCCL_COMM_ID=host:port set, every rank gets the same id from the environment instead and rank 0
 * starts the rendezvous there during ncclCommInitRank.
 */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/** Join communicator `commId` as `rank` of `nranks`; blocks until every rank joined. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/** ncclCommInitRank with options. With config->blocking = 0 it returns ncclInProgress at once;
 *  poll ncclCommGetAsyncError until it stops returning ncclInProgress. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

/** All `ndev` ranks of a new communicator in this process; comm[i] is rank i. With devlist,
 *  ncclCommCuDevice of comm[i] reports devlist[i]. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/** ncclCommInitRankConfig given `nId` ids (NCCL spreads the rendezvous over them); every rank passes
 *  the same ids in the same order. ferry's rendezvous needs one root: every rank joins through
 *  commIds[0], which must come from ncclGetUniqueId (the others are checked for being non-NULL only). */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

/** Collective over `comm`: ranks with the same color form a new communicator, ordered by key then
 *  by rank. NCCL_SPLIT_NOCOLOR gives *newcomm = NULL. config NULL inherits comm's options. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/** A new communicator of comm's ranks without the excludeRanksCount ranks of excludeRanksList and
 *  without ranks found dead; every remaining rank calls it with the same list. Works after comm failed
 * (docs/RELIABILITY.md). */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/** Stop `comm`'s calls in flight (they return an error) and refuse new ones; ncclCommShrink and
 *  ncclCommDestroy still work. revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/** Finish this rank's use of `comm`: later collectives on it fail with ncclInvalidUsage. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/** Free `comm` (waits for calls other threads have in progress on it). NULL is accepted. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/** Free `comm`, first making calls blocked on it in other threads return. NULL is accepted. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/** ncclInProgress while a non-blocking init runs, then ncclSuccess or the communicator's
 *  sticky error (a peer died, a deadline passed, ranks disagreed). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/** Number of ranks. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/** CUDA device of this rank (0 without the CUDA backend, or the ncclCommInitAll devlist entry). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/** This rank's index in `comm`. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Memory ----------------------------------------------------------------------------------- */

/** Memory for communication buffers (page-aligned host memory in ferry today). */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/** Free what ncclMemAlloc returned. NULL is accepted. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/** Announce a buffer that collectives on `comm` will use; *handle is for ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/** Register `size` bytes at `buff` as a window of `comm` (winFlags: NCCL_WIN_*); *win is for
 *  ncclCommWindowDeregister. Host buffers are recorded as ncclCommRegister does: collectives on
 *  ferry's ncclMemAlloc memory read peers' buffers in place whether or not they are registered. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- Reductions ------------------------------------------------------------------------------- */

/** A reduction that multiplies each rank's input by `*scalar` (of `datatype`) and sums. Valid on
 *  `comm` only, for collectives of the same datatype, until ncclRedOpDestroy. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives (every rank calls, with matching arguments) ---------------------------------- */

/** On root, recvbuff[i] = op over ranks of sendbuff[i]. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);

/** In-place broadcast: buff = root's buff. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/** recvbuff = root's sendbuff on every rank. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/** recvbuff[i] = op over ranks of sendbuff[i]. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream);

/** recvbuff[i] = op over ranks of sendbuff[rank * recvcount + i]. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/** recvbuff[r * sendcount + i] = rank r's sendbuff[i]. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/** recvbuff[r * count + i] = rank r's sendbuff[rank * count + i]. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);

/** On root, recvbuff[r * count + i] = rank r's sendbuff[i] (recvbuff unused elsewhere). In place
 *  when sendbuff == recvbuff + root * count on the root. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/** recvbuff[i] = root's sendbuff[rank * count + i] (sendbuff unused off the root). In place when
 *  recvbuff == sendbuff + root * count on the root. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point (between ncclGroupStart/End, any order on each rank) ----------------------- */

/** Send `count` elements to `peer`, which posts a matching ncclRecv. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---- Groups ----------------------------------------------------------------------------------- */

/** Start queueing this thread's calls (groups nest; only the outermost end issues them). */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/** Issue the queued calls together; returns the first error of the group. */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/** End the group as ncclGroupEnd would, without running its calls: simInfo->estimatedTime gets
 *  the tuner's predicted time of the queued calls (microseconds). Queued inits still run. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
