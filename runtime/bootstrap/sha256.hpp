// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the rendezvous handshake's proofs.
//
// The rendezvous needs exactly one keyed hash and nothing else from a crypto library, so it has
// its own small one instead of a dependency. It is checked against the FIPS 180-4 examples and the
// RFC 4231 vectors (test/runtime/test_sha256.cpp). Inputs are short and rare (one handshake per
// rank), so the implementation is written for clarity, not speed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::bootstrap {

/// A SHA-256 digest (and an HMAC-SHA-256 tag).
using Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  /// Append `data` to the message.
  void update(std::span<const uint8_t> data);
  /// Pad, process the last block and return the digest; the object is spent afterwards.
  Digest finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t bits_ = 0;
};

/// SHA-256 of `data`.
Digest sha256(std::span<const uint8_t> data);

/// HMAC-SHA-256 of `data` under `key` (keys longer than 64 bytes are hashed first, per RFC 2104).
Digest hmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> data);

/// Compare two digests in time independent of where they differ.
bool digestsEqual(const Digest& a, const Digest& b);

}  // namespace ferry::bootstrap
