// Collective and point-to-point entry points (ncclGather / ncclScatter become point-to-point batches). Each builds an
// Op and submits it (ops.cpp): checked, then run now or queued by the open group. Calls on host buffers ignore `stream`
// and complete before they return; calls on device buffers are enqueued on `stream` (ops.cpp: runOnStream).
#include "nccl/ops.hpp"

using namespace ferry::nccl;
using ferry::CallKind;

namespace {

// `rooted`: ncclGather / ncclScatter, which ops.cpp turns into batches of sends and receives (`kind` unused).
ncclResult_t call(const char* fn, CallKind kind, const void* send, void* recv, size_t count, int type, int redOp,
                  int peer, ncclComm_t comm, cudaStream_t stream, Rooted rooted = Rooted::kNone) {
  return entry(fn, [&] {
    Op op;
    op.rooted = rooted;
    if (rooted == Rooted::kNone) op.call.kind = kind;
    op.call.caller = fn;
    op.call.send = send;
    op.call.recv = recv;
    op.call.count = count;
    op.call.root = peer;
    op.stream = stream;
    return submit(comm, RawArgs{type, redOp}, std::move(op));
  });
}

}  // namespace

extern "C" ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return call("ncclAllReduce", CallKind::kAllReduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), 0, comm,
              stream);
}
FERRY_NCCL_ALIAS(ncclAllReduce)

extern "C" ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return call("ncclReduceScatter", CallKind::kReduceScatter, sendbuff, recvbuff, recvcount, rawEnum(datatype),
              rawEnum(op), 0, comm, stream);
}
FERRY_NCCL_ALIAS(ncclReduceScatter)

extern "C" ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return call("ncclReduce", CallKind::kReduce, sendbuff, recvbuff, count, rawEnum(datatype), rawEnum(op), root, comm,
              stream);
}
FERRY_NCCL_ALIAS(ncclReduce)

extern "C" ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  return call("ncclAllGather", CallKind::kAllGather, sendbuff, recvbuff, sendcount, rawEnum(datatype), -1, 0, comm,
              stream);
}
FERRY_NCCL_ALIAS(ncclAllGather)

extern "C" ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return call("ncclBroadcast", CallKind::kBroadcast, sendbuff, recvbuff, count, rawEnum(datatype), -1, root, comm,
              stream);
}
FERRY_NCCL_ALIAS(ncclBroadcast)

extern "C" ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return call("ncclBcast", CallKind::kBroadcast, buff, buff, count, rawEnum(datatype), -1, root, comm, stream);
}
FERRY_NCCL_ALIAS(ncclBcast)

extern "C" ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return call("ncclAlltoAll", CallKind::kAllToAll, sendbuff, recvbuff, count, rawEnum(datatype), -1, 0, comm, stream);
}
FERRY_NCCL_ALIAS(ncclAlltoAll)

extern "C" ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return call("ncclGather", CallKind::kSend, sendbuff, recvbuff, count, rawEnum(datatype), -1, root, comm, stream,
              Rooted::kGather);
}
FERRY_NCCL_ALIAS(ncclGather)

extern "C" ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  return call("ncclScatter", CallKind::kSend, sendbuff, recvbuff, count, rawEnum(datatype), -1, root, comm, stream,
              Rooted::kScatter);
}
FERRY_NCCL_ALIAS(ncclScatter)

extern "C" ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return call("ncclSend", CallKind::kSend, sendbuff, nullptr, count, rawEnum(datatype), -1, peer, comm, stream);
}
FERRY_NCCL_ALIAS(ncclSend)

extern "C" ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  return call("ncclRecv", CallKind::kRecv, nullptr, recvbuff, count, rawEnum(datatype), -1, peer, comm, stream);
}
FERRY_NCCL_ALIAS(ncclRecv)
