// RDMA NIC discovery (transports/nic) against faked verbs: no devices, no kernel support, a device
// that will not open, and two devices with ports in several states on two NUMA nodes. Then the
// sysfs readers against a tree of the test's own, and the real libibverbs of this machine, which
// may have NICs or (usually) none.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "transports/nic/ib_sysfs.hpp"
#include "transports/nic/nic_discovery.hpp"

using namespace ferry;
using namespace ferry::transport::nic;

namespace {

// verbs' encodings, as the fakes report them.
constexpr int kDown = 1, kInit = 2, kActive = 4;
constexpr int kWidth1x = 1, kWidth4x = 2, kWidth12x = 8, kWidth2x = 16;
constexpr int kSdr = 1, kFdr = 16, kEdr = 32, kHdr = 64, kNdr = 128, kXdr = 256;
constexpr int kInfiniBand = 1, kEthernet = 2;

struct FakePort {
  PortAttr attr;
  Gid gid{};
  std::string netdev;
  bool queryFails = false;
};

struct FakeDevice {
  int numaNode = -1;
  bool openFails = false;
  bool countFails = false;
  std::vector<FakePort> ports;
};

class FakeOpened final : public VerbsDevice {
 public:
  explicit FakeOpened(const FakeDevice& d) : d_(d) {}
  Result<int> portCount() override {
    if (d_.countFails) return makeError(ErrorCode::kSystemError, "ibv_query_device failed: Input/output error");
    return static_cast<int>(d_.ports.size());
  }
  Result<PortAttr> queryPort(int port) override {
    const FakePort& p = d_.ports.at(static_cast<size_t>(port - 1));
    if (p.queryFails) return makeError(ErrorCode::kSystemError, "ibv_query_port failed: Invalid argument");
    return p.attr;
  }
  Result<Gid> queryGid(int port, int index) override {
    REQUIRE(index == 0);
    return d_.ports.at(static_cast<size_t>(port - 1)).gid;
  }

 private:
  const FakeDevice& d_;
};

// Devices by name; `order` is the order ibv_get_device_list reports them in.
class FakeVerbs final : public VerbsApi {
 public:
  DeviceList list;
  std::map<std::string, FakeDevice> devices;

  void add(const std::string& name, FakeDevice d) {
    list.names.push_back(name);
    devices[name] = std::move(d);
  }
  DeviceList listDevices() const override { return list; }
  Result<std::unique_ptr<VerbsDevice>> openDevice(const std::string& name) const override {
    const FakeDevice& d = devices.at(name);
    if (d.openFails)
      return makeError(ErrorCode::kSystemError, "ibv_open_device(%s) failed: Permission denied", name.c_str());
    return std::unique_ptr<VerbsDevice>(new FakeOpened(d));
  }
  int numaNode(const std::string& name) const override { return devices.at(name).numaNode; }
  std::string netdev(const std::string& name, int port) const override {
    return devices.at(name).ports.at(static_cast<size_t>(port - 1)).netdev;
  }
};

FakePort port(int state, int width, int speed, int linkLayer, uint8_t gidLast = 0) {
  FakePort p;
  p.attr = PortAttr{state, width, speed, linkLayer};
  if (gidLast != 0) {
    p.gid[0] = 0xfe;
    p.gid[1] = 0x80;
    p.gid[15] = gidLast;
  }
  return p;
}

// mlx5_1 (listed first): NUMA 1, one RoCE port; mlx5_0: NUMA 0, an active HDR port and a down one;
// mlx5_2: will not open.
FakeVerbs twoDevices() {
  FakeVerbs v;
  FakeDevice roce;
  roce.numaNode = 1;
  roce.ports.push_back(port(kActive, kWidth4x, kEdr, kEthernet, 0x21));
  roce.ports[0].netdev = "eth3";
  v.add("mlx5_1", roce);
  FakeDevice ib;
  ib.numaNode = 0;
  ib.ports.push_back(port(kActive, kWidth4x, kHdr, kInfiniBand, 0x01));
  ib.ports.push_back(port(kDown, kWidth1x, kSdr, kInfiniBand, 0x02));
  v.add("mlx5_0", ib);
  FakeDevice broken;
  broken.openFails = true;
  v.add("mlx5_2", broken);
  return v;
}

}  // namespace

