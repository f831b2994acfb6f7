// Which ranks share a host, and the two levels a communicator that spans hosts is split into.
//
// Vocabulary. Hosts are numbered in the order of their lowest rank (the host of rank 0 is host 0);
// a rank's local index is its place among its host's ranks, by rank. The local group of a host is
// its ranks; cross group j holds the ranks of local index j, one per host that has more than j
// ranks, in host order. A layout is even when every host has the same number of ranks: then
// every cross group spans every host and a rank's place in its cross group is its host's number.
#pragma once

#include <string>
#include <vector>

namespace ferry {

struct HostLayout {
  int hosts = 0;
  std::vector<int> hostOf;                ///< rank -> host number
  std::vector<int> localOf;               ///< rank -> local index
  std::vector<std::vector<int>> members;  ///< host -> its ranks, ascending

  /// The layout of ranks whose host ids are `hostIds` (index: rank).
  static HostLayout fromHostIds(const std::vector<std::string>& hostIds);

  int ranks() const { return static_cast<int>(hostOf.size()); }
  int localSize(int host) const { return static_cast<int>(members[static_cast<size_t>(host)].size()); }
  int maxLocalSize() const;
  /// Every host has the same number of ranks.
  bool even() const;
  /// Some host has more than one rank and there is more than one host: two levels to work with.
  bool twoLevels() const { return hosts > 1 && maxLocalSize() > 1; }
  /// The ranks of cross group `local`, in host order.
  std::vector<int> crossGroup(int local) const;
  /// The rank of local index `local` on `host`, or -1 when that host has no such rank.
  int rankAt(int host, int local) const;
  /// Links from every host to the network (the tuner's NICs per host): per host, the distinct RDMA
  /// ports its ranks use, at least one; then the fewest over the hosts, since a step that crosses
  /// waits for the host with the fewest. `rdmaPorts` (index: rank): each rank's ports,
  /// comma-separated ("mlx5_0:1"); empty where it uses none (TCP, the loopback).
  int linksPerHost(const std::vector<std::string>& rdmaPorts) const;
  /// "2 hosts: 0-1 | 2-3" for logs.
  std::string describe() const;
};

/// `text` with every "rank N" (N < members.size()) read as members[N]: a sub-communicator's
/// message in its parent's numbering.
std::string renumberRanks(const std::string& text, const std::vector<int>& members);

/// As renumberRanks, for the message of a sub-communicator that its parent's watchdog stopped: the
/// sub-communicator's own words (its call, its rank, the rank it waited for) come first, then what
/// the parent said ("rank N failed and reported: ...", "communicator aborted: ..."), which already
/// speaks in the parent's numbering and is kept as it is.
std::string renumberBeforeParent(const std::string& text, const std::vector<int>& members);

}  // namespace ferry
