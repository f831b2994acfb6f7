// Setting up the TCP transport's streams: every rank listens, publishes an address, and the pairs
// join with a fixed number of streams each (the lower rank connects, the higher one accepts).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"

namespace ferry::transport::tcp {

/// What a rank publishes: where it listens, and what a connection must say to be taken.
struct TcpAddress {
  uint32_t rank = 0;
  uint32_t streams = 1;  ///< streams this rank wants per pair between hosts
  uint64_t commId = 0;
  uint64_t nonce = 0;  ///< random; a hello must repeat it (strangers cannot)
  sockaddr_storage addr{};
  socklen_t length = 0;

  std::vector<uint8_t> serialize() const;
  /// `from`: the rank that published it, for the error.
  static Result<TcpAddress> deserialize(const std::vector<uint8_t>& bytes, int from);
  /// "10.0.0.1:4242", for messages.
  std::string toString() const;
};

/// A listening socket on `bind`'s address and a kernel-chosen port (close-on-exec, non-blocking),
/// whose accepted streams use TCP congestion control `congestion` ("": the system's).
/// Returns the descriptor and sets *bound to the address to publish.
Result<int> listenTcp(const sockaddr_storage& bind, socklen_t length, const std::string& congestion,
                      sockaddr_storage* bound, socklen_t* boundLength);

/// Joins rank `self` to every other rank: streams[p] is how many streams the pair (self, p) uses
/// (both sides must compute the same). Connects to higher ranks, accepts lower ones on `listenFd`,
/// and drops connections that do not say the right hello. Returns fds[p][s] (none for self),
/// non-blocking, TCP_NODELAY, close-on-exec; on failure closes everything it opened.
/// `congestion`: the TCP congestion control of the connecting streams ("" leaves the system's; one
/// the system refuses is logged once and left).
Result<std::vector<std::vector<int>>> connectStreams(int self, int listenFd, const std::vector<TcpAddress>& peers,
                                                     const std::vector<int>& streams, const std::string& congestion,
                                                     Deadline deadline);

}  // namespace ferry::transport::tcp