TEST_CASE("no devices is an empty inventory, not an error", "[ib]") {
  FakeVerbs v;
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  CHECK(nics->ports.empty());
  CHECK(nics->skipped.empty());
  CHECK(nics->whyNone == "no devices found");
  CHECK(describeNics(*nics) == "RDMA: none (no devices found): TCP between hosts");
  CHECK(ucxNetDevices(nics->ports, 0).empty());
}

TEST_CASE("no kernel support (ENOSYS) is an empty inventory; other listing failures are errors", "[ib]") {
  FakeVerbs v;
  v.list.error = ENOSYS;
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  CHECK(nics->ports.empty());
  CHECK(nics->whyNone == "no kernel RDMA support");
  CHECK(describeNics(*nics) == "RDMA: none (no kernel RDMA support): TCP between hosts");

  v.list.error = ENOMEM;
  auto failed = discoverNics(v);
  REQUIRE_FALSE(failed.isOk());
  CHECK(failed.status().code() == ErrorCode::kSystemError);
  CHECK(failed.status().message() == "ibv_get_device_list failed: Cannot allocate memory");
}

TEST_CASE("a build without libibverbs says so", "[ib]") {
  FakeVerbs v;
  v.list.unavailable = "built without libibverbs";
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  CHECK(describeNics(*nics) == "RDMA: none (built without libibverbs): TCP between hosts");
}

TEST_CASE("two devices: ports decoded and sorted, a device that will not open is skipped", "[ib]") {
  FakeVerbs v = twoDevices();
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  REQUIRE(nics->ports.size() == 3);
  CHECK(nics->whyNone.empty());
  REQUIRE(nics->skipped.size() == 1);
  CHECK(nics->skipped[0] == "mlx5_2: ibv_open_device(mlx5_2) failed: Permission denied");

  const NicPort& hdr = nics->ports[0];
  CHECK(hdr.device == "mlx5_0");
  CHECK(hdr.port == 1);
  CHECK(hdr.state == "ACTIVE");
  CHECK(hdr.active);
  CHECK(hdr.lanes == 4);
  CHECK(hdr.speed == "HDR");
  CHECK(hdr.gbps == 200.0);
  CHECK(hdr.linkLayer == "InfiniBand");
  CHECK(hdr.gid == "fe80::1");
  CHECK(hdr.numaNode == 0);
  CHECK(hdr.netdev.empty());  // only RoCE ports ask for an interface

  const NicPort& down = nics->ports[1];
  CHECK(down.device == "mlx5_0");
  CHECK(down.port == 2);
  CHECK(down.state == "DOWN");
  CHECK_FALSE(down.active);

  const NicPort& roce = nics->ports[2];
  CHECK(roce.device == "mlx5_1");
  CHECK(roce.linkLayer == "Ethernet");
  CHECK(roce.netdev == "eth3");
  CHECK(roce.gbps == 100.0);
  CHECK(roce.numaNode == 1);

  CHECK(describeNics(*nics) ==
        "RDMA: mlx5_0:1 ACTIVE InfiniBand 4x HDR 200 Gb/s NUMA 0 GID fe80::1; "
        "mlx5_0:2 DOWN InfiniBand 1x SDR 2.5 Gb/s NUMA 0 GID fe80::2; "
        "mlx5_1:1 ACTIVE Ethernet eth3 4x EDR 100 Gb/s NUMA 1 GID fe80::21; "
        "skipped mlx5_2: ibv_open_device(mlx5_2) failed: Permission denied");
}

