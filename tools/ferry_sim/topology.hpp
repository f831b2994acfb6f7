// A modelled machine, read from a topology file (tools/ferry_sim/topologies/*.ini).
//
// The machine is hosts x ranks per host (one rank per GPU). Within a host every rank has a link
// out and a link in (NVLink through NVSwitch, or a process's copies through shared memory), and
// optionally the host's memory is one more link every intra-host message crosses. A host may be
// split into NVLink domains of consecutive ranks (H200 NVL's NVL4 bridges): a message between two
// domains also leaves its domain's link out and enters the other's link in (PCIe and the sockets'
// link); a rank reaches its NIC without crossing domains. Between hosts
// each rank leaves by NIC (local rank mod NICs) and crosses a fat tree of up to three tiers: a
// message between hosts of one tier-t group climbs to tier t. Each tier's uplinks are modelled per
// NIC, at the NIC's rate divided by the product of the oversubscriptions up to that tier: under
// the symmetry ferry-sim relies on, a switch's uplinks carry the same load from each NIC below it.
// Rail-optimised wiring: NIC k of every host sits on rail switch k, so ranks of different local
// numbers meet only above the first tier. An optional fabric link (a shaped bridge, one machine's
// loopback) is crossed by every message between hosts. Where the hosts are one machine's
// namespaces (`shared_cores`), its cores are that link's capacity and the ranks' reductions and
// copies take their share of it too.
//
// File format: `key = value` lines, `#` comments; unknown keys are errors. Rates in bytes per
// second, latencies in seconds (see any file in topologies/ for every key).
#pragma once

#include <memory>
#include <string>

#include "ferry/status.hpp"
#include "tools/ferry_sim/fabric.hpp"
#include "tools/ferry_sim/replay.hpp"

namespace ferry::sim {

struct Topology {
  std::string name;
  int ranksPerHost = 1;               ///< gpus_per_host
  double intraBw = 0;                 ///< intra_bw: per rank, each direction
  double intraLatency = 0;            ///< intra_latency
  double hostMemBw = 0;               ///< host_mem_bw: shared by a host's intra-host messages (0: not a limit)
  int domainRanks = 0;                ///< nvlink_domain: ranks per NVLink domain (0: the whole host)
  double domainBw = 0;                ///< domain_bw: a domain's link to the rest of its host, each direction
  double domainLatency = 0;           ///< domain_latency: added to a message between domains
  int nics = 1;                       ///< nics_per_host
  double nicBw = 0;                   ///< nic_bw: per NIC, each direction
  double nicLatency = 0;              ///< nic_latency: one message between hosts under one switch
  double hopLatency = 0;              ///< hop_latency: each further switch a message crosses
  bool rail = false;                  ///< rail: rail-optimised wiring
  int tiers = 1;                      ///< tiers: switch levels (1: one switch joins every host)
  int tierHosts[3] = {0, 0, 0};       ///< tierK_hosts: hosts under one tier-K switch group
  double tierOversub[3] = {1, 1, 1};  ///< tierK_oversub: downlinks / uplinks of tier K
  double fabricBw = 0;                ///< fabric_bw: one link every message between hosts crosses (0: none)
  int sharedCores = 0;                ///< shared_cores: the cores fabric_bw is, shared with computations (0: none)
  ComputeRates compute;               ///< reduce_bw, copy_bw
  size_t sliceBytes = 256 * 1024;     ///< slice_bytes: FERRY_SLICE_BYTES of the modelled runs
  int depth = 8;                      ///< pipeline_depth: FERRY_PIPELINE_DEPTH

  /// Parse the text of a topology file; errors name the line and the key.
  static Result<Topology> parse(const std::string& text);
  static Result<Topology> load(const std::string& path);

  /// The machine for an n-rank call of which ranks 0..period-1 are simulated (period a multiple
  /// of ranksPerHost dividing n, or n).
  std::unique_ptr<Fabric> fabric(int n, int period) const;
  /// One message between ranks of different hosts under one switch, and the rate of one stream:
  /// the alpha and beta the tuner's cost formulas take.
  double alpha() const { return nicLatency; }
  double streamBw() const;
  /// The rate of one stream between two ranks of one host: the intra-host figures the formulas take.
  double intraStreamBw() const;
  /// NVLink domains per host (1 when the host is one domain).
  int domains() const { return domainRanks > 0 ? ranksPerHost / domainRanks : 1; }
};

}  // namespace ferry::sim
