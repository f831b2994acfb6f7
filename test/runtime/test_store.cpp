// Tests of the bootstrap rendezvous store: real sockets on 127.0.0.1, ranks as threads.
//
// Honest ranks must always finish whatever strangers do to the root, so every hostile case (wrong
// secret, garbage, oversized or truncated frames) runs next to honest ranks that must complete
// their rounds with exact data. Contributions have a closed form in (rank, round) so every received
// byte is checked. Deadlines are short (at most 2 s) to keep the suite fast. Catch2 assertions are
// not thread-safe, so rank threads report a message and the main thread asserts. FERRY_TIMEOUT is
// set to 2 s before ferry first reads its configuration, so that the root's stall limit (a frame
// that stops making progress) and a detached root's idle limit can be observed within seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap/handshake.hpp"
#include "runtime/bootstrap/store.hpp"
#include "runtime/bootstrap/wire.hpp"
#include "test/common/rank_threads.hpp"
#include "test/runtime/raw_frames.hpp"

// Every allocation in the process goes through here so a test can assert that no frame made the
// root allocate what it announced.
static std::atomic<size_t> gLargestAlloc{0};

// Out of line so the compiler does not pair an inlined free() with operator new and warn.
[[gnu::noinline]] static void trackedFree(void* p) noexcept { std::free(p); }

