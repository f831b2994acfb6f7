// The rendezvous handshake's proofs: how a rank and the root show each other that they hold the
// job secret without sending it.
//
// Each side contributes a fresh random nonce (the rank in its HELLO, the root in its CHALLENGE). The
// rank then proves itself with HMAC-SHA-256 under the secret over both nonces and the claim it
// makes (rank, world size); the root answers with its own proof over the same values under a
// different label. So:
//   - nothing on the wire is a function of the secret alone, and a recorded exchange is worthless
//     against any later connection, whose root nonce differs (replay);
//   - changing the rank or the world size on the way breaks the rank's proof (tampering);
//   - a squatter on the root's address gets a proof bound to its own nonce, which reveals nothing
//     about the secret, and cannot produce the root's proof, so the rank sends it no data;
//   - a rank's proof can never pass as the root's (or the reverse): the labels differ.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/bootstrap/sha256.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap {

/// 256 random bits chosen for one connection by one side.
using Nonce = std::array<uint8_t, 32>;

/// A fresh nonce from the system's random source.
Nonce randomNonce();

/// What a rank claims in its AUTH, bound into both proofs.
struct Claim {
  uint32_t rank = 0;
  uint32_t size = 0;
};

/// The rank's proof: HMAC(secret, "ferry rank" || rootNonce || rankNonce || version || rank || size).
Digest rankProof(const Secret& secret, const Nonce& rootNonce, const Nonce& rankNonce, const Claim& claim);

/// The root's proof, over the same values under the label "ferry root".
Digest rootProof(const Secret& secret, const Nonce& rootNonce, const Nonce& rankNonce, const Claim& claim);

}  // namespace ferry::bootstrap
