// What ranks tell each other about themselves at init: which host and process they are.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry {

/// One rank's identity. Two ranks share a host when their hostId matches; their pids are
/// comparable when their pidNamespace matches too.
struct PeerInfo {
  std::string hostname;
  std::string hostId;  ///< FERRY_HOST_ID, else hostname + kernel boot id
  /// The kernel this rank runs on (its boot id) and its network namespace: ranks with the same
  /// two reach each other through the loopback, whatever hosts FERRY_HOST_ID makes of them.
  std::string bootId;
  uint64_t netNamespace = 0;
  uint64_t pidNamespace = 0;
  pid_t pid = 0;
  uint64_t commId = 0;  ///< proposed communicator id (rank 0's wins)
  /// The CPUs this process may run on (sched_getaffinity). The union over a host's ranks is what
  /// the host's ranks have between them: each rank bound to its own core sees one CPU, yet two
  /// ranks on two cores are not oversubscribed.
  cpu_set_t cpus{};

  static PeerInfo local();
  std::vector<uint8_t> serialize() const;
  static Result<PeerInfo> deserialize(const std::vector<uint8_t>& bytes, int rank);
};

/// Whether every rank of `peers` can reach every other through the loopback interface.
bool loopbackReachesAll(const std::vector<PeerInfo>& peers);

/// The union of the CPUs of the ranks in `peers` on the same host as peers[self].
cpu_set_t hostCpus(const std::vector<PeerInfo>& peers, int self);

/// Whether the process `pid` (in our pid namespace) no longer runs: gone or a zombie.
bool processGone(pid_t pid);

}  // namespace ferry
