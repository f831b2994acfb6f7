// One connection's side of the root's protocol, free of sockets.
//
// The root's poll loop owns the socket and the send queue; a ServerSession owns what the bytes
// mean: it assembles frames, decides from each header alone whether the client may send it (a
// stranger may only say HELLO and then AUTH, a registered rank only GATHER, nobody more than the
// limits in wire.hpp), runs the handshake (handshake.hpp: a fresh root nonce per connection, the
// rank's proof checked, the root's proof returned) and hands authenticated claims and GATHERs to
// RootState. The loop receives straight into space() and reports the count to received(); the
// store-server fuzzer (test/fuzz) feeds bytes the same way, so what it finds is what a hostile
// peer on the port would find.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ferry/status.hpp"
#include "runtime/bootstrap/root_state.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {

class ServerSession {
 public:
  /// Connection `id` (RootState's key for replies) from `peer` ("127.0.0.1:41234", for messages).
  ServerSession(uint64_t id, std::string peer);
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  uint64_t id() const { return id_; }
  /// The rank it registered as, -1 before (or when refused).
  int rank() const { return rank_; }
  /// It proved the job secret (it is registered, or parked until rank 0 sets the world size).
  bool authenticated() const { return stage_ == Stage::kAuthenticated; }
  /// RootState registered it as `rank`.
  void admit(int rank) { rank_ = rank; }
  /// RootState refused it.
  void markRefused() { refused_ = true; }
  /// "127.0.0.1:41234", or "127.0.0.1:41234 (rank 2)" once registered.
  std::string who() const;
  /// It was refused: the ERROR is queued and nothing more is read from it.
  bool refused() const { return refused_; }
  /// Some bytes of an unfinished frame have arrived.
  bool midFrame() const { return reader_.started(); }
  /// "5 of 12 header bytes", for the messages that drop a stalled connection.
  std::string progress() const { return reader_.progress(); }

  /// Where the next received bytes belong (never empty while the session reads).
  std::span<uint8_t> space() { return reader_.space(); }
  /// Account for `n` bytes written into space(); a frame they complete goes to `state`. Returns
  /// the reason to drop the connection when the bytes break the protocol. `jobActivity` is set
  /// when a registered rank's request (or a successful registration) was handled.
  Status received(size_t n, RootState& state, bool* jobActivity);

 private:
  // Where the handshake stands: HELLO expected, AUTH expected, done.
  enum class Stage : uint8_t { kHello, kAuth, kAuthenticated };

  Status validate(const wire::FrameHeader& h) const;
  Status dispatch(wire::Frame frame, RootState& state, bool* jobActivity);
  void onHello(const std::vector<uint8_t>& payload, RootState& state);
  void onAuth(const std::vector<uint8_t>& payload, RootState& state, bool* jobActivity);

  uint64_t id_;
  std::string peer_;
  Stage stage_ = Stage::kHello;
  Nonce rankNonce_{};
  Nonce rootNonce_{};
  int rank_ = -1;
  bool refused_ = false;
  wire::FrameReader reader_;
};

}  // namespace ferry::bootstrap
