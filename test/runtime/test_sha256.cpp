// SHA-256 against the FIPS 180-4 examples (plus messages of every padding boundary) and
// HMAC-SHA-256 against the RFC 4231 test cases: the rendezvous handshake is only as sound as these.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "runtime/bootstrap/sha256.hpp"

namespace ferry::bootstrap {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string hex(const Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

TEST_CASE("SHA-256 matches the FIPS 180-4 examples", "[sha256]") {
  CHECK(hex(sha256(text("abc"))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256(text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(sha256(Bytes{})) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256(Bytes(1000000, 'a'))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 pads correctly at every block boundary and streams like one call", "[sha256]") {
  const std::vector<std::pair<size_t, std::string>> cases = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
  };
  for (const auto& [n, want] : cases) {
    INFO(n << " bytes of 'a'");
    CHECK(hex(sha256(Bytes(n, 'a'))) == want);
    Sha256 s;
    for (size_t i = 0; i < n; ++i) s.update(Bytes{'a'});
    CHECK(hex(s.finish()) == want);
  }
}

TEST_CASE("HMAC-SHA-256 matches RFC 4231", "[sha256]") {
  CHECK(hex(hmacSha256(Bytes(20, 0x0b), text("Hi There"))) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmacSha256(text("Jefe"), text("what do ya want for nothing?"))) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmacSha256(Bytes(20, 0xaa), Bytes(50, 0xdd))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  Bytes key4;
  for (uint8_t i = 1; i <= 25; ++i) key4.push_back(i);
  CHECK(hex(hmacSha256(key4, Bytes(50, 0xcd))) == "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  CHECK(hex(hmacSha256(Bytes(131, 0xaa), text("Test Using Larger Than Block-Size Key - Hash Key First"))) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex(hmacSha256(Bytes(131, 0xaa),
                       text("This is a test using a larger than block-size key and a larger than block-size data. "
                            "The key needs to be hashed before being used by the HMAC algorithm."))) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("digests compare by value", "[sha256]") {
  Digest a = sha256(text("a"));
  Digest b = a;
  CHECK(digestsEqual(a, b));
  b[31] ^= 1;
  CHECK(!digestsEqual(a, b));
}

}  // namespace
}  // namespace ferry::bootstrap
