// Which ranks share a host (HostLayout) and which interfaces carry traffic between hosts
// (FERRY_SOCKET_IFNAME in NCCL's syntax).
#include <catch2/catch.hpp>

#include "runtime/bootstrap/interfaces.hpp"
#include "runtime/host_layout.hpp"
#include "runtime/net_devices.hpp"
#include "runtime/peer_info.hpp"
#include "runtime/shrink.hpp"

using namespace ferry;
using bootstrap::IfnameFilter;
using bootstrap::NetInterface;

TEST_CASE("FERRY_SOCKET_IFNAME prefixes, exact names and exclusions", "[interfaces]") {
  auto f = IfnameFilter::parse("eth,ib");
  CHECK(f.matches("eth0"));
  CHECK(f.matches("ib1"));
  CHECK_FALSE(f.matches("lo"));
  CHECK_FALSE(f.matches("enp3s0"));
  auto exact = IfnameFilter::parse("=eth0");
  CHECK(exact.matches("eth0"));
  CHECK_FALSE(exact.matches("eth01"));
  auto not_ = IfnameFilter::parse("^docker,lo");
  CHECK(not_.matches("eth0"));
  CHECK_FALSE(not_.matches("docker0"));
  CHECK_FALSE(not_.matches("lo"));
  auto notExact = IfnameFilter::parse("^=eth0");
  CHECK_FALSE(notExact.matches("eth0"));
  CHECK(notExact.matches("eth01"));
  // Empty: NCCL's default, everything but docker* and lo*.
  auto def = IfnameFilter::parse("");
  CHECK(def.spec() == "^docker,lo");
  CHECK(def.matches("eth0"));
  CHECK_FALSE(def.matches("lo"));
}

TEST_CASE("interfaces are selected in order, once each, IPv4 first", "[interfaces]") {
  std::vector<NetInterface> all = {{"lo", "127.0.0.1", false, true},
                                   {"eth0", "fd00::5", true, false},
                                   {"eth0", "10.77.0.1", false, false},
                                   {"docker0", "172.17.0.1", false, false},
                                   {"ib0", "192.168.1.2", false, false}};
  auto chosen = bootstrap::selectInterfaces(IfnameFilter::parse(""), all, 3, "h1");
  REQUIRE(chosen.isOk());
  REQUIRE(chosen->size() == 2);
  CHECK((*chosen)[0].name == "eth0");
  CHECK((*chosen)[0].address == "10.77.0.1");
  CHECK((*chosen)[1].name == "ib0");
  CHECK(bootstrap::describeInterfaces(*chosen) == "eth0 (10.77.0.1), ib0 (192.168.1.2)");
}

TEST_CASE("a filter that matches nothing names the variable, the rank, the host and what is there", "[interfaces]") {
  std::vector<NetInterface> all = {{"lo", "127.0.0.1", false, true}, {"eth0", "10.77.0.1", false, false}};
  auto none = bootstrap::selectInterfaces(IfnameFilter::parse("ib"), all, 2, "h1");
  REQUIRE_FALSE(none.isOk());
  CHECK(none.status().code() == ErrorCode::kInvalidArgument);
  const std::string m = none.status().message();
  CHECK(m.find("FERRY_SOCKET_IFNAME='ib'") != std::string::npos);
  CHECK(m.find("rank 2 (host h1)") != std::string::npos);
  CHECK(m.find("lo (127.0.0.1), eth0 (10.77.0.1)") != std::string::npos);
}

TEST_CASE("this machine lists its interfaces; the loopback is among them", "[interfaces]") {
  auto all = bootstrap::listInterfaces();
  REQUIRE(all.isOk());
  bool loopback = false;
  for (const NetInterface& i : *all) loopback |= i.loopback;
  CHECK(loopback);
}

