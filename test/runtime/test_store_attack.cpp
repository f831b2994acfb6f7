// The rendezvous against an attacker on the network: a flood of idle connections, a recorded
// handshake replayed into a later job that uses the same secret, a rank field rewritten in flight,
// a squatter listening where the ranks expect the root, and an insider announcing another world
// size. In every case the honest job must finish and the attacker must get nothing: no
// registration, no secret bytes, no way to make rank 0 itself be refused.
//
// The attacks go through real sockets on 127.0.0.1 with the ranks as threads. The flood runs in a
// forked child so that its thousand sockets do not count against the descriptors of the process
// that hosts the root, which runs under the common soft limit of 1024 descriptors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"
#include "test/common/rank_threads.hpp"
#include "test/runtime/raw_frames.hpp"

// Runs during static initialisation, before any test reads the configuration (parsed once, lazily).
static const bool gShortTimeout = (::setenv("FERRY_TIMEOUT", "3", 1), true);

namespace ferry::bootstrap {
namespace {

using Bytes = std::vector<uint8_t>;

const std::string kSecretText = "attack-test-secret";
const Secret kSecret = Secret::fromString(kSecretText);

Bytes contribution(int rank, int round) {
  Bytes b(static_cast<size_t>((rank * 5 + round * 3) % 19));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 29 + round * 11 + static_cast<int>(i));
  return b;
}

// Connects as `rank` of `size` and runs `rounds` allGathers, every byte checked; "" on success.
std::string honestRank(const SocketAddress& root, int rank, int size, int rounds,
                       std::unique_ptr<StoreClient> client = nullptr) {
  if (!client) {
    auto c = StoreClient::connect(root, kSecret, rank, size, Deadline::after(3.0));
    if (!c.isOk()) return c.status().toString();
    client = std::move(c.value());
  }
  for (int round = 0; round < rounds; ++round) {
    auto all = client->allGather(contribution(rank, round), Deadline::after(3.0));
    if (!all.isOk()) return all.status().toString();
    if (all->size() != static_cast<size_t>(size)) return "wrong number of contributions";
    for (int r = 0; r < size; ++r) {
      if ((*all)[static_cast<size_t>(r)] != contribution(r, round)) {
        return "rank " + std::to_string(r) + "'s data differs in round " + std::to_string(round);
      }
    }
  }
  return "";
}

std::vector<std::string> runRanks(int size, const std::function<std::string(int)>& body) {
  return ferry::test::onRankThreads<std::string>(size, body);
}

std::unique_ptr<StoreServer> startServer() {
  auto server = StoreServer::start(SocketAddress::loopback(0), kSecret);
  REQUIRE(server.isOk());
  return std::move(server.value());
}

// A listening socket on 127.0.0.1 with a free port.
int listenLoopback(SocketAddress* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SocketAddress a = SocketAddress::loopback(0);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a.storage), a.length) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  bound->length = sizeof(bound->storage);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound->storage), &bound->length);
  return fd;
}

int connectTo(const SocketAddress& to) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads frames until an OK or ERROR arrives; "OK", the ERROR's message, or what went wrong.
std::string readVerdict(int fd, double seconds) {
  Deadline d = Deadline::after(seconds);
  for (;;) {
    wire::FrameReader reader([](const wire::FrameHeader&) { return Status::ok(); });
    while (!reader.complete()) {
      pollfd p{fd, POLLIN, 0};
      if (d.expired()) return "(no reply)";
      if (::poll(&p, 1, d.remainingMs()) <= 0) continue;
      auto space = reader.space();
      ssize_t n = ::recv(fd, space.data(), space.size(), 0);
      if (n <= 0) return "(closed)";
      if (!reader.commit(static_cast<size_t>(n)).isOk()) return "(bad frame)";
    }
    wire::Frame f = reader.take();
    if (f.type == wire::MsgType::kOk) return "OK";
    if (f.type == wire::MsgType::kError) return wire::decodeError(f.payload).message();
  }
}

