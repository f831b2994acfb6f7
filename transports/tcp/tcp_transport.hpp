// The TCP transport: ferry's own sockets between hosts that have no RDMA fabric.
//
// Every pair of ranks on different hosts is joined by one or more TCP streams (FERRY_SOCKET_STREAMS),
// and a large message is split across them (tcp_wire.hpp), as NCCL's socket transport does: one
// stream rarely fills a link, several do. Sends are eager (a message goes out when it is posted,
// and the receiver keeps what arrives before its receive in memory of its own), so a message costs
// one trip over the link whatever its size, which matters on links with milliseconds of latency.
// Receives that are posted in time take the bytes straight from the socket into the user buffer.
// All I/O is non-blocking and happens in progress(), on the calling thread.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "transports/transport.hpp"

namespace ferry::transport::tcp {

/// The longest spin window TcpOptions::spinUs may ask for (a second).
inline constexpr long kMaxSpinUs = 1000L * 1000;
/// The most freed memory TcpOptions::poolBytes may keep (1 GiB).
inline constexpr int64_t kMaxPoolBytes = int64_t{1} << 30;

/// How to set up the transport.
struct TcpOptions {
  int rank = 0;
  int size = 1;
  uint64_t commId = 0;
  /// Where to listen (the port is the kernel's choice); loopback when every rank is on this host.
  sockaddr_storage bind{};
  socklen_t bindLength = 0;
  /// Streams per pair of ranks on different hosts (1..16); pairs on one host use one.
  int streams = 1;
  /// sameHost[r]: rank r runs on this host (empty: none does).
  std::vector<bool> sameHost;
  /// TCP congestion control of the streams: "auto" (cubic, BBR on paths with a round trip of a
  /// millisecond or more: tcp_connect.cpp says why), a kernel name, or empty for the system's.
  std::string congestion = "auto";
  /// Seconds connect() may take to join every stream.
  double connectSeconds = 300;
  /// Microseconds after the transport last moved a byte or took a post that its waits keep
  /// polling the sockets, yielding the core between polls, before they block in poll()
  /// (FERRY_SOCKET_SPIN_US, 0..kMaxSpinUs; 0: block at once).
  long spinUs = 0;
  /// Most bytes of freed memory of unexpected messages kept for the next ones (buffer_pool.hpp;
  /// FERRY_SOCKET_POOL_BYTES, 0..kMaxPoolBytes): what the transport holds between calls.
  int64_t poolBytes = int64_t{8} << 20;
};

/// A listening socket now; connect() joins the streams.
Result<std::unique_ptr<Transport>> createTcpTransport(const TcpOptions& options);

}  // namespace ferry::transport::tcp