[[gnu::noinline]] static void* trackedAlloc(size_t n) {
  size_t seen = gLargestAlloc.load(std::memory_order_relaxed);
  while (n > seen && !gLargestAlloc.compare_exchange_weak(seen, n)) {
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t n) { return trackedAlloc(n); }
void* operator new[](size_t n) { return trackedAlloc(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return trackedAlloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { trackedFree(p); }
void operator delete[](void* p) noexcept { trackedFree(p); }
void operator delete(void* p, size_t) noexcept { trackedFree(p); }
void operator delete[](void* p, size_t) noexcept { trackedFree(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { trackedFree(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { trackedFree(p); }

// Runs during static initialisation, before any test reads the configuration (parsed once, lazily).
static const bool gShortTimeout = (::setenv("FERRY_TIMEOUT", "2", 1), true);

namespace ferry::bootstrap {
namespace {

constexpr double kStallLimit = 2.0;  // min(10 s, FERRY_TIMEOUT) on the root

using Bytes = std::vector<uint8_t>;

const Secret kSecret = Secret::fromString("store-test-secret");

// The closed-form contribution of `rank` to round `round`: varied lengths, including empty.
Bytes contribution(int rank, int round) {
  Bytes b(static_cast<size_t>((rank * 7 + round * 3) % 23));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 31 + round * 17 + static_cast<int>(i));
  return b;
}

// A root for `size` ranks, as rank 0 starts it from its configuration; 0: the size comes from
// rank 0's registration, and other ranks wait for it (as with a unique id).
std::unique_ptr<StoreServer> startServer(int size = 0) {
  auto server = StoreServer::start(SocketAddress::loopback(0), kSecret, size);
  REQUIRE(server.isOk());
  return std::move(server.value());
}

// Runs body(rank) on `size` threads; returns each rank's report ("" when it succeeded).
std::vector<std::string> runRanks(int size, const std::function<std::string(int)>& body) {
  return ferry::test::onRankThreads<std::string>(size, body);
}

// `rounds` allGathers plus a barrier each, checking every byte; "" on success.
std::string honestRank(const SocketAddress& root, int rank, int size, int rounds) {
  auto client = StoreClient::connect(root, kSecret, rank, size, Deadline::after(2.0));
  if (!client.isOk()) return client.status().toString();
  for (int round = 0; round < rounds; ++round) {
    auto all = (*client)->allGather(contribution(rank, round), Deadline::after(2.0));
    if (!all.isOk()) return all.status().toString();
    if (all->size() != static_cast<size_t>(size)) return "wrong number of contributions";
    for (int r = 0; r < size; ++r) {
      if ((*all)[static_cast<size_t>(r)] != contribution(r, round)) {
        return "rank " + std::to_string(r) + "'s data differs in round " + std::to_string(round);
      }
    }
    Status b = (*client)->barrier(Deadline::after(2.0));
    if (!b.isOk()) return b.toString();
  }
  return "";
}

// A port nobody listens on (bound and released at once).
uint16_t freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  SocketAddress a = SocketAddress::loopback(0);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a.storage), a.length) == 0);
  a.length = sizeof(a.storage);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length);
  ::close(fd);
  return a.port();
}

Bytes header(uint32_t magic, uint16_t type, uint32_t length) { return test::rawFrameHeader(magic, type, length); }

// A hand-driven client socket that speaks whatever the test wants.
class RawPeer {
 public:
  explicit RawPeer(const SocketAddress& root) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(::connect(fd_, reinterpret_cast<const sockaddr*>(&root.storage), root.length) == 0);
  }
  ~RawPeer() { ::close(fd_); }
  void send(const Bytes& b) {
    REQUIRE(::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
  }
  void shutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  // True when the root closes the connection within `seconds` (anything it sent first is skipped).
  bool closedWithin(double seconds) {
    Deadline d = Deadline::after(seconds);
    uint8_t buf[4096];
    while (!d.expired()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, d.remainingMs()) <= 0) continue;
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }
  // The whole handshake as `rank` of `size` with `secret`: "OK", or the ERROR's message.
  std::string handshake(const Secret& secret, uint32_t rank, uint32_t size) {
    wire::Hello hello;
    hello.nonce = randomNonce();
    send(*wire::encodeHello(hello));
    wire::Frame challenge;
    std::string got = readFrame(&challenge);
    if (!got.empty()) return got;
    if (challenge.type != wire::MsgType::kChallenge) return "(no challenge)";
    auto rootHello = wire::decodeHello(challenge.payload);
    if (!rootHello.isOk()) return rootHello.status().message();
    wire::Auth auth;
    auth.claim = Claim{rank, size};
    auth.proof = rankProof(secret, rootHello->nonce, hello.nonce, auth.claim);
    send(*wire::encodeAuth(auth));
    return readReply();
  }
  // The root's reply, rendered as "OK" or the ERROR's message.
  std::string readReply() {
    wire::Frame f;
    std::string got = readFrame(&f);
    if (!got.empty()) return got;
    return f.type == wire::MsgType::kOk ? "OK" : wire::decodeError(f.payload).message();
  }
  // One frame from the root into *f; "" or what went wrong.
  std::string readFrame(wire::Frame* f) {
    wire::FrameReader reader([](const wire::FrameHeader&) { return Status::ok(); });
    Deadline d = Deadline::after(2.0);
    while (!reader.complete() && !d.expired()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, d.remainingMs()) <= 0) continue;
      auto space = reader.space();
      ssize_t n = ::recv(fd_, space.data(), space.size(), 0);
      if (n <= 0) return "(closed)";
      if (!reader.commit(static_cast<size_t>(n)).isOk()) return "(bad frame)";
    }
    if (!reader.complete()) return "(no reply)";
    *f = reader.take();
    return "";
  }

 private:
  int fd_;
};

TEST_CASE("allGather and barrier deliver every rank's data, round after round", "[store]") {
  for (int size : {1, 2, 3, 8}) {
    DYNAMIC_SECTION("world size " << size) {
      auto server = startServer();
      auto reports = runRanks(size, [&](int r) { return honestRank(server->address(), r, size, 5); });
      for (int r = 0; r < size; ++r) CHECK(reports[static_cast<size_t>(r)] == "");
    }
  }
}

TEST_CASE("a rank with the wrong secret is refused and the honest ranks still finish", "[store]") {
  auto server = startServer();
  std::string refused;
  std::thread stranger([&] {
    auto c = StoreClient::connect(server->address(), Secret::fromString("not-the-secret"), 0, 2, Deadline::after(2.0));
    refused = c.isOk() ? "accepted" : c.status().message();
  });
  auto reports = runRanks(2, [&](int r) { return honestRank(server->address(), r, 2, 3); });
  stranger.join();
  CHECK(reports == std::vector<std::string>{"", ""});
  INFO(refused);
  CHECK(refused.find("refused rank 0 of 2: the proof of the job secret for rank 0 of 2 does not verify") !=
        std::string::npos);
  CHECK(refused.find(server->address().toString()) != std::string::npos);
}

