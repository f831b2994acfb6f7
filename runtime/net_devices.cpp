#include "runtime/net_devices.hpp"

#include <algorithm>
#include <atomic>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/bootstrap/interfaces.hpp"
#include "runtime/topology.hpp"
#include "transports/nic/nic_discovery.hpp"

namespace ferry {
namespace {

// Discovery runs once per process (a few milliseconds with devices); a failure to list them is
// reported as the reason there are none.
const transport::nic::NicInventory& rdma() {
  static const transport::nic::NicInventory inventory = [] {
    auto found = transport::nic::discoverNics();
    if (found.isOk()) return *found;
    transport::nic::NicInventory none;
    none.whyNone = found.status().message();
    return none;
  }();
  return inventory;
}

}  // namespace

const std::string& describeRdma() {
  static const std::string text = transport::nic::describeNics(rdma());
  return text;
}

bool hasActiveRdma() {
  for (const transport::nic::NicPort& p : rdma().ports) {
    if (p.active) return true;
  }
  return false;
}

std::string rdmaPortsOf(const std::string& netDevices) {
  std::string ports;
  for (size_t at = 0; at < netDevices.size();) {
    const size_t end = std::min(netDevices.find(',', at), netDevices.size());
    const std::string entry = netDevices.substr(at, end - at);
    if (entry.find(':') != std::string::npos) ports += (ports.empty() ? "" : ",") + entry;
    at = end + 1;
  }
  return ports;
}

Result<std::string> chooseNetDevices(const std::vector<PeerInfo>& peers, int rank, int localIndex) {
  const std::string& spec = config().socketIfname;
  if (spec.empty() && loopbackReachesAll(peers)) return std::string("lo");
  auto all = bootstrap::listInterfaces();
  FERRY_TRY(all);
  auto chosen = bootstrap::selectInterfaces(bootstrap::IfnameFilter::parse(spec), *all, rank,
                                            peers[static_cast<size_t>(rank)].hostname);
  FERRY_TRY(chosen);
  static const int numa = [] {
    auto t = discoverTopology();
    return t.isOk() ? t->numaNode : -1;
  }();
  std::string devices = transport::nic::ucxNetDevices(rdma().ports, numa, localIndex);
  static std::atomic<bool> said{false};  // once per process: every communicator would say the same
  if (!said.exchange(true)) {
    FERRY_INFO(log::kNet, "%s", describeRdma().c_str());
  }
  for (const bootstrap::NetInterface& i : *chosen) devices += (devices.empty() ? "" : ",") + i.name;
  FERRY_INFO(log::kNet, "rank %d between hosts: UCX NET_DEVICES=%s (interfaces %s by FERRY_SOCKET_IFNAME='%s')", rank,
             devices.c_str(), bootstrap::describeInterfaces(*chosen).c_str(),
             bootstrap::IfnameFilter::parse(spec).spec().c_str());
  return devices;
}

}  // namespace ferry
