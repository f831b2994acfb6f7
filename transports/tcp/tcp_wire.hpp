// What the TCP transport writes on its sockets, and how a message is split over a peer's streams.
//
// Vocabulary: a pair of ranks is joined by S streams (TCP connections). A message is a header
// on stream 0 followed by its pieces: piece 0 right behind the header on stream 0, piece i > 0 on
// stream i behind a piece header. Every stream is FIFO and the sender queues every message's
// frames on every stream in message order, so the receiver knows which message the next piece on
// a stream belongs to: the oldest one that still owes that stream a piece. The split depends only
// on the message size and S, so both sides compute it from the header alone (pieceOf below); the
// piece header repeats offset and length only to catch a stream that fell out of step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ferry::transport::tcp {

/// First word of a connection: the hello that says whose stream it is.
inline constexpr uint32_t kHelloMagic = 0x46545031;  // "FTP1"

/// Sent once by the connecting side of every stream.
struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t rank = 0;     ///< the connecting rank
  uint32_t stream = 0;   ///< which of the pair's streams this is
  uint32_t streams = 0;  ///< how many streams the connecting side counts for the pair
  uint64_t commId = 0;
  uint64_t nonce = 0;  ///< the accepting rank's nonce, read from its published address
};
static_assert(sizeof(Hello) == 32);

/// A message header on stream 0. A header whose tag has kGoodbye set carries no message: the
/// sender closed its transport in order (so the end of its streams is no failure to explain).
struct MsgHeader {
  uint64_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(MsgHeader) == 16);
inline constexpr uint64_t kGoodbye = uint64_t{1} << 63;

/// In front of every piece on streams 1..S-1.
struct PieceHeader {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(PieceHeader) == 16);

/// Messages below this size travel whole on stream 0 (a split would cost more than it moves).
inline constexpr size_t kSplitMinBytes = 256 * 1024;
/// No piece is smaller than this (nor unaligned to it, but for the last).
inline constexpr size_t kPieceAlign = 64 * 1024;
/// Streams per pair at most.
inline constexpr int kMaxStreams = 16;

/// How a message is split: pieces of `each` bytes (the last one shorter), `count` of them.
struct Split {
  size_t each = 0;
  int count = 1;
};

/// The split of a message of `bytes` over `streams` streams: piece i travels on stream i. Pieces
/// are equal, kPieceAlign-aligned and never empty, so a split may use fewer streams than it has.
inline Split splitOf(size_t bytes, int streams) {
  if (bytes < kSplitMinBytes || streams <= 1) return {bytes, 1};
  size_t s = static_cast<size_t>(streams);
  size_t each = ((bytes + s - 1) / s + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  return {each, static_cast<int>((bytes + each - 1) / each)};
}

struct Piece {
  size_t offset = 0;
  size_t bytes = 0;
};

/// Piece `i` (< split.count) of a message of `bytes`.
inline Piece pieceOf(size_t bytes, const Split& split, int i) {
  size_t begin = split.each * static_cast<size_t>(i);
  return {begin, std::min(bytes - begin, split.each)};
}

}  // namespace ferry::transport::tcp