TEST_CASE("host layouts: hosts by first rank, local indices, cross groups", "[layout]") {
  // Host-major 2 x 2.
  auto l = HostLayout::fromHostIds({"a", "a", "b", "b"});
  CHECK(l.hosts == 2);
  CHECK(l.even());
  CHECK(l.twoLevels());
  CHECK(l.hostOf == std::vector<int>{0, 0, 1, 1});
  CHECK(l.localOf == std::vector<int>{0, 1, 0, 1});
  CHECK(l.crossGroup(0) == std::vector<int>{0, 2});
  CHECK(l.crossGroup(1) == std::vector<int>{1, 3});
  CHECK(l.rankAt(1, 1) == 3);
  CHECK(l.rankAt(1, 2) == -1);
  CHECK(l.describe() == "2 hosts: 0-1 | 2-3");
  // Round-robin placement: ranks alternate hosts.
  auto rr = HostLayout::fromHostIds({"x", "y", "x", "y"});
  CHECK(rr.hostOf == std::vector<int>{0, 1, 0, 1});
  CHECK(rr.localOf == std::vector<int>{0, 0, 1, 1});
  CHECK(rr.crossGroup(1) == std::vector<int>{2, 3});
  CHECK(rr.describe() == "2 hosts: 0,2 | 1,3");
  // Uneven: two ranks on one host, one on the other.
  auto u = HostLayout::fromHostIds({"a", "a", "b"});
  CHECK_FALSE(u.even());
  CHECK(u.twoLevels());
  CHECK(u.maxLocalSize() == 2);
  CHECK(u.crossGroup(0) == std::vector<int>{0, 2});
  CHECK(u.crossGroup(1) == std::vector<int>{1});
  // One rank per host, or one host: nothing to split.
  CHECK_FALSE(HostLayout::fromHostIds({"a", "b", "c"}).twoLevels());
  CHECK_FALSE(HostLayout::fromHostIds({"a", "a"}).twoLevels());
}

namespace {

// 2 hosts x 8 ranks; on each host rank i uses port (i mod ports) of mlx5_0..mlx5_7 (0 ports: none).
std::vector<std::string> railPorts(int portsA, int portsB) {
  std::vector<std::string> p;
  for (int ports : {portsA, portsB}) {
    for (int i = 0; i < 8; ++i) p.push_back(ports == 0 ? "" : "mlx5_" + std::to_string(i % ports) + ":1");
  }
  return p;
}

}  // namespace

TEST_CASE("NICs per host: the distinct RDMA ports of each host's ranks, the fewest over the hosts", "[layout]") {
  std::vector<std::string> ids(8, "a");
  ids.resize(16, "b");
  const auto l = HostLayout::fromHostIds(ids);
  CHECK(l.linksPerHost(railPorts(8, 8)) == 8);
  CHECK(l.linksPerHost(railPorts(4, 4)) == 4);
  CHECK(l.linksPerHost(railPorts(1, 1)) == 1);
  // No RDMA port (TCP, the loopback): one link per host.
  CHECK(l.linksPerHost(railPorts(0, 0)) == 1);
  // A host whose ranks use fewer ports than the other's bounds every step that crosses.
  CHECK(l.linksPerHost(railPorts(8, 4)) == 4);
  CHECK(l.linksPerHost(railPorts(2, 8)) == 2);
  CHECK(l.linksPerHost(railPorts(8, 0)) == 1);
  // A rank may name several ports (UCX stripes over them): each counts once per host.
  std::vector<std::string> both(16, "mlx5_0:1,mlx5_1:1");
  CHECK(l.linksPerHost(both) == 2);
  // Port names are a host's own: the same name on two hosts is two links, one per host.
  CHECK(l.linksPerHost(std::vector<std::string>(16, "mlx5_0:1")) == 1);
  // Uneven hosts, round-robin placement: 3 ranks on x over 3 ports, 2 on y over 2.
  const auto u = HostLayout::fromHostIds({"x", "y", "x", "y", "x"});
  CHECK(u.linksPerHost({"p0:1", "q0:1", "p1:1", "q1:1", "p2:1"}) == 2);
  CHECK(u.linksPerHost({"p0:1", "q0:1", "p1:1", "q0:1", "p2:1"}) == 1);
  // Fewer entries than ranks (none sent): those ranks use no port.
  CHECK(u.linksPerHost({}) == 1);
}

