// DevWork extents and their host execution (see work_extent.hpp).
#include "runtime/cuda/work_extent.hpp"

namespace ferry::gpu {

const char* workName(WorkKind kind) {
  switch (kind) {
    case WorkKind::kAllReduce: return "allReduce";
    case WorkKind::kReduceScatter: return "reduceScatter";
    case WorkKind::kAllGather: return "allGather";
    case WorkKind::kAllToAll: return "allToAll";
    case WorkKind::kBroadcast: return "broadcast";
    case WorkKind::kReduce: return "reduce";
    case WorkKind::kSend: return "send";
    case WorkKind::kRecv: return "recv";
  }
  return "?";
}

std::string describe(const DevWork& w, bool device) {
  std::string s = std::string(workName(w.kind)) + " of " + std::to_string(w.count) + " " + dataTypeName(w.type);
  if (w.kind == WorkKind::kSend || w.kind == WorkKind::kRecv) s += " with peer " + std::to_string(w.root);
  if (w.kind == WorkKind::kBroadcast || w.kind == WorkKind::kReduce) s += " from root " + std::to_string(w.root);
  if (device) {
    s += w.algo == gpu::DevAlgo::kDirect ? " (direct" : " (ring";
    s += w.proto == gpu::DevProto::kLL ? ", LL)" : ", simple)";
  }
  return s;
}

bool readsSend(const DevWork& w, int rank) {
  switch (w.kind) {
    case WorkKind::kRecv: return false;
    case WorkKind::kBroadcast: return rank == w.root;
    default: return true;
  }
}

bool writesRecv(const DevWork& w, int rank) {
  switch (w.kind) {
    case WorkKind::kSend: return false;
    case WorkKind::kReduce: return rank == w.root;
    default: return true;
  }
}

size_t sendBytes(const DevWork& w, int rank, int nRanks) {
  if (!readsSend(w, rank)) return 0;
  const size_t b = w.count * dataTypeSize(w.type);
  return w.kind == WorkKind::kReduceScatter || w.kind == WorkKind::kAllToAll ? b * static_cast<size_t>(nRanks) : b;
}

size_t recvBytes(const DevWork& w, int rank, int nRanks) {
  if (!writesRecv(w, rank)) return 0;
  const size_t b = w.count * dataTypeSize(w.type);
  return w.kind == WorkKind::kAllGather || w.kind == WorkKind::kAllToAll ? b * static_cast<size_t>(nRanks) : b;
}

Status runOnHost(Comm& comm, const std::vector<DevWork>& works) {
  std::vector<P2pOp> p2p;
  for (const DevWork& w : works) {
    switch (w.kind) {
      case WorkKind::kAllReduce: FERRY_TRY(comm.allReduce(w.send, w.recv, w.count, w.type, w.op)); break;
      case WorkKind::kReduceScatter: FERRY_TRY(comm.reduceScatter(w.send, w.recv, w.count, w.type, w.op)); break;
      case WorkKind::kAllGather: FERRY_TRY(comm.allGather(w.send, w.recv, w.count, w.type)); break;
      case WorkKind::kAllToAll: FERRY_TRY(comm.allToAll(w.send, w.recv, w.count, w.type)); break;
      case WorkKind::kBroadcast: FERRY_TRY(comm.broadcast(w.send, w.recv, w.count, w.type, w.root)); break;
      case WorkKind::kReduce: FERRY_TRY(comm.reduce(w.send, w.recv, w.count, w.type, w.op, w.root)); break;
      case WorkKind::kSend: p2p.push_back(P2pOp::send(w.send, w.count, w.type, w.root)); break;
      case WorkKind::kRecv: p2p.push_back(P2pOp::recv(w.recv, w.count, w.type, w.root)); break;
    }
  }
  // A lone send or recv keeps the single-call rules (no transfer to self).
  if (p2p.size() == 1) {
    const P2pOp& o = p2p[0];
    return o.kind == P2pOp::Kind::kSend ? comm.send(o.buffer, o.count, o.type, o.peer)
                                        : comm.recv(o.buffer, o.count, o.type, o.peer);
  }
  if (!p2p.empty()) return comm.sendRecv(p2p);
  return Status::ok();
}

}  // namespace ferry::gpu
