// The rendezvous store's wire format: frame header, message bodies and an incremental frame reader.
//
// Both ends speak it, so it lives apart from the sockets and from the server's logic. Every frame is
// a fixed 12-byte header {u32 magic, u16 type, u16 reserved, u32 payload length} followed by the
// payload; all integers are big-endian. The reader hands the header to a validator before it
// allocates the payload, so a peer that announces 4 GiB costs nothing but a log line.
//
// Messages (client -> server: HELLO, AUTH, GATHER; server -> client: CHALLENGE, OK, ERROR). The
// handshake is HELLO, CHALLENGE, AUTH, OK; its proofs are described in handshake.hpp:
//   HELLO      u32 protocol version  rank nonce[32]                           (exactly 36 bytes)
//   CHALLENGE  u32 protocol version  root nonce[32]                           (exactly 36 bytes)
//   AUTH       u32 rank  u32 size  rank proof[32]                             (exactly 40 bytes)
//   GATHER     u64 round  u32 remaining deadline in ms (kNoDeadline: none)  data   (data <= 1 MiB)
//   OK         reply to AUTH: root proof[32]; reply to GATHER: u64 round u32 count {u32 length, data} x count
//   ERROR      u32 ErrorCode, then a message (UTF-8, no terminator)
// Protocol version 1 sent the secret itself in a 28-byte HELLO {secret[16], rank, size, version};
// the root recognises that shape only to refuse it with a message naming both versions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "runtime/bootstrap/handshake.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap::wire {

inline constexpr uint32_t kMagic = 0x46525259;             ///< "FRRY"
inline constexpr uint32_t kProtocolVersion = 2;            ///< sent in HELLO and CHALLENGE; others refused
inline constexpr size_t kHeaderBytes = 12;                 ///< magic, type, reserved, length
inline constexpr size_t kHelloBytes = 36;                  ///< version, rank nonce
inline constexpr size_t kLegacyHelloBytes = 28;            ///< protocol 1: secret, rank, size, version
inline constexpr size_t kChallengeBytes = 36;              ///< version, root nonce
inline constexpr size_t kAuthBytes = 40;                   ///< rank, size, rank proof
inline constexpr size_t kWelcomeBytes = 32;                ///< root proof
inline constexpr size_t kGatherPrefixBytes = 12;           ///< round + deadline before the data
inline constexpr size_t kMaxContributionBytes = 1u << 20;  ///< per rank and round
inline constexpr size_t kMaxRoundBytes = 256u << 20;       ///< all ranks of one round together
inline constexpr int kMaxWorldSize = 1 << 20;              ///< ranks one root accepts
inline constexpr size_t kMaxErrorBytes = 4096;             ///< ERROR body, code included
inline constexpr uint32_t kNoDeadline = 0xFFFFFFFFu;       ///< GATHER from a rank that waits forever

/// Message types. Anything else on the wire is garbage.
enum class MsgType : uint16_t { kHello = 1, kGather = 2, kOk = 3, kError = 4, kChallenge = 5, kAuth = 6 };

/// "HELLO", or "unknown type 77".
std::string msgTypeName(uint16_t type);

/// The decoded fixed header.
struct FrameHeader {
  uint32_t magic = 0;
  uint16_t type = 0;
  uint16_t reserved = 0;
  uint32_t length = 0;
};

/// One complete frame.
struct Frame {
  MsgType type = MsgType::kError;
  std::vector<uint8_t> payload;
};

/// A frame ready to send: header and payload in one buffer, shareable between connections.
using OutFrame = std::shared_ptr<const std::vector<uint8_t>>;

/// HELLO and CHALLENGE body: the sender's protocol version and its nonce for this connection.
struct Hello {
  uint32_t version = kProtocolVersion;
  Nonce nonce{};
};

/// AUTH body: what the rank claims and its proof of the secret over both nonces and the claim.
struct Auth {
  Claim claim;
  Digest proof{};
};

/// GATHER body.
struct GatherRequest {
  uint64_t round = 0;
  uint32_t deadlineMs = kNoDeadline;
  std::vector<uint8_t> data;
};

/// A HELLO frame (rank to root) or, with kChallenge, the CHALLENGE (root to rank).
OutFrame encodeHello(const Hello& hello, MsgType type = MsgType::kHello);
/// HELLO or CHALLENGE body; fails unless it is kHelloBytes long. A protocol-1 HELLO
/// (kLegacyHelloBytes, another version) decodes to its version field alone, to be refused by number.
Result<Hello> decodeHello(const std::vector<uint8_t>& payload);

/// An AUTH frame.
OutFrame encodeAuth(const Auth& auth);
/// AUTH body; fails unless it is exactly kAuthBytes.
Result<Auth> decodeAuth(const std::vector<uint8_t>& payload);

/// A GATHER frame with the rank's remaining wait in ms (kNoDeadline: none).
OutFrame encodeGather(uint64_t round, uint32_t deadlineMs, const std::vector<uint8_t>& data);
/// Takes the payload apart; fails when it is shorter than the fixed prefix.
Result<GatherRequest> decodeGather(std::vector<uint8_t> payload);

/// The OK that accepts an AUTH, carrying the root's proof.
OutFrame encodeWelcome(const Digest& rootProof);
/// The root's proof from the OK that answers an AUTH; fails unless it is exactly kWelcomeBytes.
Result<Digest> decodeWelcome(const std::vector<uint8_t>& payload);
/// OK for a completed round: every contribution, indexed by rank.
OutFrame encodeGatherReply(uint64_t round, const std::vector<std::vector<uint8_t>>& all);
/// Parse a round's OK and check that it is round `round` with `count` contributions.
Result<std::vector<std::vector<uint8_t>>> decodeGatherReply(const std::vector<uint8_t>& payload, uint64_t round,
                                                            int count);
/// Largest OK payload a world of `size` ranks may legitimately produce.
size_t maxGatherReplyBytes(int size);

/// An ERROR frame carrying the code and (up to kMaxErrorBytes of) the message.
OutFrame encodeError(const Status& status);
/// Rebuild the Status an ERROR carries (a malformed body becomes a kRemoteError saying so).
Status decodeError(const std::vector<uint8_t>& payload);

/// Assembles one frame at a time from a byte stream. The caller receives straight into space(),
/// then commit()s; when the header completes, the magic is checked and then `validator` decides,
/// from the type and length alone, whether the payload may be allocated.
class FrameReader {
 public:
  /// Returns an error (the reason to drop the peer) for a header that must not be accepted.
  using Validator = std::function<Status(const FrameHeader&)>;

  explicit FrameReader(Validator validator) : validator_(std::move(validator)) {}

  /// Where the next received bytes belong; empty once a frame is complete (take() it first).
  std::span<uint8_t> space();
  /// Account for `n` bytes written into space().
  Status commit(size_t n);
  /// A whole frame is ready.
  bool complete() const { return state_ == State::kComplete; }
  /// Some bytes of an unfinished frame have arrived.
  bool started() const { return state_ != State::kComplete && (headerGot_ > 0); }
  /// Bytes of the current frame received so far and expected in all ("5 of 12 header bytes").
  std::string progress() const;
  /// The completed frame; the reader starts over.
  Frame take();

 private:
  enum class State { kHeader, kPayload, kComplete };
  Validator validator_;
  State state_ = State::kHeader;
  uint8_t header_[kHeaderBytes] = {};
  size_t headerGot_ = 0;
  FrameHeader parsed_;
  std::vector<uint8_t> payload_;
  size_t payloadGot_ = 0;
};

}  // namespace ferry::bootstrap::wire
