// The transport-neutral interface the collectives are written against.
//
// A transport moves bytes between ranks of one communicator: tagged, non-blocking sends and
// receives of host memory, matched in order per (sender, tag) like MPI's non-overtaking rule. It
// knows nothing of collectives. The 40-bit tag is the caller's; the transport adds the source rank
// itself, so a receive names the peer it expects and never matches another sender's message.
//
// Vocabulary: a Request is one posted send or receive; it is owned by the caller, must stay at a
// fixed address until it leaves kPending, and is completed by progress(). A failed peer (its
// process died, its connection broke) is reported by peerError() and fails its requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::transport {

/// Bits of the caller's tag (the rest of the wire tag holds the source rank).
inline constexpr int kTagBits = 40;
inline constexpr uint64_t kTagMask = (uint64_t{1} << kTagBits) - 1;

/// postRecv's peer for a receive that matches any sender.
inline constexpr int kAnyPeer = -1;

/// One posted send or receive.
struct Request {
  enum class State : uint8_t { kIdle, kPending, kDone, kFailed };
  State state = State::kIdle;
  bool isSend = false;
  int peer = -1;
  size_t bytes = 0;        ///< bytes posted
  size_t received = 0;     ///< receives: bytes that arrived
  uint64_t tag = 0;        ///< tag posted (caller's 40 bits)
  uint64_t peerTag = 0;    ///< receives: the tag the sender used (caller's 40 bits)
  int source = -1;         ///< receives: the rank that sent the message
  std::string error;       ///< kFailed: what the transport reported
  void* handle = nullptr;  ///< the transport's own request, while pending
  uintptr_t cookie = 0;    ///< the caller's; the transport never touches it

  bool pending() const { return state == State::kPending; }
  /// Reset every transport-owned field for a new posted operation (the cookie stays).
  void start(bool send, int toPeer, uint64_t postedTag, size_t postedBytes) {
    state = State::kPending;
    isSend = send;
    peer = toPeer;
    tag = postedTag;
    bytes = postedBytes;
    received = 0;
    peerTag = 0;
    source = -1;
    error.clear();
    handle = nullptr;
  }
};

/// Static facts about a transport, so collectives choose by capability, never by name.
struct Capabilities {
  bool zeroCopy = false;      ///< large messages move without intermediate copies
  bool deviceMemory = false;  ///< can send from and receive into GPU memory
  bool detectsPeerDeath = false;
  /// Sends of any size complete once the transport has taken their bytes (written to the kernel,
  /// the receiving side keeping what arrives before its receive), not when the peer receives them:
  /// an eager protocol with no rendezvous (tcp). Otherwise only small sends complete that way.
  bool buffersSends = false;
};

/// A connected set of ranks.
class Transport {
 public:
  virtual ~Transport() = default;

  /// "ucx", for logs.
  virtual const char* name() const = 0;
  virtual Capabilities capabilities() const = 0;
  /// Bytes other ranks need to connect to this one (exchanged through the bootstrap).
  virtual std::vector<uint8_t> localAddress() const = 0;
  /// Connect to every rank; addrs[r] is rank r's localAddress() (the own entry is ignored).
  virtual Status connect(const std::vector<std::vector<uint8_t>>& addrs) = 0;

  /// Post a send of `bytes` at `buf` to `peer` with `tag` (≤ kTagMask). `req` must be idle.
  virtual Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) = 0;
  /// Post a receive from `peer` (kAnyPeer: from any rank) of a message whose tag matches `tag` on
  /// the bits set in `mask`.
  virtual Status postRecv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t bytes, Request* req) = 0;
  /// Cancel a pending request; it ends kFailed (or kDone if it completed meanwhile) after progress().
  /// A receive ends at once unless its message is already arriving. A send may be beyond recall
  /// (UCX cannot withdraw a tag send): it then stays pending until its peer receives it, and ends
  /// kDone with the bytes its buffer held while pending; a send that ends kFailed is never
  /// delivered, and no transport reads its buffer afterwards. close() ends every send.
  virtual void cancel(Request* req) = 0;
  /// Advance every posted operation; returns true when something happened.
  virtual bool progress() = 0;

  /// Block for at most `ns` nanoseconds until progress() may have something to do (bytes arrived,
  /// room to send). Returns false at once when the transport cannot wait that way (the caller then
  /// sleeps instead); true after waiting, whether or not something happened.
  virtual bool waitForWork(long ns) {
    (void)ns;
    return false;
  }

  /// Ok while `peer` is reachable; the failure the transport saw otherwise. Once it is not ok,
  /// every request naming `peer` fails (after progress()), and so does every later one, except a
  /// receive of a message that had arrived whole before the failure (a peer that sent its last
  /// message and closed or died right after did send it).
  virtual Status peerError(int peer) const = 0;

  /// Every rank has connected (the runtime's init barrier passed): release what only setup needed,
  /// such as the descriptors peers opened shared segments by.
  virtual void sealed() {}

  /// Close every connection, waiting at most `seconds` (about that: a transport may take a little
  /// longer rather than leave its library in a state it cannot tear down). Flushes sends first
  /// unless `force`. Either way, when close() returns no request is pending any more: what did not
  /// complete (every receive, and the sends a forced or timed-out flush left) ended kFailed, and
  /// no transport touches those buffers afterwards, with one exception close() logs: a peer
  /// that reads large messages straight from the sender's memory (shm; UCX between same-host
  /// endpoints) and has neither taken nor refused one within the limit may still read it. Posting after close() is
  /// refused, progress() touches no peer, and a second close() does nothing.
  virtual void close(double seconds, bool force) = 0;
};

}  // namespace ferry::transport