// Sits between one rank and the root: forwards both ways, records what the rank sends and may
// rewrite it on the way (the attacker on the path).
class Proxy {
 public:
  Proxy(const SocketAddress& root, std::function<void(Bytes&)> rewrite = nullptr)
      : root_(root), rewrite_(std::move(rewrite)) {
    listen_ = listenLoopback(&address_);
    thread_ = std::thread([this] { run(); });
  }
  ~Proxy() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  const SocketAddress& address() const { return address_; }
  Bytes sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 private:
  void run() {
    pollfd lp{listen_, POLLIN, 0};
    while (!stop_ && ::poll(&lp, 1, 20) <= 0) {
    }
    if (stop_) return;
    int rank = ::accept(listen_, nullptr, nullptr);
    int root = connectTo(root_);
    uint8_t buf[65536];
    while (!stop_ && rank >= 0 && root >= 0) {
      pollfd p[2] = {{rank, POLLIN, 0}, {root, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      if (p[0].revents != 0) {
        ssize_t n = ::recv(rank, buf, sizeof(buf), 0);
        if (n <= 0) break;
        Bytes chunk(buf, buf + n);
        if (rewrite_) rewrite_(chunk);
        {
          std::lock_guard<std::mutex> lock(mu_);
          sent_.insert(sent_.end(), chunk.begin(), chunk.end());
        }
        if (::send(root, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0) break;
      }
      if (p[1].revents != 0) {
        ssize_t n = ::recv(root, buf, sizeof(buf), 0);
        if (n <= 0) break;
        if (::send(rank, buf, static_cast<size_t>(n), MSG_NOSIGNAL) < 0) break;
      }
    }
    if (rank >= 0) ::close(rank);
    if (root >= 0) ::close(root);
  }

  SocketAddress root_;
  std::function<void(Bytes&)> rewrite_;
  SocketAddress address_;
  int listen_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  Bytes sent_;
  std::thread thread_;
};

Bytes be32(uint32_t a, uint32_t b) {
  Bytes out;
  for (uint32_t v : {a, b}) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
  }
  return out;
}

bool contains(const Bytes& hay, const Bytes& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

// Sets the soft descriptor limit for the life of the object.
class FdLimit {
 public:
  explicit FdLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min(soft, saved_.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
  }
  ~FdLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

constexpr int kFloodSources = 15;

// A child process that opens `count` idle connections to `root`, reports how many it opened on
// `ready` and keeps them open until the parent closes `hold`.
pid_t floodFrom(const SocketAddress& root, int count, int* ready, int* hold) {
  int up[2];
  int down[2];
  REQUIRE(::pipe(up) == 0);
  REQUIRE(::pipe(down) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    int opened = 0;
    for (int i = 0; i < count; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) break;
      // A third from 127.0.0.2 (over the per-source limit), the rest spread up to 127.0.0.16 (over
      // the total limit).
      sockaddr_in from{};
      from.sin_family = AF_INET;
      const int source = i < count / 3 ? 0 : i % kFloodSources;
      from.sin_addr.s_addr = htonl(0x7F000002u + static_cast<uint32_t>(source));
      if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) continue;
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&root.storage), root.length) == 0) ++opened;
    }
    (void)!::write(up[1], &opened, sizeof(opened));
    char c;
    (void)!::read(down[0], &c, 1);
    ::_exit(0);
  }
  ::close(up[1]);
  ::close(down[0]);
  *ready = up[0];
  *hold = down[1];
  return pid;
}