TEST_CASE("ports that cannot be queried are skipped; unknown encodings are kept, not guessed", "[ib]") {
  FakeVerbs v;
  FakeDevice a;
  a.ports.push_back(port(kInit, 3, 9999, 7));  // a width, speed and link layer verbs may add later
  a.ports.push_back(port(kActive, kWidth4x, kNdr, kInfiniBand));
  a.ports[1].queryFails = true;
  v.add("qib0", a);
  FakeDevice b;
  b.countFails = true;
  v.add("qib1", b);
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  REQUIRE(nics->ports.size() == 1);
  const NicPort& p = nics->ports[0];
  CHECK(p.state == "INIT");
  CHECK(p.lanes == 0);
  CHECK(p.speed.empty());
  CHECK(p.gbps == 0.0);
  CHECK(p.linkLayer == "unknown (7)");
  CHECK(p.gid.empty());  // an all-zero GID is an unfilled entry
  CHECK(p.numaNode == -1);
  REQUIRE(nics->skipped.size() == 2);
  CHECK(nics->skipped[0] == "qib0:2: ibv_query_port failed: Invalid argument");
  CHECK(nics->skipped[1] == "qib1: ibv_query_device failed: Input/output error");
  CHECK(describeNics(*nics) ==
        "RDMA: qib0:1 INIT unknown (7) NUMA ?; skipped qib0:2: ibv_query_port failed: Invalid argument; "
        "skipped qib1: ibv_query_device failed: Input/output error: no port is active, TCP between hosts");
  CHECK(ucxNetDevices(nics->ports, 0).empty());

  FakeVerbs none;
  FakeDevice closed;
  closed.openFails = true;
  none.add("mlx4_0", closed);
  auto empty = discoverNics(none);
  REQUIRE(empty.isOk());
  CHECK(describeNics(*empty) ==
        "RDMA: none (no device could be queried; skipped mlx4_0: ibv_open_device(mlx4_0) failed: "
        "Permission denied): TCP between hosts");
}

TEST_CASE("ucxNetDevices takes the nearest active port, then the fastest, deterministically", "[ib]") {
  FakeVerbs v = twoDevices();
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  std::vector<NicPort> ports = nics->ports;
  CHECK(ucxNetDevices(ports, 0) == "mlx5_0:1");
  CHECK(ucxNetDevices(ports, 1) == "mlx5_1:1");   // the slower port, but the near one
  CHECK(ucxNetDevices(ports, 3) == "mlx5_0:1");   // nothing on node 3: the fastest anywhere
  CHECK(ucxNetDevices(ports, -1) == "mlx5_0:1");  // the rank's node unknown: likewise
  std::vector<NicPort> reversed(ports.rbegin(), ports.rend());
  CHECK(ucxNetDevices(reversed, 3) == "mlx5_0:1");  // the input's order does not matter

  ports[0].state = "DOWN";  // node 0's active port goes down: its down ports are never chosen
  ports[0].active = false;
  CHECK(ucxNetDevices(ports, 0) == "mlx5_1:1");
  ports[2].active = false;
  CHECK(ucxNetDevices(ports, 0).empty());
}

TEST_CASE("ranks sharing a NUMA node spread over its equally fast ports", "[ib]") {
  FakeVerbs v;
  for (const char* name : {"mlx5_3", "mlx5_2"}) {
    FakeDevice d;
    d.numaNode = 1;
    d.ports.push_back(port(kActive, kWidth4x, kNdr, kInfiniBand, 1));
    v.add(name, d);
  }
  FakeDevice slow;  // same node, slower: never chosen while the fast ones are up
  slow.numaNode = 1;
  slow.ports.push_back(port(kActive, kWidth1x, kEdr, kEthernet, 1));
  v.add("mlx5_9", slow);
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  CHECK(ucxNetDevices(nics->ports, 1, 0) == "mlx5_2:1");
  CHECK(ucxNetDevices(nics->ports, 1, 1) == "mlx5_3:1");
  CHECK(ucxNetDevices(nics->ports, 1, 2) == "mlx5_2:1");
  CHECK(ucxNetDevices(nics->ports, 1, -4) == "mlx5_2:1");
}