TEST_CASE("malformed frames are dropped without stalling honest ranks or allocating", "[store]") {
  std::mt19937 rng(1234);
  Bytes garbage(4096);
  for (auto& b : garbage) b = static_cast<uint8_t>(rng());
  garbage[0] = 0x00;  // whatever the generator says, it is not the magic
  Bytes truncated = header(wire::kMagic, 1, wire::kHelloBytes);
  truncated.resize(truncated.size() + 10, 0xAB);
  Bytes halfHeader = header(wire::kMagic, 1, wire::kHelloBytes);
  halfHeader.resize(5);
  struct Case {
    const char* name;
    Bytes bytes;
    bool closeWrite;
    double dropWithin;  // seconds
  };
  const double kPrompt = 2.0;
  const double kAfterStall = kStallLimit + 1.5;
  std::vector<Case> cases = {
      {"bad magic", header(0xDEADBEEF, 1, 28), false, kPrompt},
      {"unknown type", header(wire::kMagic, 77, 4), false, kPrompt},
      {"oversized HELLO", header(wire::kMagic, 1, 0xFFFFFFFFu), false, kPrompt},
      {"oversized GATHER before HELLO", header(wire::kMagic, 2, 0xFFFFFFFFu), false, kPrompt},
      {"reply type from a client", header(wire::kMagic, 3, 0), false, kPrompt},
      {"truncated frame then close", truncated, true, kPrompt},
      {"random garbage", garbage, false, kPrompt},
      {"half a header, kept open", halfHeader, false, kAfterStall},
      {"nothing at all, kept open", Bytes{}, false, kAfterStall},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      auto server = startServer();
      gLargestAlloc = 0;
      RawPeer peer(server->address());
      if (!c.bytes.empty()) peer.send(c.bytes);
      if (c.closeWrite) peer.shutdownWrite();
      auto reports = runRanks(3, [&](int r) { return honestRank(server->address(), r, 3, 3); });
      CHECK(reports == std::vector<std::string>{"", "", ""});
      CHECK(peer.closedWithin(c.dropWithin));
      CHECK(gLargestAlloc.load() < (16u << 20));
    }
  }
}

TEST_CASE("an oversized GATHER from a registered rank drops it and the others learn which rank", "[store]") {
  auto server = startServer(3);
  RawPeer rogue(server->address());
  REQUIRE(rogue.handshake(kSecret, 2, 3) == "OK");
  gLargestAlloc = 0;
  rogue.send(header(wire::kMagic, 2, 0xFFFFFFF0u));
  CHECK(rogue.closedWithin(2.0));
  auto reports = runRanks(2, [&](int r) { return honestRank(server->address(), r, 3, 1); });
  for (const auto& report : reports) CHECK(report.find("rank 2 disconnected from the rendezvous") != std::string::npos);
  CHECK(gLargestAlloc.load() < (16u << 20));
}

TEST_CASE("a registered rank stalled mid-frame is dropped after the stall limit", "[store]") {
  auto server = startServer();
  RawPeer rogue(server->address());
  REQUIRE(rogue.handshake(kSecret, 0, 2) == "OK");
  Bytes partial = header(wire::kMagic, 2, 100);
  partial.resize(partial.size() + 20, 0);  // 20 of the 100 announced bytes, then silence
  rogue.send(partial);
  auto start = Clock::now();
  CHECK(rogue.closedWithin(kStallLimit + 1.5));
  CHECK(secondsSince(start) > kStallLimit - 0.5);
}

