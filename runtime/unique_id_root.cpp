// UniqueId: start a rendezvous root in this process and describe it in 128 bytes.
#include <unistd.h>

#include <cstring>

#include "ferry/comm.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/bootstrap/interfaces.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/peer_info.hpp"
#include "runtime/shrink.hpp"

namespace ferry {

Result<bootstrap::SocketAddress> interfaceAddress(const std::string& spec) {
  auto all = bootstrap::listInterfaces();
  FERRY_TRY(all);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto chosen = bootstrap::selectInterfaces(bootstrap::IfnameFilter::parse(spec), *all, -1, host);
  FERRY_TRY(chosen);
  const bootstrap::NetInterface& i = chosen->front();
  return bootstrap::SocketAddress::parse(i.ipv6 ? "[" + i.address + "]:0" : i.address + ":0");
}

Result<bootstrap::SocketAddress> listenAddress(const std::vector<PeerInfo>& peers, const std::string& spec) {
  if (spec.empty() && loopbackReachesAll(peers)) return bootstrap::SocketAddress::loopback(0);
  return interfaceAddress(spec);
}

Result<UniqueId> UniqueId::create() {
  FERRY_TRY(configStatus());
  bootstrap::SocketAddress bind = bootstrap::SocketAddress::loopback(0);
  if (!config().socketIfname.empty()) {
    auto a = interfaceAddress(config().socketIfname);
    FERRY_TRY(a);
    bind = *a;
  }
  bootstrap::RootInfo info;
  info.secret = bootstrap::Secret::random();
  auto server = bootstrap::StoreServer::start(bind, info.secret);
  FERRY_TRY(server);
  info.addr = (*server)->address();
  FERRY_INFO(log::kBootstrap, "rendezvous root listening on %s", info.addr.toString().c_str());
  bootstrap::StoreServer::detach(std::move(*server));
  UniqueId id;
  bootstrap::encodeUniqueId(info, id.bytes);
  return id;
}

std::string UniqueId::toHex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

Result<UniqueId> UniqueId::fromHex(const std::string& hex) {
  if (hex.size() != 2 * sizeof(UniqueId::bytes)) {
    return makeError(ErrorCode::kInvalidArgument, "unique id text has %zu characters, expected %zu hex digits",
                     hex.size(), 2 * sizeof(UniqueId::bytes));
  }
  UniqueId id;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < sizeof(id.bytes); ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return makeError(ErrorCode::kInvalidArgument, "unique id text has a non-hex character at position %zu",
                       hi < 0 ? 2 * i : 2 * i + 1);
    }
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

}  // namespace ferry
