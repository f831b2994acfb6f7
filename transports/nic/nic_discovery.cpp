// Discovery proper: walk the devices verbs lists, open each, and turn every port's attributes
// into a NicPort. Failures are kept as small as they are: a device that will not open costs that
// device, a port that cannot be queried costs that port, a GID that cannot be read costs the GID.
#include "transports/nic/nic_discovery.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace ferry::transport::nic {
namespace {

constexpr int kStateActive = 4;   // IBV_PORT_ACTIVE
constexpr int kLinkEthernet = 2;  // IBV_LINK_LAYER_ETHERNET

// One port's NicPort from its attributes; the GID and interface are the caller's.
NicPort decodePort(const std::string& device, int port, const PortAttr& attr, int numaNode) {
  NicPort p;
  p.device = device;
  p.port = port;
  p.state = portStateName(attr.state);
  p.active = attr.state == kStateActive;
  p.lanes = laneCount(attr.activeWidth);
  const char* grade = speedName(attr.activeSpeed);
  p.speed = grade != nullptr ? grade : "";
  p.gbps = p.lanes * laneGbps(attr.activeSpeed);
  p.linkLayer = linkLayerName(attr.linkLayer);
  p.numaNode = numaNode;
  return p;
}

// Every port of one opened device, appended to `inv`.
void addDevicePorts(const VerbsApi& api, const std::string& name, VerbsDevice& dev, NicInventory& inv) {
  Result<int> count = dev.portCount();
  if (!count.isOk()) {
    inv.skipped.push_back(name + ": " + count.status().message());
    return;
  }
  const int numa = api.numaNode(name);
  for (int port = 1; port <= *count; ++port) {
    Result<PortAttr> attr = dev.queryPort(port);
    if (!attr.isOk()) {
      inv.skipped.push_back(name + ":" + std::to_string(port) + ": " + attr.status().message());
      continue;
    }
    NicPort p = decodePort(name, port, *attr, numa);
    // GID 0 is the port's link-local address (from the GUID on InfiniBand, the MAC on RoCE); an
    // all-zero entry means the table is not filled in yet.
    Result<Gid> gid = dev.queryGid(port, 0);
    if (gid.isOk() && std::any_of(gid->begin(), gid->end(), [](uint8_t b) { return b != 0; })) {
      p.gid = formatGid(*gid);
    }
    if (attr->linkLayer == kLinkEthernet) p.netdev = api.netdev(name, port);
    inv.ports.push_back(std::move(p));
  }
}

}  // namespace

Result<NicInventory> discoverNics(const VerbsApi& api) {
  NicInventory inv;
  DeviceList list = api.listDevices();
  if (!list.unavailable.empty()) {
    inv.whyNone = list.unavailable;
    return inv;
  }
  if (list.error == ENOSYS) {
    // ENOSYS: the kernel has no RDMA subsystem or no uverbs module loaded (the usual cloud VM).
    inv.whyNone = "no kernel RDMA support";
    return inv;
  }
  if (list.error == ENODEV) list.error = 0;  // nothing to list, said as a failure
  if (list.error != 0) {
    return makeError(ErrorCode::kSystemError, "ibv_get_device_list failed: %s", std::strerror(list.error));
  }
  for (const std::string& name : list.names) {
    Result<std::unique_ptr<VerbsDevice>> dev = api.openDevice(name);
    if (!dev.isOk()) {
      inv.skipped.push_back(name + ": " + dev.status().message());
      continue;
    }
    addDevicePorts(api, name, **dev, inv);
  }
  std::sort(inv.ports.begin(), inv.ports.end(), [](const NicPort& a, const NicPort& b) {
    return a.device != b.device ? a.device < b.device : a.port < b.port;
  });
  if (inv.ports.empty()) {
    if (list.names.empty()) {
      inv.whyNone = "no devices found";
    } else if (inv.skipped.empty()) {
      inv.whyNone = "the devices have no ports";
    } else {
      inv.whyNone = "no device could be queried";
    }
  }
  return inv;
}

}  // namespace ferry::transport::nic