TEST_CASE("a rank that never arrives fails the round within the deadline, naming it", "[store]") {
  for (bool connects : {false, true}) {
    DYNAMIC_SECTION((connects ? "rank 2 connects but never gathers" : "rank 2 never connects")) {
      auto server = startServer(3);
      std::unique_ptr<StoreClient> idle;
      if (connects)
        idle = std::move(StoreClient::connect(server->address(), kSecret, 2, 3, Deadline::after(2.0)).value());
      std::vector<Status> got(2);
      std::vector<double> took(2);
      runRanks(2, [&](int r) {
        auto c = StoreClient::connect(server->address(), kSecret, r, 3, Deadline::after(2.0));
        if (!c.isOk()) return std::string();
        auto start = Clock::now();
        got[static_cast<size_t>(r)] = (*c)->allGather(contribution(r, 0), Deadline::after(0.5)).status();
        took[static_cast<size_t>(r)] = secondsSince(start);
        return std::string();
      });
      for (int r = 0; r < 2; ++r) {
        INFO(got[static_cast<size_t>(r)].toString());
        CHECK(got[static_cast<size_t>(r)].code() == ErrorCode::kTimeout);
        CHECK(got[static_cast<size_t>(r)].message().find("rendezvous timed out after 0.") == 0);
        CHECK(got[static_cast<size_t>(r)].message().find("rank 2 (of 3) never arrived (ranks 0, 1 did)") !=
              std::string::npos);
        CHECK((got[static_cast<size_t>(r)].message().find("never connected") != std::string::npos) == !connects);
        CHECK(took[static_cast<size_t>(r)] < 0.9);
      }
      if (connects) {
        // The late rank learns the same story instead of waiting in a dead job.
        auto late = idle->barrier(Deadline::after(1.0));
        CHECK(late.message().find("never arrived") != std::string::npos);
      }
    }
  }
}

TEST_CASE("a rank that disconnects mid-round fails the others at once, naming it", "[store]") {
  auto server = startServer(3);
  auto quitter = StoreClient::connect(server->address(), kSecret, 2, 3, Deadline::after(2.0));
  REQUIRE(quitter.isOk());
  std::thread leave([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    quitter.value().reset();
  });
  std::vector<Status> got(2);
  auto start = Clock::now();
  runRanks(2, [&](int r) {
    auto c = StoreClient::connect(server->address(), kSecret, r, 3, Deadline::after(2.0));
    if (c.isOk()) got[static_cast<size_t>(r)] = (*c)->allGather({1, 2, 3}, Deadline::after(2.0)).status();
    return std::string();
  });
  leave.join();
  CHECK(secondsSince(start) < 1.5);
  for (const Status& s : got) {
    INFO(s.toString());
    CHECK(s.code() == ErrorCode::kRemoteError);
    CHECK(s.message().find("rank 2 disconnected from the rendezvous") != std::string::npos);
  }
}

TEST_CASE("registration errors name the value and the expected one", "[store]") {
  auto server = startServer();
  auto first = StoreClient::connect(server->address(), kSecret, 0, 2, Deadline::after(2.0));
  REQUIRE(first.isOk());
  auto dup = StoreClient::connect(server->address(), kSecret, 0, 2, Deadline::after(2.0));
  REQUIRE(!dup.isOk());
  CHECK(dup.status().message().find("rank 0 is already registered by 127.0.0.1:") != std::string::npos);
  auto size = StoreClient::connect(server->address(), kSecret, 1, 3, Deadline::after(2.0));
  REQUIRE(!size.isOk());
  CHECK(size.status().message().find("rank 1 says the world size is 3 but rank 0's configuration says it is 2; "
                                     "expected 2") != std::string::npos);
  auto local = StoreClient::connect(server->address(), kSecret, 5, 2, Deadline::after(2.0));
  REQUIRE(!local.isOk());
  CHECK(local.status().code() == ErrorCode::kInvalidArgument);
  CHECK(local.status().message() == "rank 5 is out of range for world size 2 (expected 0 to 1)");
  RawPeer raw(server->address());  // the root checks too, for clients that skip the local check
  CHECK(raw.handshake(kSecret, 2, 2) == "rank 2 is out of range for world size 2 (expected 0 to 1)");
  // The honest job is unaffected by all of this.
  auto second = StoreClient::connect(server->address(), kSecret, 1, 2, Deadline::after(2.0));
  REQUIRE(second.isOk());
  Status firstBarrier;
  std::thread t([&] { firstBarrier = (*first)->barrier(Deadline::after(2.0)); });
  CHECK((*second)->barrier(Deadline::after(2.0)).isOk());
  t.join();
  CHECK(firstBarrier.isOk());
  auto big = (*second)->allGather(Bytes(wire::kMaxContributionBytes + 1), Deadline::after(1.0));
  CHECK(big.status().code() == ErrorCode::kInvalidArgument);
}

