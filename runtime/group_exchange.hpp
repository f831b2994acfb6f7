// Rendezvous: how the ranks of a communicator being built exchange bytes before it has a transport.
//
// A new communicator needs a few all-gathers (identities, transport addresses) and a barrier. The
// first communicator of a job does them through the TCP store; communicators made by split() do
// them through their parent communicator, where every parent rank takes part (those joining no
// new communicator contribute nothing) and each keeps the contributions of its own group.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"

namespace ferry {

using Bytes = std::vector<uint8_t>;

/// All-gather among the ranks of the communicator being built.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  /// Every rank's `mine`, indexed by rank in the new communicator.
  virtual Result<std::vector<Bytes>> allGather(const Bytes& mine, Deadline deadline) = 0;
};

namespace bootstrap {
class StoreClient;
}

/// Through the TCP store.
std::unique_ptr<Rendezvous> storeRendezvous(std::unique_ptr<bootstrap::StoreClient> client);

class Comm;
/// Through `parent`: `members` lists the parent ranks of the new communicator in its rank order
/// (empty for a parent rank that joins none, which still takes part in every round).
std::unique_ptr<Rendezvous> parentRendezvous(Comm& parent, std::vector<int> members);

}  // namespace ferry
