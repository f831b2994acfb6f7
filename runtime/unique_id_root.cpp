// UniqueId: start a rendezvous root in this process and describe it in 128 bytes.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

#include "ferry/comm.hpp"
#include "runtime/base/config.hpp"
#include "runtime/base/log.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry {
namespace {

// The address of interface `name` (IPv4 preferred), port 0.
Result<bootstrap::SocketAddress> interfaceAddress(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return makeError(ErrorCode::kSystemError, "getifaddrs failed: %s", std::strerror(errno));
  bootstrap::SocketAddress found;
  std::string seen;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (seen.find(std::string(i->ifa_name) + " ") == std::string::npos) seen += std::string(i->ifa_name) + " ";
    if (name != i->ifa_name) continue;
    if (found.length == 0 || (family == AF_INET && found.storage.ss_family != AF_INET)) {
      found.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      std::memcpy(&found.storage, i->ifa_addr, found.length);
    }
  }
  freeifaddrs(list);
  if (found.length == 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_SOCKET_IFNAME=%s matches no interface with an IP address (interfaces: %s)", name.c_str(),
                     seen.c_str());
  }
  if (found.storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&found.storage)->sin_port = 0;
  } else {
    reinterpret_cast<sockaddr_in6*>(&found.storage)->sin6_port = 0;
  }
  return found;
}

}  // namespace

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