// Plays a root of another ferry version for one rank: reads its HELLO, then either answers with a
// CHALLENGE of `version` or, as a protocol-1 root does with a HELLO it cannot parse, closes.
std::string againstOtherRoot(uint32_t version) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SocketAddress where = SocketAddress::loopback(0);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&where.storage), where.length) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  where.length = sizeof(where.storage);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&where.storage), &where.length);
  std::string saw;
  std::thread rank([&] {
    auto c = StoreClient::connect(where, kSecret, 0, 2, Deadline::after(1.0));
    saw = c.isOk() ? "OK" : c.status().message();
  });
  int fd = ::accept(listener, nullptr, nullptr);
  uint8_t hello[wire::kHeaderBytes + wire::kHelloBytes];
  size_t got = 0;
  while (fd >= 0 && got < sizeof(hello)) {
    ssize_t n = ::recv(fd, hello + got, sizeof(hello) - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (version > 1) {
    wire::Hello challenge;
    challenge.version = version;
    auto frame = wire::encodeHello(challenge, wire::MsgType::kChallenge);
    (void)!::send(fd, frame->data(), frame->size(), MSG_NOSIGNAL);
  }
  if (version > 1) rank.join();
  ::close(fd);
  if (version <= 1) rank.join();
  ::close(listener);
  return saw;
}

TEST_CASE("ranks and roots of different protocol versions name both versions", "[store]") {
  auto server = startServer();
  RawPeer old(server->address());
  Bytes legacy = header(wire::kMagic, 1, wire::kLegacyHelloBytes);
  legacy.insert(legacy.end(), kSecret.bytes.begin(), kSecret.bytes.end());
  legacy.insert(legacy.end(), {0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1});  // rank 0 of 2, protocol 1
  old.send(legacy);
  CHECK(old.readReply() ==
        "protocol version 1 is not supported (expected 2): all ranks must run the same ferry version");
  const std::string newer = againstOtherRoot(3);
  INFO(newer);
  CHECK(newer.find("speaks protocol version 3, rank 0 speaks 2") != std::string::npos);
  const std::string older = againstOtherRoot(1);
  INFO(older);
  CHECK(older.find("closed the connection") != std::string::npos);
  CHECK(older.find("older ferry") != std::string::npos);
}

TEST_CASE("connecting where nobody listens fails at the deadline, naming the address", "[store]") {
  SocketAddress nobody = SocketAddress::loopback(freePort());
  auto start = Clock::now();
  auto c = StoreClient::connect(nobody, kSecret, 0, 1, Deadline::after(0.5));
  double took = secondsSince(start);
  REQUIRE(!c.isOk());
  INFO(c.status().message());
  CHECK(c.status().code() == ErrorCode::kTimeout);
  CHECK(c.status().message().find("rendezvous root at " + nobody.toString() + " within 0.5 s") != std::string::npos);
  CHECK(took >= 0.45);
  CHECK(took < 1.5);
}

TEST_CASE("a rank may start before the root", "[store]") {
  uint16_t port = freePort();
  std::string report;
  std::thread early([&] { report = honestRank(SocketAddress::loopback(port), 0, 1, 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto server = StoreServer::start(SocketAddress::loopback(port), kSecret);
  REQUIRE(server.isOk());
  early.join();
  CHECK(report == "");
}

TEST_CASE("a dead or hung root gives the rank a clear error", "[store]") {
  SECTION("root destroyed mid-round") {
    auto server = startServer();
    auto c = StoreClient::connect(server->address(), kSecret, 0, 2, Deadline::after(2.0));
    REQUIRE(c.isOk());
    std::thread kill([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      server.reset();
    });
    auto start = Clock::now();
    Status s = (*c)->barrier(Deadline::after(2.0));
    kill.join();
    CHECK(secondsSince(start) < 1.0);
    CHECK(s.message().find("closed the connection while rank 0 waited") != std::string::npos);
    CHECK((*c)->barrier(Deadline::after(2.0)).message() == s.message());  // sticky
  }
  SECTION("root accepts but never answers") {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    SocketAddress a = SocketAddress::loopback(0);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a.storage), a.length) == 0);
    REQUIRE(::listen(fd, 4) == 0);  // the kernel completes the handshake; nobody ever reads
    a.length = sizeof(a.storage);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length);
    auto c = StoreClient::connect(a, kSecret, 0, 1, Deadline::after(0.3));
    ::close(fd);
    REQUIRE(!c.isOk());
    CHECK(c.status().code() == ErrorCode::kTimeout);
    CHECK(c.status().message().find("rendezvous root at " + a.toString() + " did not answer rank 0's HELLO") !=
          std::string::npos);
  }
}

