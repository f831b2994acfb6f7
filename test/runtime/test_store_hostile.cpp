// A live rendezvous under attack: while honest ranks run round after round of allGather, strangers
// send garbage, a protocol-1 HELLO (an older ferry's, which carried the secret itself), a frame
// announcing 4 GiB, and a truncated frame to the root's port. Every honest round must complete
// with exact data, every stranger must be disconnected, and the root must log each one at WARN
// with its address and what it did wrong.
//
// The log goes to a file (FERRY_DEBUG_FILE, set before ferry first reads its configuration, as is
// FERRY_TIMEOUT, which bounds how long the root tolerates a half-sent frame) so the test can read
// the lines back; each stranger is found in it by its own source port.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"
#include "test/runtime/raw_frames.hpp"

static const std::string gLogPath = "/tmp/ferry-store-hostile-" + std::to_string(::getpid()) + ".log";
// Runs during static initialisation, before any test reads the configuration (parsed once, lazily).
static const bool gLogToFile = (::setenv("FERRY_DEBUG_FILE", gLogPath.c_str(), 1), ::setenv("FERRY_DEBUG", "WARN", 1),
                                ::setenv("FERRY_TIMEOUT", "2", 1), true);

namespace ferry::bootstrap {
namespace {

using Bytes = std::vector<uint8_t>;

const Secret kSecret = Secret::fromString("hostile-test-secret");
constexpr int kRanks = 3;
constexpr int kRounds = 40;

Bytes contribution(int rank, int round) {
  Bytes b(static_cast<size_t>((rank * 5 + round) % 17));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 13 + round * 7 + static_cast<int>(i));
  return b;
}

// kRounds allGathers, a few ms apart so that the strangers arrive mid-job; "" on success.
std::string honestRank(const SocketAddress& root, int rank) {
  auto client = StoreClient::connect(root, kSecret, rank, kRanks, Deadline::after(5.0));
  if (!client.isOk()) return client.status().toString();
  for (int round = 0; round < kRounds; ++round) {
    auto all = (*client)->allGather(contribution(rank, round), Deadline::after(5.0));
    if (!all.isOk()) return all.status().toString();
    for (int r = 0; r < kRanks; ++r) {
      if ((*all)[static_cast<size_t>(r)] != contribution(r, round)) {
        return "rank " + std::to_string(r) + "'s data differs in round " + std::to_string(round);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

Bytes header(uint32_t magic, uint16_t type, uint32_t length) { return test::rawFrameHeader(magic, type, length); }

// One stranger: a raw socket, the bytes it sends, and whether it closes its side afterwards.
struct Stranger {
  const char* what;
  Bytes bytes;
  bool closeWrite;
  const char* logged;  // what the root's WARN line must say about it
  int fd = -1;
  uint16_t port = 0;  // its source port, as the root names it

  void connectTo(const SocketAddress& root) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&root.storage), root.length) == 0);
    SocketAddress self;
    self.length = sizeof(self.storage);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&self.storage), &self.length);
    port = self.port();
  }
  void attack() const {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    if (closeWrite) ::shutdown(fd, SHUT_WR);
  }
  // True once the root has closed the connection (anything it sent first is skipped).
  bool droppedWithin(double seconds) const {
    Deadline d = Deadline::after(seconds);
    uint8_t buf[4096];
    while (!d.expired()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, d.remainingMs()) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }
};

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The log line that names the connection from `port`, or "".
std::string lineFor(const std::string& log, uint16_t port) {
  const std::string who = "127.0.0.1:" + std::to_string(port);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(who);
    // The port must end there: 127.0.0.1:4123 is not 127.0.0.1:41234.
    if (at != std::string::npos && (at + who.size() == line.size() || !std::isdigit(line[at + who.size()]))) {
      return line;
    }
  }
  return "";
}

TEST_CASE("strangers on a live rendezvous are logged at WARN and dropped; honest ranks finish", "[store]") {
  auto server = StoreServer::start(SocketAddress::loopback(0), kSecret);
  REQUIRE(server.isOk());
  const SocketAddress root = (*server)->address();

  // A protocol-1 HELLO, which carried the secret itself: refused by its version number.
  Bytes legacy = header(wire::kMagic, 1, wire::kLegacyHelloBytes);
  legacy.resize(legacy.size() + wire::kLegacyHelloBytes - 4, 0x33);  // secret, rank, size
  legacy.insert(legacy.end(), {0, 0, 0, 1});                         // version 1
  Bytes truncated = header(wire::kMagic, 1, wire::kHelloBytes);
  truncated.resize(truncated.size() + 9, 0x5A);  // 9 of the 28 announced bytes, then the stranger leaves
  Bytes garbage;
  for (int i = 0; i < 64; ++i) garbage.push_back(static_cast<uint8_t>(i * 37 + 11));
  std::vector<Stranger> strangers = {
      {"garbage", garbage, false, "WARN BOOTSTRAP: dropping connection from", 0, 0},
      {"protocol 1", legacy, false, "WARN BOOTSTRAP: refusing connection from", 0, 0},
      {"oversized length", header(wire::kMagic, 1, 0xFFFFFFFFu), false, "WARN BOOTSTRAP: dropping connection from", 0,
       0},
      {"truncated frame", truncated, true, "WARN BOOTSTRAP: dropping connection from", 0, 0},
  };

  std::vector<std::string> reports(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] { reports[static_cast<size_t>(r)] = honestRank(root, r); });
  }
  // Mid-job: the ranks are registered and gathering while the strangers arrive one by one.
  for (Stranger& s : strangers) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.connectTo(root);
    s.attack();
  }
  for (auto& t : ranks) t.join();
  CHECK(reports == std::vector<std::string>(kRanks, ""));

  for (const Stranger& s : strangers) {
    INFO(s.what);
    CHECK(s.droppedWithin(3.0));
  }
  const std::string log = readFile(gLogPath);
  for (const Stranger& s : strangers) {
    INFO(s.what << " from port " << s.port << "; the log:\n" << log);
    const std::string line = lineFor(log, s.port);
    CHECK(line.find(s.logged) != std::string::npos);
  }
  CHECK(lineFor(log, strangers[0].port).find("bad frame magic") != std::string::npos);
  CHECK(lineFor(log, strangers[1].port).find("protocol version 1 is not supported (expected 2)") != std::string::npos);
  CHECK(lineFor(log, strangers[2].port).find("HELLO frame announces 4294967295 bytes") != std::string::npos);
  CHECK(lineFor(log, strangers[3].port).find("closed the connection mid-frame (9 of 36 payload bytes)") !=
        std::string::npos);
  for (Stranger& s : strangers) ::close(s.fd);
  ::unlink(gLogPath.c_str());
}

}  // namespace
}  // namespace ferry::bootstrap
