// Comm::shrink: the ranks that remain after others died build a communicator without them.
//
// The parent's transport may be closed or broken by then (a failed call closes it so that peers
// fail fast), and its rendezvous root may have died with rank 0, so shrinking talks over TCP of
// its own. Every rank opens a listener at init (one descriptor, no thread; its address and a
// secret travel with the transport addresses) and accepts on it only when it leads a shrink.
//
// Membership: each caller tries the ranks below it in order, skipping those it excludes; the first
// whose listener accepts a connection leads (a dead process's listener refuses at once). The
// leader waits until every rank it does not exclude has either joined or is found gone (its
// listener refuses), checks that everyone excludes the same ranks, and sends each member the new
// rank order: the parent's, without the excluded and the dead. The new communicator's init then
// runs its rounds through the leader (a star of TCP connections), as the first communicator's run
// through the store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"
#include "runtime/bootstrap/socket.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/group_exchange.hpp"
#include "runtime/peer_info.hpp"

namespace ferry {

/// The address of the first interface `spec` selects (FERRY_SOCKET_IFNAME's syntax), port 0:
/// where a rendezvous root or a shrink listener binds when ranks span hosts.
Result<bootstrap::SocketAddress> interfaceAddress(const std::string& spec);

/// Where a rank of `peers` listens for its peers (the tcp transport, a shrink listener): the
/// loopback when it reaches every rank and no interface is asked for (`spec`, FERRY_SOCKET_IFNAME),
/// else interfaceAddress(spec). Port 0.
Result<bootstrap::SocketAddress> listenAddress(const std::vector<PeerInfo>& peers, const std::string& spec);

/// Where a rank listens for a shrink, and the secret a joiner presents there.
struct ShrinkContact {
  bootstrap::SocketAddress addr;
  bootstrap::Secret secret;
  bool valid = false;  ///< false when the rank could not open a listener

  /// [u8 valid][u16 address length][address "host:port"][16-byte secret].
  Bytes serialize() const;
  /// Rejects anything malformed, naming `rank`.
  static Result<ShrinkContact> deserialize(const Bytes& bytes, int rank);
};

/// This rank's listener, open for the communicator's life.
class ShrinkListener {
 public:
  /// Listen on `bind` (port 0: any free port) with a fresh secret.
  static Result<std::unique_ptr<ShrinkListener>> open(const bootstrap::SocketAddress& bind);
  const ShrinkContact& contact() const { return contact_; }
  int fd() const { return fd_.get(); }

 private:
  bootstrap::Fd fd_;
  ShrinkContact contact_;
};

/// The outcome of the membership round.
struct ShrinkMembership {
  std::vector<int> members;                ///< parent ranks of the new communicator, ascending
  int newRank = -1;                        ///< this rank's place among them
  std::vector<int> gone;                   ///< ranks the leader found dead (not excluded by the callers)
  std::unique_ptr<Rendezvous> rendezvous;  ///< the new communicator's init rounds, through the leader
};

/// A joiner's greeting, as the leader reads it from `fd`: checked against the leader's `secret`,
/// `commId` and `size` (errors say what was wrong; the leader drops such a connection).
struct ShrinkGreeting {
  int rank = -1;
  std::vector<int> exclude;
};
Result<ShrinkGreeting> readShrinkGreeting(int fd, const bootstrap::Secret& secret, uint64_t commId, int size,
                                          Deadline deadline);

/// The leader's answer, as a joiner reads it from `fd`: the leader's error (status) or the members.
struct ShrinkReply {
  Status status;
  std::vector<int> members;
  std::vector<int> gone;
};
Result<ShrinkReply> readShrinkReply(int fd, int leader, Deadline deadline);

/// Run the membership round as parent rank `rank` of `contacts.size()` (see above). `exclude` is
/// sorted, without duplicates and without `rank`. Every wait also ends, within 0.1 s, when `stop`
/// returns an error (the communicator was aborted): the leader then tells the members who joined.
Result<ShrinkMembership> gatherSurvivors(int rank, uint64_t commId, const std::vector<int>& exclude,
                                         ShrinkListener& mine, const std::vector<ShrinkContact>& contacts,
                                         Deadline deadline, const std::function<Status()>& stop = {});

}  // namespace ferry
