// SocketAddress: parsing "host:port" text (from FERRY_ADDR, MASTER_ADDR, a command line) and
// printing addresses back in the same form for log lines and error messages.
//
// Bare IPv6 literals are refused rather than guessed at ("::1:80" could be host "::1" port 80 or the
// address "::1:80" with no port); they must be bracketed as in URLs.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap {
namespace {

Status badAddress(const std::string& text, const char* why) {
  return makeError(ErrorCode::kInvalidArgument,
                   "address '%s' %s; expected host:port or [ipv6]:port with a port from 0 to 65535", text.c_str(), why);
}

// Strict decimal port: digits only, at most 65535.
bool parsePort(const std::string& text, uint16_t* out) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

Result<SocketAddress> SocketAddress::parse(const std::string& hostPort) {
  std::string host;
  std::string portText;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos) return badAddress(hostPort, "opens '[' without a closing ']'");
    if (close + 1 >= hostPort.size() || hostPort[close + 1] != ':') {
      return badAddress(hostPort, "has no ':port' after the bracketed address");
    }
    host = hostPort.substr(1, close - 1);
    portText = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos) return badAddress(hostPort, "has no ':port'");
    host = hostPort.substr(0, colon);
    portText = hostPort.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return badAddress(hostPort, "looks like a bare IPv6 address (write it in brackets, as [::1]:29500)");
    }
  }
  if (host.empty()) return badAddress(hostPort, "has an empty host");
  uint16_t port = 0;
  if (!parsePort(portText, &port)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "address '%s' has port '%s'; expected a decimal number from 0 to 65535", hostPort.c_str(),
                     portText.c_str());
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return makeError(ErrorCode::kInvalidArgument,
                     "cannot resolve host '%s' of address '%s': %s; expected a host name or numeric address",
                     host.c_str(), hostPort.c_str(), rc != 0 ? gai_strerror(rc) : "no addresses");
  }
  SocketAddress addr;
  const addrinfo* pick = found;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) {
      pick = ai;
      break;
    }
  }
  if (pick->ai_addrlen > sizeof(addr.storage) || (pick->ai_family != AF_INET && pick->ai_family != AF_INET6)) {
    freeaddrinfo(found);
    return makeError(ErrorCode::kInvalidArgument, "host '%s' of address '%s' has no IPv4 or IPv6 address", host.c_str(),
                     hostPort.c_str());
  }
  std::memcpy(&addr.storage, pick->ai_addr, pick->ai_addrlen);
  addr.length = static_cast<socklen_t>(pick->ai_addrlen);
  freeaddrinfo(found);
  if (addr.storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr.storage)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&addr.storage)->sin6_port = htons(port);
  }
  return addr;
}

SocketAddress SocketAddress::loopback(uint16_t port) {
  SocketAddress addr;
  auto* in = reinterpret_cast<sockaddr_in*>(&addr.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.length = sizeof(sockaddr_in);
  return addr;
}

uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (storage.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "(no address)";
}

}  // namespace ferry::bootstrap