TEST_CASE("1500 idle connections, more than the root's descriptor limit, do not stop an honest job",
          "[store][attack]") {
  constexpr int kFlood = 1500;
  FdLimit limit(1024);
  auto server = startServer();
  const SocketAddress root = server->address();
  // Ranks 0 and 1 register before the flood, ranks 2 and 3 during it.
  std::vector<std::unique_ptr<StoreClient>> early(2);
  std::vector<std::thread> joining;
  std::vector<std::string> reports(4);
  for (int r = 0; r < 2; ++r) {
    auto c = StoreClient::connect(root, kSecret, r, 4, Deadline::after(3.0));
    REQUIRE(c.isOk());
    early[static_cast<size_t>(r)] = std::move(c.value());
  }
  int ready = -1;
  int hold = -1;
  auto start = Clock::now();
  pid_t child = floodFrom(root, kFlood, &ready, &hold);
  int opened = 0;
  REQUIRE(::read(ready, &opened, sizeof(opened)) == sizeof(opened));
  const double floodSeconds = secondsSince(start);
  reports = runRanks(4, [&](int r) {
    return honestRank(root, r, 4, 3, r < 2 ? std::move(early[static_cast<size_t>(r)]) : nullptr);
  });
  const double jobSeconds = secondsSince(start) - floodSeconds;
  ::close(hold);
  ::close(ready);
  int st = 0;
  ::waitpid(child, &st, 0);
  INFO("flood of " << opened << " connections took " << floodSeconds << " s; the job " << jobSeconds << " s");
  CHECK(opened == kFlood);
  CHECK(reports == std::vector<std::string>(4, ""));
}

TEST_CASE("a handshake recorded in one job and replayed into the next is refused", "[store][attack]") {
  Bytes recorded;
  {
    auto job1 = startServer();
    Proxy tap(job1->address());
    auto reports = runRanks(2, [&](int r) { return honestRank(r == 1 ? tap.address() : job1->address(), r, 2, 1); });
    REQUIRE(reports == std::vector<std::string>{"", ""});
    recorded = tap.sent();
  }
  // What rank 1 sent before its first GATHER (type 2) is its whole handshake.
  REQUIRE(recorded.size() > wire::kHeaderBytes);
  auto job2 = startServer();
  int replay = connectTo(job2->address());
  REQUIRE(replay >= 0);
  REQUIRE(::send(replay, recorded.data(), recorded.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(recorded.size()));
  const std::string verdict = readVerdict(replay, 2.0);
  INFO("the replayed handshake got: " << verdict);
  CHECK(verdict != "OK");
  auto reports = runRanks(2, [&](int r) { return honestRank(job2->address(), r, 2, 2); });
  CHECK(reports == std::vector<std::string>{"", ""});
  ::close(replay);
}

TEST_CASE("a rank field rewritten on the way to the root is refused", "[store][attack]") {
  auto server = startServer();
  // The attacker turns rank 1's registration into one for rank 2.
  Proxy mitm(server->address(), [](Bytes& chunk) {
    const Bytes from = be32(1, 3);
    const Bytes to = be32(2, 3);
    auto at = std::search(chunk.begin(), chunk.end(), from.begin(), from.end());
    if (at != chunk.end()) std::copy(to.begin(), to.end(), at);
  });
  auto hijacked = StoreClient::connect(mitm.address(), kSecret, 1, 3, Deadline::after(2.0));
  INFO("the rewritten registration got: " << (hijacked.isOk() ? "OK" : hijacked.status().toString()));
  CHECK(!hijacked.isOk());
  auto reports = runRanks(3, [&](int r) { return honestRank(server->address(), r, 3, 2); });
  CHECK(reports == std::vector<std::string>{"", "", ""});
}

// Plays the root: accepts one rank, answers its first frame with a challenge carrying `nonce`,
// then an OK whose proof is made up, and records every byte the rank sends.
Bytes squat(uint8_t nonce, std::string* rankSaw) {
  SocketAddress where;
  int listener = listenLoopback(&where);
  std::thread rank([&] {
    auto c = StoreClient::connect(where, kSecret, 1, 2, Deadline::after(1.0));
    *rankSaw = c.isOk() ? "OK" : c.status().message();
  });
  Bytes got;
  int fd = ::accept(listener, nullptr, nullptr);
  Deadline d = Deadline::after(2.0);
  bool challenged = false;
  bool answered = false;
  uint8_t buf[4096];
  while (fd >= 0 && !d.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.insert(got.end(), buf, buf + n);
    if (!challenged) {
      Bytes challenge = test::rawFrameHeader(wire::kMagic, 5, 36);
      Bytes version = be32(wire::kProtocolVersion, 0);
      challenge.insert(challenge.end(), version.begin(), version.begin() + 4);
      challenge.resize(challenge.size() + 32, nonce);
      (void)!::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL);
      challenged = true;
    } else if (!answered) {
      Bytes ok = test::rawFrameHeader(wire::kMagic, 3, 32);
      ok.resize(ok.size() + 32, 0x5A);
      (void)!::send(fd, ok.data(), ok.size(), MSG_NOSIGNAL);
      answered = true;
    }
  }
  rank.join();
  if (fd >= 0) ::close(fd);
  ::close(listener);
  return got;
}

