// What the runtime does with an inventory: the INIT log line, and UCX's NET_DEVICES for a rank.
#include <algorithm>
#include <cstdio>

#include "transports/nic/nic_discovery.hpp"

namespace ferry::transport::nic {
namespace {

// "mlx5_0:1 ACTIVE InfiniBand 4x HDR 200 Gb/s NUMA 0 GID fe80::1"
std::string describePort(const NicPort& p) {
  std::string s = p.device + ":" + std::to_string(p.port) + " " + p.state + " " + p.linkLayer;
  if (!p.netdev.empty()) s += " " + p.netdev;
  if (p.gbps > 0) {
    char rate[64];
    std::snprintf(rate, sizeof(rate), " %dx %s %g Gb/s", p.lanes, p.speed.c_str(), p.gbps);
    s += rate;
  }
  s += p.numaNode >= 0 ? " NUMA " + std::to_string(p.numaNode) : std::string(" NUMA ?");
  if (!p.gid.empty()) s += " GID " + p.gid;
  return s;
}

std::string joinSkipped(const std::vector<std::string>& skipped) {
  std::string s;
  for (const std::string& why : skipped) s += (s.empty() ? "skipped " : "; skipped ") + why;
  return s;
}

}  // namespace

std::string describeNics(const NicInventory& nics) {
  if (nics.ports.empty()) {
    std::string why = nics.whyNone.empty() ? "no ports" : nics.whyNone;
    if (!nics.skipped.empty()) why += "; " + joinSkipped(nics.skipped);
    return "RDMA: none (" + why + "): TCP between hosts";
  }
  std::string s = "RDMA: ";
  bool anyActive = false;
  for (size_t i = 0; i < nics.ports.size(); ++i) {
    s += (i == 0 ? "" : "; ") + describePort(nics.ports[i]);
    anyActive = anyActive || nics.ports[i].active;
  }
  if (!nics.skipped.empty()) s += "; " + joinSkipped(nics.skipped);
  if (!anyActive) s += ": no port is active, TCP between hosts";
  return s;
}

std::string ucxNetDevices(const std::vector<NicPort>& ports, int numaNode, int localIndex) {
  std::vector<const NicPort*> active;
  std::vector<const NicPort*> near;
  for (const NicPort& p : ports) {
    if (!p.active) continue;
    active.push_back(&p);
    if (numaNode >= 0 && p.numaNode == numaNode) near.push_back(&p);
  }
  std::vector<const NicPort*>& pool = near.empty() ? active : near;
  if (pool.empty()) return {};
  // The fastest of the nearest, in name order so every rank sees the same list.
  double best = 0;
  for (const NicPort* p : pool) best = std::max(best, p->gbps);
  std::erase_if(pool, [best](const NicPort* p) { return p->gbps < best; });
  std::sort(pool.begin(), pool.end(), [](const NicPort* a, const NicPort* b) {
    return a->device != b->device ? a->device < b->device : a->port < b->port;
  });
  const size_t pick = localIndex > 0 ? static_cast<size_t>(localIndex) % pool.size() : 0;
  return pool[pick]->device + ":" + std::to_string(pool[pick]->port);
}

}  // namespace ferry::transport::nic
