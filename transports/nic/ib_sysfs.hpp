// What the kernel's sysfs says about an RDMA device that verbs does not: the NUMA node its PCI
// function hangs off, and the network interface behind a RoCE port. The root is a parameter so a
// test can point these at a tree of its own; the real one is kSysfsInfiniband.
#pragma once

#include <string>

namespace ferry::transport::nic {

/// Where the kernel lists RDMA devices, one folder per device name.
inline constexpr const char* kSysfsInfiniband = "/sys/class/infiniband";

/// <root>/<device>/device/numa_node; -1 when missing, unreadable or -1 (no NUMA, or not known).
int readNumaNode(const std::string& root, const std::string& device);

/// The interface behind `port` (1-based): <root>/<device>/ports/<port>/gid_attrs/ndevs/0 (the
/// interface of GID 0), else the only entry of <root>/<device>/device/net/; empty when neither
/// names one (InfiniBand ports have none).
std::string readNetdev(const std::string& root, const std::string& device, int port);

}  // namespace ferry::transport::nic
