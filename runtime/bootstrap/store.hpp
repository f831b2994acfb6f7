// The TCP rendezvous store: how ranks of a job find each other before any transport exists.
//
// One process runs a StoreServer (the one that created the unique id, or rank 0 when ranks start from
// the environment). Every rank connects a StoreClient, proves it holds the job's 128-bit secret
// without sending it (and checks the root's proof in return: handshake.hpp), and then
// runs rounds of allGather (each rank contributes bytes, every rank receives all contributions) and
// barrier. Frames are length-prefixed; the server validates magic, type and length before it
// allocates anything, and drops (and logs) connections that fail the proof or send garbage.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"

namespace ferry::bootstrap {

/// The job secret: 128 random bits.
struct Secret {
  std::array<uint8_t, 16> bytes{};
  /// 16 bytes from the system's random source.
  static Secret random();
  /// From FERRY_SECRET: 32 hex digits are taken as they are, any other string is hashed to 128 bits.
  static Secret fromString(const std::string& text);
  bool operator==(const Secret& o) const;  ///< constant time
};

/// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  /// "host:port" or "[v6]:port"; host may be a name (resolved) or a numeric address.
  static Result<SocketAddress> parse(const std::string& hostPort);
  /// The IPv4 loopback address with the given port.
  static SocketAddress loopback(uint16_t port);
  uint16_t port() const;
  std::string toString() const;
};

/// What a unique id carries: where the root listens and the job's secret.
struct RootInfo {
  SocketAddress addr;
  Secret secret;
};

inline constexpr size_t kUniqueIdBytes = 128;  ///< as ncclUniqueId
/// Encode/decode the 128-byte unique id (magic, version, address, port, secret).
void encodeUniqueId(const RootInfo& info, uint8_t out[kUniqueIdBytes]);
Result<RootInfo> decodeUniqueId(const uint8_t in[kUniqueIdBytes]);

/// The rendezvous server. It serves one job on a background thread.
class StoreServer {
 public:
  /// Listen on `bind` (port 0 picks a free port) for ranks that prove they hold `secret`. The world
  /// size is `worldSize` when rank 0 starts the root from its own configuration; 0 lets rank 0's
  /// registration set it (a root started before the size is known, as for a unique id).
  static Result<std::unique_ptr<StoreServer>> start(const SocketAddress& bind, const Secret& secret, int worldSize = 0);
  /// Keep serving in the background after the owner lets go, until every rank of the job has
  /// disconnected after its last round (or nothing happened for the configured timeout).
  static void detach(std::unique_ptr<StoreServer> server);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  /// The address actually bound (with the chosen port).
  SocketAddress address() const;

  struct Impl;

 private:
  explicit StoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One rank's connection to the store.
class StoreClient {
 public:
  /// Connect (retrying until `deadline` while the root is not up yet) and register as `rank` of `size`.
  static Result<std::unique_ptr<StoreClient>> connect(const SocketAddress& root, const Secret& secret, int rank,
                                                      int size, Deadline deadline);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;
  /// Every rank contributes `mine`; returns every rank's contribution, indexed by rank. When the
  /// deadline passes first, the error names the ranks that never arrived.
  Result<std::vector<std::vector<uint8_t>>> allGather(const std::vector<uint8_t>& mine, Deadline deadline);
  /// allGather of nothing.
  Status barrier(Deadline deadline);

  struct Impl;

 private:
  explicit StoreClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::bootstrap
