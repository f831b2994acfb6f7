// Host topology from hwloc: what the tuner and the logs need to know about this machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/status.hpp"

namespace ferry {

/// This host's processing and memory layout, as hwloc sees it.
struct HostTopology {
  int packages = 0;
  int numaNodes = 0;
  int cores = 0;        ///< physical cores
  int pus = 0;          ///< hardware threads
  size_t l1dBytes = 0;  ///< per core, 0 when unknown
  size_t l2Bytes = 0;
  size_t l3Bytes = 0;  ///< per L3 instance
  int l3Count = 0;
  int cpuBoundTo = -1;  ///< the core this process is bound to, -1 when not bound to a single core
  int numaNode = -1;    ///< the NUMA node (OS index) holding every CPU this process may run on, -1 if several

  /// "1 package, 1 NUMA node, 2 cores (2 threads), L1d 48 KiB, L2 1.25 MiB, L3 54 MiB x1".
  std::string describe() const;
};

/// Discover the topology (a few milliseconds; call once per process).
Result<HostTopology> discoverTopology();

}  // namespace ferry
