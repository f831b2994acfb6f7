// What a DevWork reads and writes on one rank, and how it runs with the host algorithms: shared by
// the host route (host buffers on a stream), the staged route and the group's end.
#pragma once

#include <string>
#include <vector>

#include "collectives/cuda/device.hpp"
#include "ferry/comm.hpp"

namespace ferry::gpu {

/// "allReduce of 1024 float32 (ring, LL)" for messages; algo and proto when `device`.
std::string describe(const DevWork& w, bool device);

/// Whether `rank` reads w.send / writes w.recv (broadcast reads on the root only, reduce writes on
/// the root only, send and recv use one buffer each).
bool readsSend(const DevWork& w, int rank);
bool writesRecv(const DevWork& w, int rank);
/// Bytes of w.send read and of w.recv written on `rank` of `nRanks` (0 when not used).
size_t sendBytes(const DevWork& w, int rank, int nRanks);
size_t recvBytes(const DevWork& w, int rank, int nRanks);

/// Run `works` with the host algorithms, on host buffers: the collectives in order, then every send
/// and receive as one Comm::sendRecv batch (so a group's pairs never deadlock, whatever the order).
Status runOnHost(Comm& comm, const std::vector<DevWork>& works);

}  // namespace ferry::gpu
