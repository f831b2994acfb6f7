// What ranks tell each other about themselves at init: which host and process they are.
#pragma once

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
  std::string hostId;  ///< hostname + kernel boot id
  uint64_t pidNamespace = 0;
  pid_t pid = 0;
  uint64_t commId = 0;  ///< proposed communicator id (rank 0's wins)

  static PeerInfo local();
  std::vector<uint8_t> serialize() const;
  static Result<PeerInfo> deserialize(const std::vector<uint8_t>& bytes, int rank);
};

/// Whether the process `pid` (in our pid namespace) no longer runs: gone or a zombie.
bool processGone(pid_t pid);

}  // namespace ferry