TEST_CASE("a squatter on the root's address learns no secret and gets no data", "[store][attack]") {
  std::string sawA;
  std::string sawB;
  std::string sawC;
  const Bytes a = squat(0x11, &sawA);
  const Bytes b = squat(0x11, &sawB);
  const Bytes c = squat(0x22, &sawC);
  const Bytes secret(kSecret.bytes.begin(), kSecret.bytes.end());
  const Bytes text(kSecretText.begin(), kSecretText.end());
  for (const Bytes* got : {&a, &b, &c}) {
    CHECK(!got->empty());
    CHECK(!contains(*got, secret));
    CHECK(!contains(*got, text));
    for (size_t half = 0; half < 16; half += 8) {
      const auto from = secret.begin() + static_cast<long>(half);
      CHECK(!contains(*got, Bytes(from, from + 8)));
    }
  }
  // Nothing the rank sends is a function of the secret alone: its last 32 bytes, the proof, differ
  // between sessions even for the same challenge, and no 8 of them recur in another session.
  CHECK(a != b);
  size_t recurring = 0;
  for (const Bytes* got : {&a, &b, &c}) {
    REQUIRE(got->size() >= 32);
    const Bytes proof(got->end() - 32, got->end());
    for (size_t off = 0; off + 8 <= proof.size(); ++off) {
      const Bytes window(proof.begin() + static_cast<long>(off), proof.begin() + static_cast<long>(off) + 8);
      for (const Bytes* other : {&a, &b, &c}) recurring += other != got && contains(*other, window) ? 1 : 0;
    }
  }
  CHECK(recurring == 0);
  // The made-up proof does not convince the rank: it never sends a GATHER.
  for (const std::string* saw : {&sawA, &sawB, &sawC}) {
    INFO(*saw);
    CHECK(saw->find("could not prove it knows the job secret") != std::string::npos);
  }
}

TEST_CASE("a HELLO with another world size is refused, naming both; rank 0 proceeds", "[store][attack]") {
  // The root is told the size when rank 0 starts it from its launch configuration (FERRY_ADDR);
  // a root behind a unique id learns it from rank 0's own registration.
  for (int configured : {0, 3}) {
    DYNAMIC_SECTION("the root was started for " << configured << " ranks") {
      auto server = StoreServer::start(SocketAddress::loopback(0), kSecret, configured);
      REQUIRE(server.isOk());
      const SocketAddress root = (*server)->address();
      std::string insider;
      std::thread early([&] {
        auto c = StoreClient::connect(root, kSecret, 1, 5, Deadline::after(3.0));
        insider = c.isOk() ? "OK" : c.status().message();
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the insider is first
      auto reports = runRanks(3, [&](int r) { return honestRank(root, r, 3, 2); });
      early.join();
      CHECK(reports == std::vector<std::string>{"", "", ""});
      INFO(insider);
      CHECK(insider.find("rank 1 says the world size is 5 but rank 0's configuration says it is 3") !=
            std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ferry::bootstrap
