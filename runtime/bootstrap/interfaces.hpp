// Network interfaces: which ones carry traffic between hosts, chosen the way NCCL_SOCKET_IFNAME
// chooses them.
//
// The filter syntax is NCCL's: a comma-separated list of name prefixes ("eth,ib" matches eth0 and
// ib1); a leading '=' makes every entry an exact name ("=eth0" matches eth0, not eth01); a leading
// '^' turns the list into exclusions ("^docker,lo": everything but docker* and lo*); "^=" excludes
// exact names. An empty filter means the default, "^docker,lo": NCCL's, since the loopback reaches
// no other host and a container bridge reaches none of its peers.
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::bootstrap {

/// One address of one interface that is up.
struct NetInterface {
  std::string name;     ///< "eth0"
  std::string address;  ///< "10.77.0.1" or "fe80::1"
  bool ipv6 = false;
  bool loopback = false;
};

/// A parsed FERRY_SOCKET_IFNAME value.
class IfnameFilter {
 public:
  /// Parses `spec` (see above); empty: the default "^docker,lo".
  static IfnameFilter parse(const std::string& spec);
  bool matches(const std::string& name) const;
  /// The value it came from, for messages ("^docker,lo" for the default).
  const std::string& spec() const { return spec_; }

 private:
  std::string spec_;
  std::vector<std::string> names_;
  bool exclude_ = false;
  bool exact_ = false;
};

/// Every interface that is up and has an IPv4 or IPv6 address (IPv6 link-local addresses are left
/// out: they need a scope to be reached), in the kernel's order.
Result<std::vector<NetInterface>> listInterfaces();

/// The interfaces of `all` that `filter` keeps, each name once, in order; IPv4 before IPv6 for an
/// interface with both. Fails with a message naming FERRY_SOCKET_IFNAME's value, the rank (none
/// when negative), the host and every interface there when nothing matches.
Result<std::vector<NetInterface>> selectInterfaces(const IfnameFilter& filter, const std::vector<NetInterface>& all,
                                                   int rank, const std::string& host);

/// "lo (127.0.0.1), eth0 (10.77.0.1)": for logs and errors.
std::string describeInterfaces(const std::vector<NetInterface>& list);

}  // namespace ferry::bootstrap
