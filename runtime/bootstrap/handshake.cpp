// The handshake's proofs (see handshake.hpp).
#include "runtime/bootstrap/handshake.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {
namespace {

// One message layout for both proofs; only the label differs, so neither can stand in for the other.
Digest prove(std::string_view label, const Secret& secret, const Nonce& rootNonce, const Nonce& rankNonce,
             const Claim& claim) {
  std::vector<uint8_t> msg(label.begin(), label.end());
  msg.push_back(0);
  msg.insert(msg.end(), rootNonce.begin(), rootNonce.end());
  msg.insert(msg.end(), rankNonce.begin(), rankNonce.end());
  for (uint32_t v : {wire::kProtocolVersion, claim.rank, claim.size}) {
    for (int shift = 24; shift >= 0; shift -= 8) msg.push_back(static_cast<uint8_t>(v >> shift));
  }
  return hmacSha256(secret.bytes, msg);
}

}  // namespace

Nonce randomNonce() {
  Nonce n;
  Secret a = Secret::random();
  Secret b = Secret::random();
  std::copy(a.bytes.begin(), a.bytes.end(), n.begin());
  std::copy(b.bytes.begin(), b.bytes.end(), n.begin() + static_cast<long>(a.bytes.size()));
  return n;
}

Digest rankProof(const Secret& secret, const Nonce& rootNonce, const Nonce& rankNonce, const Claim& claim) {
  return prove("ferry rank", secret, rootNonce, rankNonce, claim);
}

Digest rootProof(const Secret& secret, const Nonce& rootNonce, const Nonce& rankNonce, const Claim& claim) {
  return prove("ferry root", secret, rootNonce, rankNonce, claim);
}

}  // namespace ferry::bootstrap
