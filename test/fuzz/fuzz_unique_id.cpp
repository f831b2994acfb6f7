// Fuzzes what a rank parses before it ever talks to the root: the 128-byte unique id (as bytes and
// as the hex text users pass around), FERRY_SECRET's text and "host:port" addresses.
//
// Input: one selector byte, then the value. Addresses are limited to digits, dots, colons and
// brackets (numeric IPv4 and IPv6 forms such as [::1]): a host name would send getaddrinfo() to
// DNS, which is slow and not ferry's code.
#include <algorithm>
#include <cstring>

#include "ferry/comm.hpp"
#include "runtime/bootstrap/store.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;
using namespace ferry::bootstrap;

namespace {

void uniqueIdBytes(const std::vector<uint8_t>& v) {
  uint8_t id[kUniqueIdBytes] = {};
  if (!v.empty()) std::memcpy(id, v.data(), std::min(v.size(), kUniqueIdBytes));
  auto info = decodeUniqueId(id);
  if (!info.isOk()) return;
  // What decodes must encode to the same id, bytes the layout leaves zero aside.
  uint8_t again[kUniqueIdBytes];
  encodeUniqueId(*info, again);
  auto back = decodeUniqueId(again);
  FERRY_FUZZ_CHECK(back.isOk());
  FERRY_FUZZ_CHECK(back->secret == info->secret);
  FERRY_FUZZ_CHECK(back->addr.toString() == info->addr.toString());
  FERRY_FUZZ_CHECK(back->addr.port() == info->addr.port());
}

void uniqueIdText(const std::string& text) {
  auto id = UniqueId::fromHex(text);
  if (!id.isOk()) return;
  FERRY_FUZZ_CHECK(text.size() == 2 * kUniqueIdBytes);
  auto again = UniqueId::fromHex(id->toHex());
  FERRY_FUZZ_CHECK(again.isOk() && std::memcmp(again->bytes, id->bytes, kUniqueIdBytes) == 0);
  uniqueIdBytes(std::vector<uint8_t>(id->bytes, id->bytes + kUniqueIdBytes));
}

void secretText(const std::string& text) {
  Secret a = Secret::fromString(text);
  FERRY_FUZZ_CHECK(a == Secret::fromString(text));
}

bool numericOnly(const std::string& text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == ':' || c == '[' || c == ']')) return false;
  }
  return true;
}

void address(const std::string& text) {
  if (!numericOnly(text)) return;
  auto a = SocketAddress::parse(text);
  if (!a.isOk()) {
    FERRY_FUZZ_CHECK(!a.status().message().empty());
    return;
  }
  // Printed back, an address parses to itself.
  auto again = SocketAddress::parse(a->toString());
  FERRY_FUZZ_CHECK(again.isOk() && again->toString() == a->toString());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t which = in.u8();
  std::vector<uint8_t> rest = in.rest();
  std::string text(rest.begin(), rest.end());
  switch (which % 4) {
    case 0: uniqueIdBytes(rest); break;
    case 1: uniqueIdText(text); break;
    case 2: secretText(text); break;
    default: address(text); break;
  }
  return 0;
}