TEST_CASE("the destructor stops the server promptly; a detached one stops when the job leaves", "[store]") {
  SECTION("destructor") {
    auto server = startServer();
    RawPeer idle(server->address());
    auto start = Clock::now();
    server.reset();
    CHECK(secondsSince(start) < 0.5);
  }
  SECTION("detach") {
    auto server = startServer();
    SocketAddress addr = server->address();
    StoreServer::detach(std::move(server));
    auto reports = runRanks(2, [&](int r) { return honestRank(addr, r, 2, 2); });
    CHECK(reports == std::vector<std::string>{"", ""});
    // Once both ranks left, the root closes its listening socket: connections are refused.
    bool refused = false;
    for (Deadline d = Deadline::after(2.0); !refused && !d.expired();) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      refused =
          ::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0 && errno == ECONNREFUSED;
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(refused);
  }
  SECTION("a detached server nobody uses stops after FERRY_TIMEOUT") {
    auto server = startServer();
    SocketAddress addr = server->address();
    StoreServer::detach(std::move(server));
    auto start = Clock::now();
    bool refused = false;
    while (!refused && secondsSince(start) < kStallLimit + 2.0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      refused =
          ::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0 && errno == ECONNREFUSED;
      ::close(fd);
    }
    CHECK(refused);
    CHECK(secondsSince(start) > kStallLimit - 0.5);
  }
}

TEST_CASE("unique ids round-trip and corrupted ones are rejected", "[store]") {
  for (const char* text : {"127.0.0.1:29500", "[::1]:1234"}) {
    RootInfo info{SocketAddress::parse(text).value(), Secret::random()};
    uint8_t id[kUniqueIdBytes];
    encodeUniqueId(info, id);
    auto back = decodeUniqueId(id);
    REQUIRE(back.isOk());
    CHECK(back->addr.toString() == text);
    CHECK(back->secret == info.secret);
  }
  RootInfo info{SocketAddress::loopback(29500), kSecret};
  uint8_t id[kUniqueIdBytes];
  auto corrupt = [&](size_t at, uint8_t value) {
    encodeUniqueId(info, id);
    id[at] = value;
    return decodeUniqueId(id).status().message();
  };
  CHECK(corrupt(0, 0x00).find("expected the magic 0x46524944") != std::string::npos);
  CHECK(corrupt(5, 9).find("layout version 9, expected 1") != std::string::npos);
  CHECK(corrupt(7, 5).find("address family 5, expected 4 (IPv4) or 6 (IPv6)") != std::string::npos);
}

TEST_CASE("SocketAddress parses host:port forms and explains bad ones", "[store]") {
  CHECK(SocketAddress::parse("127.0.0.1:29500")->toString() == "127.0.0.1:29500");
  CHECK(SocketAddress::parse("[::1]:80")->toString() == "[::1]:80");
  CHECK(SocketAddress::parse("0.0.0.0:0")->port() == 0);
  auto named = SocketAddress::parse("localhost:1234");
  REQUIRE(named.isOk());
  CHECK(named->port() == 1234);
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:12a", "::1:80", "[::1", "[::1]80",
                          ":80", "no-such-host.invalid:80"}) {
    auto r = SocketAddress::parse(bad);
    INFO(bad);
    REQUIRE(!r.isOk());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("secrets: hex taken as is, other text hashed, comparison by value", "[store]") {
  Secret hex = Secret::fromString("000102030405060708090a0b0c0d0e0F");
  for (size_t i = 0; i < 16; ++i) CHECK(hex.bytes[i] == i);
  CHECK(Secret::fromString("abc") == Secret::fromString("abc"));
  CHECK(!(Secret::fromString("abc") == Secret::fromString("abd")));
  CHECK(!(Secret::fromString("") == Secret::fromString(std::string(1, '\0'))));
  CHECK(!(Secret::random() == Secret::random()));
}

}  // namespace
}  // namespace ferry::bootstrap
