// RDMA NIC discovery: which InfiniBand and RoCE ports this host has, how fast they are, and which
// NUMA node they hang off, so the runtime can report them with the topology and hand UCX the NIC
// nearest each rank. A host without any (no devices, no kernel support, or a build without
// libibverbs) is the ordinary case, not an error: the inventory is empty and says why, and ferry
// uses TCP between hosts.
//
// Rates are the nominal ones every tool prints (ibstat, /sys/class/infiniband/*/ports/*/rate,
// NCCL): lanes x per-lane rate, with 2.5, 5, 10, 10, 14, 25, 50, 100, 200 Gb/s per lane for SDR,
// DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR. (The signalling rate of FDR and faster is higher,
// 14.0625 to 212.5 Gbaud, because of the 64b/66b line code; the nominal rate is what the link
// carries, to within that code's 3 %.)
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "transports/nic/verbs_api.hpp"

namespace ferry::transport::nic {

/// One port of one RDMA device.
struct NicPort {
  std::string device;     ///< "mlx5_0"
  int port = 0;           ///< 1-based, as UCX and verbs count
  std::string state;      ///< "ACTIVE", "DOWN", "INIT", "ARMED", "ACTIVE_DEFER", "NOP", "state 9"
  bool active = false;    ///< state is ACTIVE: the port can carry traffic
  int lanes = 0;          ///< link width (4 for 4x); 0 when verbs reported none it knows
  std::string speed;      ///< per-lane speed grade ("HDR"); empty when unknown
  double gbps = 0;        ///< nominal link rate, lanes x per-lane rate; 0 when unknown
  std::string linkLayer;  ///< "InfiniBand" or "Ethernet" (RoCE)
  std::string gid;        ///< GID index 0 as IPv6 text ("fe80::..."); empty when it could not be read
  int numaNode = -1;      ///< the NUMA node of the device's PCI function; -1 unknown
  std::string netdev;     ///< RoCE: the Ethernet interface behind the port, when sysfs names it
};

/// What discovery found on this host.
struct NicInventory {
  std::vector<NicPort> ports;        ///< every port of every device that opened, by device name then port
  std::string whyNone;               ///< when ports is empty: why ("no devices found", "built without libibverbs")
  std::vector<std::string> skipped;  ///< devices and ports left out, each with the reason
};

/// List the RDMA ports through `api` (a few milliseconds with real devices; call once per process
/// or communicator). No devices, or no kernel support for them, is an empty inventory saying so;
/// a device that will not open or a port that cannot be queried is left out and named in
/// `skipped`. Only a failure to list the devices for another reason is an error.
Result<NicInventory> discoverNics(const VerbsApi& api = systemVerbs());

/// One line for the INIT log: "RDMA: mlx5_0:1 ACTIVE InfiniBand 4x HDR 200 Gb/s NUMA 0 GID
/// fe80::...; mlx5_1:1 DOWN ..." or "RDMA: none (no devices found): TCP between hosts".
std::string describeNics(const NicInventory& nics);

/// UCX's NET_DEVICES for a rank on `numaNode` (-1: unknown): one active port ("mlx5_0:1"), taken
/// from the active ports on that NUMA node, or from all active ports when none is there, and
/// among those from the fastest. `localIndex` (the rank's index among the ranks of its host that
/// share the NUMA node) spreads ranks over equally good ports round-robin; the same arguments
/// always give the same port. Empty when no port is active (UCX then uses TCP).
std::string ucxNetDevices(const std::vector<NicPort>& ports, int numaNode, int localIndex = 0);

/// ibv_port_state as text ("ACTIVE"); unknown values as "state N".
std::string portStateName(int state);
/// Lanes of an active_width bit (1 -> 1, 2 -> 4, 4 -> 8, 8 -> 12, 16 -> 2); 0 when unknown.
int laneCount(int activeWidth);
/// Speed grade of an active_speed bit ("EDR"); nullptr when unknown.
const char* speedName(int activeSpeed);
/// Nominal Gb/s per lane of an active_speed bit (EDR: 25); 0 when unknown.
double laneGbps(int activeSpeed);
/// "InfiniBand" or "Ethernet"; "unknown (N)" for values verbs may add later.
std::string linkLayerName(int linkLayer);
/// A GID as IPv6 text, zero runs compressed ("fe80::1").
std::string formatGid(const Gid& gid);

}  // namespace ferry::transport::nic
