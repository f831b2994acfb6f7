#include "runtime/bootstrap/interfaces.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ferry::bootstrap {

IfnameFilter IfnameFilter::parse(const std::string& spec) {
  IfnameFilter f;
  f.spec_ = spec.empty() ? "^docker,lo" : spec;
  std::string rest = f.spec_;
  if (!rest.empty() && rest[0] == '^') {
    f.exclude_ = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    f.exact_ = true;
    rest.erase(0, 1);
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(',', start);
    if (end == std::string::npos) end = rest.size();
    std::string name = rest.substr(start, end - start);
    // NCCL allows "eth0:1"-style port suffixes on some lists; a name never contains spaces.
    name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
    if (!name.empty()) f.names_.push_back(name);
    start = end + 1;
  }
  return f;
}

bool IfnameFilter::matches(const std::string& name) const {
  bool listed = false;
  for (const std::string& n : names_) {
    if (exact_ ? name == n : name.compare(0, n.size(), n) == 0) {
      listed = true;
      break;
    }
  }
  return exclude_ ? !listed : listed;
}

Result<std::vector<NetInterface>> listInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return makeError(ErrorCode::kSystemError, "getifaddrs failed: %s", std::strerror(errno));
  std::vector<NetInterface> out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    const int family = i->ifa_addr->sa_family;
    char text[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    } else if (family == AF_INET6) {
      const auto* a6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
      inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text));
    } else {
      continue;
    }
    out.push_back({i->ifa_name, text, family == AF_INET6, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

Result<std::vector<NetInterface>> selectInterfaces(const IfnameFilter& filter, const std::vector<NetInterface>& all,
                                                   int rank, const std::string& host) {
  std::vector<NetInterface> out;
  for (const NetInterface& i : all) {
    if (!filter.matches(i.name)) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const NetInterface& o) { return o.name == i.name; });
    if (same == out.end()) {
      out.push_back(i);
    } else if (same->ipv6 && !i.ipv6) {
      *same = i;  // the IPv4 address represents the interface
    }
  }
  if (out.empty()) {
    const std::string where = rank >= 0 ? "rank " + std::to_string(rank) + " (host " + host + ")" : "host " + host;
    return makeError(ErrorCode::kInvalidArgument,
                     "FERRY_SOCKET_IFNAME='%s' matches no interface that is up with an address on %s; interfaces "
                     "there: %s",
                     filter.spec().c_str(), where.c_str(), all.empty() ? "none" : describeInterfaces(all).c_str());
  }
  return out;
}

std::string describeInterfaces(const std::vector<NetInterface>& list) {
  std::string s;
  for (const NetInterface& i : list) {
    if (!s.empty()) s += ", ";
    s += i.name + " (" + i.address + ")";
  }
  return s;
}

}  // namespace ferry::bootstrap