TEST_CASE("the RDMA ports of a UCX NET_DEVICES value, which a rank reports for the count", "[layout]") {
  CHECK(rdmaPortsOf("mlx5_3:1,eth0,ib0") == "mlx5_3:1");
  CHECK(rdmaPortsOf("mlx5_0:1,mlx5_1:2") == "mlx5_0:1,mlx5_1:2");
  CHECK(rdmaPortsOf("lo").empty());
  CHECK(rdmaPortsOf("all").empty());
  CHECK(rdmaPortsOf("").empty());
}

TEST_CASE("a sub-communicator's message in the parent's numbering", "[layout]") {
  const std::vector<int> cross = {1, 3};
  CHECK(renumberRanks("rank 1 (pid 77 on h1) died", cross) == "rank 3 (pid 77 on h1) died");
  CHECK(renumberRanks("collective mismatch: rank 0 runs broadcast as its call #4 while rank 1 runs allReduce", cross) ==
        "collective mismatch: rank 1 runs broadcast as its call #4 while rank 3 runs allReduce");
  CHECK(renumberRanks("rank 1's call #3", cross) == "rank 3's call #3");
  // Numbers beyond the sub-communicator, and other words, stay.
  CHECK(renumberRanks("rank 7 and ranks 0 and frank 1x", cross) == "rank 7 and ranks 0 and frank 1x");
  CHECK(renumberRanks("no ranks here", cross) == "no ranks here");
}

TEST_CASE("a sub-communicator's message ending in its parent's report", "[layout]") {
  const std::vector<int> local = {2, 3};
  // The sub-communicator's wait (ranks 0 and 1 there) wraps what parent rank 1 reported.
  CHECK(renumberBeforeParent("allGather #14 on rank 0, waiting for rank 1: rank 1 failed and reported: the "
                             "connection to rank 3 failed",
                             local) ==
        "allGather #14 on rank 2, waiting for rank 3: rank 1 failed and reported: the connection to rank 3 failed");
  CHECK(renumberBeforeParent("reduceScatter #1 on rank 1, waiting for rank 0: communicator aborted: rank 0 gave up",
                             local) ==
        "reduceScatter #1 on rank 3, waiting for rank 2: communicator aborted: rank 0 gave up");
  // The sub-communicator's own error, although the parent stopped meanwhile: all of it.
  CHECK(renumberBeforeParent("allReduce #2 on rank 1, waiting for rank 0: rank 0 (pid 7 on h1) died", local) ==
        "allReduce #2 on rank 3, waiting for rank 2: rank 2 (pid 7 on h1) died");
}

TEST_CASE("where a rank listens for its peers: the loopback only when it reaches them all", "[interfaces]") {
  PeerInfo a;
  a.bootId = "boot-1";
  a.netNamespace = 7;
  PeerInfo b = a;
  // One kernel, one network namespace, no interface asked for: the loopback.
  auto one = listenAddress({a, b}, "");
  REQUIRE(one.isOk());
  CHECK(one->toString().rfind("127.0.0.1:", 0) == 0);
  // An interface asked for wins even then (as for the rendezvous root): here the loopback's own.
  auto asked = listenAddress({a, b}, "=lo");
  REQUIRE(asked.isOk());
  CHECK(asked->toString().rfind("127.", 0) == 0);
  // Another namespace, or a rank whose kernel is unknown: not the loopback, an interface as
  // FERRY_SOCKET_IFNAME selects; one that matches nothing is an error naming the variable's value.
  b.netNamespace = 8;
  auto none = listenAddress({a, b}, "=no-such-interface0");
  REQUIRE_FALSE(none.isOk());
  CHECK_THAT(none.status().message(), Catch::Contains("no-such-interface0"));
  // With no interface asked for, such ranks get NCCL's default choice, never the loopback (or an
  // error where this machine has no other interface up).
  b = a;
  b.bootId.clear();
  auto other = listenAddress({a, b}, "");
  if (other.isOk()) CHECK(other->toString().rfind("127.", 0) != 0);
}