TEST_CASE("verbs encodings decode to names and nominal rates", "[ib]") {
  CHECK(laneCount(kWidth1x) == 1);
  CHECK(laneCount(kWidth2x) == 2);
  CHECK(laneCount(kWidth4x) == 4);
  CHECK(laneCount(4) == 8);
  CHECK(laneCount(kWidth12x) == 12);
  CHECK(laneCount(0) == 0);
  const std::pair<int, double> rates[] = {{kSdr, 2.5}, {2, 5},     {4, 10},     {8, 10},    {kFdr, 14},
                                          {kEdr, 25},  {kHdr, 50}, {kNdr, 100}, {kXdr, 200}};
  for (const auto& [bit, gbps] : rates) CHECK(laneGbps(bit) == gbps);
  CHECK(laneGbps(3) == 0.0);
  CHECK(std::string(speedName(8)) == "FDR10");
  CHECK(std::string(speedName(kXdr)) == "XDR");
  CHECK(speedName(512) == nullptr);
  CHECK(portStateName(0) == "NOP");
  CHECK(portStateName(3) == "ARMED");
  CHECK(portStateName(5) == "ACTIVE_DEFER");
  CHECK(portStateName(17) == "state 17");
  CHECK(linkLayerName(0) == "InfiniBand");  // unspecified: drivers from before RoCE
  CHECK(linkLayerName(kEthernet) == "Ethernet");

  FakeVerbs v;  // rate = lanes x per-lane rate, through discovery
  FakeDevice d;
  d.ports.push_back(port(kActive, kWidth12x, kEdr, kInfiniBand));
  d.ports.push_back(port(kActive, kWidth2x, kNdr, kInfiniBand));
  d.ports.push_back(port(kActive, kWidth4x, kFdr, kInfiniBand));
  v.add("mlx5_0", d);
  auto nics = discoverNics(v);
  REQUIRE(nics.isOk());
  REQUIRE(nics->ports.size() == 3);
  CHECK(nics->ports[0].gbps == 300.0);
  CHECK(nics->ports[1].gbps == 200.0);
  CHECK(nics->ports[2].gbps == 56.0);

  Gid mapped{};  // RoCE v2: an IPv4-mapped GID
  mapped[10] = mapped[11] = 0xff;
  mapped[12] = 10;
  mapped[15] = 7;
  CHECK(formatGid(mapped) == "::ffff:10.0.0.7");
  Gid ib{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0c, 0x42, 0xa1, 0x03, 0x00, 0x6b, 0x5e, 0x10};
  CHECK(formatGid(ib) == "fe80::c42:a103:6b:5e10");
}

TEST_CASE("sysfs: NUMA node and RoCE interface from a faked /sys/class/infiniband", "[ib]") {
  char pattern[] = "/tmp/ferry_ib_sysfs_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const std::filesystem::path root = pattern;
  auto write = [&](const std::filesystem::path& rel, const std::string& text) {
    std::filesystem::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("mlx5_0/device/numa_node", "1\n");
  write("mlx5_0/ports/1/gid_attrs/ndevs/0", "eth2\n");
  write("mlx5_1/device/numa_node", "-1\n");  // no NUMA information
  std::filesystem::create_directories(root / "mlx5_1/device/net/eth5");
  write("mlx5_2/device/numa_node", "garbage\n");
  std::filesystem::create_directories(root / "mlx5_2/device/net/eth6");
  std::filesystem::create_directories(root / "mlx5_2/device/net/eth7");

  const std::string r = root.string();
  CHECK(readNumaNode(r, "mlx5_0") == 1);
  CHECK(readNumaNode(r, "mlx5_1") == -1);
  CHECK(readNumaNode(r, "mlx5_2") == -1);
  CHECK(readNumaNode(r, "absent") == -1);
  CHECK(readNetdev(r, "mlx5_0", 1) == "eth2");
  CHECK(readNetdev(r, "mlx5_1", 1) == "eth5");  // no per-GID entry: the function's only interface
  CHECK(readNetdev(r, "mlx5_2", 1).empty());    // two interfaces: ambiguous
  CHECK(readNetdev(r, "absent", 1).empty());
  std::filesystem::remove_all(root);
}

TEST_CASE("this machine's libibverbs answers without error", "[ib][system]") {
  auto nics = discoverNics();
  REQUIRE(nics.isOk());
  INFO(describeNics(*nics));
  // Most build machines have no RDMA NIC; one that does must report well-formed ports.
  if (nics->ports.empty()) CHECK_FALSE(nics->whyNone.empty());
  for (const NicPort& p : nics->ports) {
    CHECK_FALSE(p.device.empty());
    CHECK(p.port >= 1);
  }
  WARN(describeNics(*nics));
}
