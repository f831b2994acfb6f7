// Which network devices UCX may use for a communicator: the NET_DEVICES value ferry hands it.
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "runtime/peer_info.hpp"

namespace ferry {

/// The UCX NET_DEVICES value for rank `rank` of `peers`:
///   - "lo" when every rank reaches every other through the loopback (one kernel, one network
///     namespace: the ranks of one machine, whatever FERRY_HOST_ID makes of them), unless
///     FERRY_SOCKET_IFNAME names interfaces;
///   - otherwise the active RDMA ports nearest this rank (libibverbs), then the interfaces
///     FERRY_SOCKET_IFNAME selects (NCCL's syntax; by default every interface but lo and docker*),
///     comma-separated. Fails naming the variable, the rank and the interfaces there when nothing
///     is left.
/// `localIndex`: the rank's place among its host's ranks (spreads them over equally near NICs).
Result<std::string> chooseNetDevices(const std::vector<PeerInfo>& peers, int rank, int localIndex);

/// The RDMA ports among a UCX NET_DEVICES value, comma-separated: its entries that name a device's
/// port ("mlx5_0:1"); network interfaces ("eth0", "lo") and "all" name none, so a rank over the
/// loopback or UCX's TCP reports no port (the tuner then counts one link for its host).
std::string rdmaPortsOf(const std::string& netDevices);

/// This host's RDMA ports, found once per process: "RDMA: mlx5_0:1 ACTIVE InfiniBand 4x HDR 200 Gb/s
/// NUMA 0 ..." or "RDMA: none (no devices found): TCP between hosts", for the INIT log.
const std::string& describeRdma();

/// Whether this host has an RDMA port that can carry traffic (FERRY_TRANSPORT=auto then picks UCX
/// between hosts, and ferry's own TCP transport otherwise).
bool hasActiveRdma();

}  // namespace ferry
