// Topology discovery through hwloc. Only counts and cache sizes are kept: they are what the
// INIT log reports and what a cost model needs; the hwloc tree itself is released at once.
#include "runtime/topology.hpp"

#include <hwloc.h>

#include <cstdio>

namespace ferry {
namespace {

std::string bytes(size_t b) {
  char buf[32];
  if (b >= (size_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.3g MiB", static_cast<double>(b) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  }
  return buf;
}

size_t firstCacheSize(hwloc_topology_t t, hwloc_obj_type_t type) {
  hwloc_obj_t o = hwloc_get_obj_by_type(t, type, 0);
  return o != nullptr && o->attr != nullptr ? static_cast<size_t>(o->attr->cache.size) : 0;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(t, type);
  return n < 0 ? 0 : n;
}

}  // namespace

std::string HostTopology::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%d package%s, %d NUMA node%s, %d core%s (%d thread%s)", packages,
                packages == 1 ? "" : "s", numaNodes, numaNodes == 1 ? "" : "s", cores, cores == 1 ? "" : "s", pus,
                pus == 1 ? "" : "s");
  std::string s = buf;
  if (l1dBytes > 0) s += ", L1d " + bytes(l1dBytes);
  if (l2Bytes > 0) s += ", L2 " + bytes(l2Bytes);
  if (l3Bytes > 0) s += ", L3 " + bytes(l3Bytes) + " x" + std::to_string(l3Count);
  s += cpuBoundTo >= 0 ? ", bound to core " + std::to_string(cpuBoundTo) : ", not bound to a core";
  return s;
}

Result<HostTopology> discoverTopology() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return makeError(ErrorCode::kSystemError, "hwloc_topology_init failed");
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return makeError(ErrorCode::kSystemError, "hwloc_topology_load failed");
  }
  HostTopology h;
  h.packages = count(t, HWLOC_OBJ_PACKAGE);
  h.numaNodes = count(t, HWLOC_OBJ_NUMANODE);
  h.cores = count(t, HWLOC_OBJ_CORE);
  h.pus = count(t, HWLOC_OBJ_PU);
  h.l1dBytes = firstCacheSize(t, HWLOC_OBJ_L1CACHE);
  h.l2Bytes = firstCacheSize(t, HWLOC_OBJ_L2CACHE);
  h.l3Bytes = firstCacheSize(t, HWLOC_OBJ_L3CACHE);
  h.l3Count = count(t, HWLOC_OBJ_L3CACHE);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set != nullptr && hwloc_get_cpubind(t, set, HWLOC_CPUBIND_PROCESS) == 0) {
    hwloc_obj_t core = hwloc_get_obj_covering_cpuset(t, set);
    if (core != nullptr && core->type == HWLOC_OBJ_CORE) h.cpuBoundTo = static_cast<int>(core->logical_index);
    // The NUMA node whose CPUs hold all of ours: the memory (and the NICs) nearest this process.
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    if (nodes != nullptr) {
      hwloc_cpuset_to_nodeset(t, set, nodes);
      if (hwloc_bitmap_weight(nodes) == 1) h.numaNode = hwloc_bitmap_first(nodes);
      hwloc_bitmap_free(nodes);
    }
  }
  if (set != nullptr) hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  return h;
}

}  // namespace ferry
