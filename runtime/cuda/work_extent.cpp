// DevWork extents and their host execution (see work_extent.hpp).
#include "runtime/cuda/work_extent.hpp"

namespace ferry::gpu {

std::string describe(const DevWork& w, bool device) {
  std::string s = std::string(callKindName(w.kind)) + " of " + std::to_string(w.count) + " " + dataTypeName(w.type);
  if (w.kind == CallKind::kSend || w.kind == CallKind::kRecv) s += " with peer " + std::to_string(w.root);
  if (w.kind == CallKind::kBroadcast || w.kind == CallKind::kReduce) s += " from root " + std::to_string(w.root);
  if (device) {
    s += w.algo == gpu::DevAlgo::kDirect ? " (direct" : " (ring";
    s += w.proto == gpu::DevProto::kLL ? ", LL)" : ", simple)";
  }
  return s;
}

bool readsSend(const DevWork& w, int rank) {
  switch (w.kind) {
    case CallKind::kRecv: return false;
    case CallKind::kBroadcast: return rank == w.root;
    default: return true;
  }
}

bool writesRecv(const DevWork& w, int rank) {
  switch (w.kind) {
    case CallKind::kSend: return false;
    case CallKind::kReduce: return rank == w.root;
    default: return true;
  }
}

size_t sendBytes(const DevWork& w, int rank, int nRanks) {
  if (!readsSend(w, rank)) return 0;
  const size_t b = w.count * dataTypeSize(w.type);
  return w.kind == CallKind::kReduceScatter || w.kind == CallKind::kAllToAll ? b * static_cast<size_t>(nRanks) : b;
}

size_t recvBytes(const DevWork& w, int rank, int nRanks) {
  if (!writesRecv(w, rank)) return 0;
  const size_t b = w.count * dataTypeSize(w.type);
  return w.kind == CallKind::kAllGather || w.kind == CallKind::kAllToAll ? b * static_cast<size_t>(nRanks) : b;
}

Status runOnHost(Comm& comm, const std::vector<DevWork>& works) {
  std::vector<P2pOp> p2p;
  for (const DevWork& w : works) {
    if (w.kind == CallKind::kSend) {
      p2p.push_back(P2pOp::send(w.send, w.count, w.type, w.root));
    } else if (w.kind == CallKind::kRecv) {
      p2p.push_back(P2pOp::recv(w.recv, w.count, w.type, w.root));
    } else {
      FERRY_TRY(comm.collective(Call{w.kind, w.send, w.recv, w.count, w.type, w.op, w.root, {}, nullptr}));
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
