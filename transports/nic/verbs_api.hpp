// The seam between NIC discovery and libibverbs.
//
// Discovery (nic_discovery.cpp) asks these questions and never calls verbs itself, so a unit test
// can answer them with a faked device list: no devices, no kernel support, a device that will not
// open, ports in every state. Answers stay in verbs' own encodings (ibv_port_state, the width and
// speed bits of ibv_port_attr); decoding them is discovery's job and is tested with the fakes.
// systemVerbs() is the real thing when ferry is built with libibverbs, and a stub that says it
// was not otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::transport::nic {

/// What ibv_get_device_list said.
struct DeviceList {
  std::vector<std::string> names;  ///< ibv_get_device_name of each device, in the library's order
  int error = 0;                   ///< errno when the list could not be read (ENOSYS: no kernel support)
  std::string unavailable;         ///< set when verbs cannot be asked at all: why ("built without libibverbs")
};

/// One port as ibv_query_port reports it, in verbs' encodings.
struct PortAttr {
  int state = 0;        ///< enum ibv_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
  int activeWidth = 0;  ///< lanes as one bit: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x
  int activeSpeed = 0;  ///< per-lane rate as one bit: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, ...
  int linkLayer = 0;    ///< 0 unspecified (InfiniBand), 1 InfiniBand, 2 Ethernet (RoCE)
};

/// A GID: 16 bytes in network order.
using Gid = std::array<uint8_t, 16>;

/// An opened device (an ibv_context); destroying it closes the device.
class VerbsDevice {
 public:
  virtual ~VerbsDevice() = default;
  /// Physical ports (ibv_query_device's phys_port_cnt); they are numbered from 1.
  virtual Result<int> portCount() = 0;
  /// ibv_query_port for port `port` (1-based).
  virtual Result<PortAttr> queryPort(int port) = 0;
  /// ibv_query_gid for entry `index` of port `port`'s GID table.
  virtual Result<Gid> queryGid(int port, int index) = 0;
};

/// The questions discovery asks: the verbs calls, and the sysfs files verbs does not cover.
class VerbsApi {
 public:
  virtual ~VerbsApi() = default;
  /// ibv_get_device_list and ibv_get_device_name (the list itself is freed before returning).
  virtual DeviceList listDevices() const = 0;
  /// ibv_open_device on the device called `name`; the error says why it would not open.
  virtual Result<std::unique_ptr<VerbsDevice>> openDevice(const std::string& name) const = 0;
  /// The NUMA node the device's PCI function hangs off; -1 when unknown.
  virtual int numaNode(const std::string& name) const = 0;
  /// The network interface behind port `port` (RoCE: "eth2"); empty when there is none or it is unknown.
  virtual std::string netdev(const std::string& name, int port) const = 0;
};

/// This process's libibverbs (the stub without it). One instance, alive for the whole process.
const VerbsApi& systemVerbs();

/// Whether this build links libibverbs.
bool builtWithVerbs();

}  // namespace ferry::transport::nic
