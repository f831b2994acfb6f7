// PeerInfo records as another rank sends them: what deserialize() accepts and what it refuses.
//
// Records are built by hand (the layout peer_info.cpp writes: three length-prefixed strings, the
// namespaces, the pid as int64, the communicator id, the CPU set) so a test can put any value in
// any field, as a broken or hostile peer could.
#include <catch2/catch.hpp>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/peer_info.hpp"

namespace ferry {
namespace {

using Bytes = std::vector<uint8_t>;

void put(Bytes& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

Bytes record(int64_t pid) {
  Bytes out;
  for (std::string s : {"host", "host/boot", "boot"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    put(out, &n, 4);
    put(out, s.data(), n);
  }
  uint64_t netNs = 11, pidNs = 12, commId = 13;
  put(out, &netNs, 8);
  put(out, &pidNs, 8);
  put(out, &pid, 8);
  put(out, &commId, 8);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(1, &cpus);
  put(out, &cpus, sizeof(cpus));
  return out;
}

TEST_CASE("a peer record round-trips", "[peer_info]") {
  auto p = PeerInfo::deserialize(record(4242), 1);
  REQUIRE(p.isOk());
  CHECK(p->hostname == "host");
  CHECK(p->hostId == "host/boot");
  CHECK(p->bootId == "boot");
  CHECK(p->pid == 4242);
  CHECK(p->commId == 13);
  CHECK(CPU_ISSET(1, &p->cpus));
  CHECK(p->serialize() == record(4242));
  PeerInfo self = PeerInfo::local();
  auto again = PeerInfo::deserialize(self.serialize(), 0);
  REQUIRE(again.isOk());
  CHECK(again->pid == self.pid);
}

// Found by test/fuzz/fuzz_records: the pid was cast to pid_t unchecked, so 0 or a negative pid
// reached the watchdog's kill(pid, 0) (a process group, or every process) and a pid beyond pid_t's
// range was silently truncated into somebody else's.
TEST_CASE("a peer record with a pid that is no process's is refused, naming the rank", "[peer_info]") {
  for (int64_t pid : {int64_t{0}, int64_t{-1}, int64_t{INT_MIN}, int64_t{INT_MAX} + 1, INT64_MAX}) {
    DYNAMIC_SECTION("pid " << pid) {
      auto p = PeerInfo::deserialize(record(pid), 5);
      REQUIRE_FALSE(p.isOk());
      CHECK(p.status().code() == ErrorCode::kRemoteError);
      CHECK(p.status().message().find("rank 5") != std::string::npos);
      CHECK(p.status().message().find("pid " + std::to_string(pid)) != std::string::npos);
    }
  }
  CHECK(PeerInfo::deserialize(record(INT_MAX), 5).isOk());
}

TEST_CASE("truncated, padded and oversized peer records are refused", "[peer_info]") {
  Bytes good = record(7);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{10}, good.size() - 1}) {
    CHECK_FALSE(PeerInfo::deserialize(Bytes(good.begin(), good.begin() + static_cast<long>(cut)), 2).isOk());
  }
  Bytes padded = good;
  padded.push_back(0);
  CHECK_FALSE(PeerInfo::deserialize(padded, 2).isOk());
  Bytes huge = good;
  huge[0] = 0xFF;  // a hostname length of 255 + ... beyond what is there
  huge[3] = 0x7F;
  CHECK_FALSE(PeerInfo::deserialize(huge, 2).isOk());
}

}  // namespace
}  // namespace ferry
