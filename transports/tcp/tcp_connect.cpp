// Stream setup for the TCP transport. Every connect is non-blocking and every wait polls against
// the deadline, so a peer that never listens (or a stranger that connects and says nothing) costs
// at most the deadline and is named in the error.
#include "transports/tcp/tcp_connect.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/log.hpp"
#include "transports/tcp/tcp_wire.hpp"

namespace ferry::transport::tcp {
namespace {

constexpr uint32_t kAddressMagic = 0x46544131;  // "FTA1"

// Round trips at least this long get "auto"'s algorithm for long paths.
constexpr uint32_t kLongPathMicros = 1000;

// Before connect() or listen(): a socket that started under a pacing algorithm stays paced after
// a switch (the accepted ones inherit the listener's). "auto" starts every stream on cubic.
void setCongestion(int fd, const std::string& wanted) {
  const std::string congestion = wanted == "auto" ? "cubic" : wanted;
  if (!congestion.empty() && ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(),
                                          static_cast<socklen_t>(congestion.size())) != 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      FERRY_INFO(log::kNet, "TCP transport: congestion control '%s' refused (%s); the system's default stays",
                 congestion.c_str(), std::strerror(errno));
    }
  }
}

// A joined stream: "auto" moves it to BBR when its round trip (measured by the handshake) says the
// path is long: there cubic fills the link's queue, and the acknowledgements of the other
// direction (an all-reduce sends both ways at once) wait behind it. Short paths stay on cubic, which
// starts every burst at full speed where BBR would pace it at what it measured while idle. The
// measurements: docs/ARCHITECTURE.md, "Layers", the TCP transport.
void setStreamOptions(int fd, const std::string& congestion) {
  if (congestion == "auto") {
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_rtt >= kLongPathMicros) {
      static constexpr char kBbr[] = "bbr";
      (void)::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kBbr, sizeof(kBbr) - 1);
    }
  }
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string describe(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  // snprintf, not string concatenation: GCC 12 at -O3 reports a false -Wrestrict overlap there.
  char out[sizeof(host) + 16];
  std::snprintf(out, sizeof(out), "[%s]:%u", host, static_cast<unsigned>(port));
  return out;
}

// One stream being set up: an outgoing connect (then its hello), or an accepted socket whose
// hello is still arriving.
struct Pending {
  int fd = -1;
  bool outgoing = false;
  bool connected = false;  // outgoing: the connect finished and the hello is queued
  int peer = -1;           // outgoing: whom it connects to
  int stream = 0;          // outgoing: which stream
  Hello hello;             // outgoing: what to say; accepted: what was heard
  size_t done = 0;         // hello bytes written or read
  Clock::time_point retryAt{};
};

void closeAll(std::vector<std::vector<int>>& fds, std::vector<Pending>& pending) {
  for (auto& v : fds) {
    for (int& fd : v) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
  for (Pending& p : pending) {
    if (p.fd >= 0) ::close(p.fd);
  }
  pending.clear();
}

// What one stream being set up did in one pass over the ready sockets.
enum class Progress { kWaiting, kJoined, kDropped };

// The state connectStreams' steps share: every peer's streams (-1 until joined) and the streams
// still being set up.
struct StreamSetup {
  int self;
  int listenFd;
  const std::vector<TcpAddress>& peers;
  const std::vector<int>& streams;
  const std::string& congestion;
  std::vector<std::vector<int>> fds{};
  std::vector<Pending> pending{};
  int missing = 0;  // streams not yet joined, both ways

  int streamsOf(int peer) const { return streams[static_cast<size_t>(peer)]; }
  void planStreams();
  Status join(Deadline deadline);
  Status startDueConnects();
  Status timeoutError() const;
  void acceptIncoming();
  void advancePending();
  static Progress sendHello(Pending& o);
  Progress readHello(Pending& o) const;
};

// Every peer's slots; this rank connects to the peers above it, the peers below connect to it.
void StreamSetup::planStreams() {
  const int n = static_cast<int>(peers.size());
  fds.assign(static_cast<size_t>(n), std::vector<int>());
  for (int p = 0; p < n; ++p) {
    if (p == self) continue;
    fds[static_cast<size_t>(p)].assign(static_cast<size_t>(streamsOf(p)), -1);
    missing += streamsOf(p);
    if (p < self) continue;
    for (int s = 0; s < streamsOf(p); ++s) {
      Pending o;
      o.outgoing = true;
      o.peer = p;
      o.stream = s;
      o.hello.rank = static_cast<uint32_t>(self);
      o.hello.stream = static_cast<uint32_t>(s);
      o.hello.streams = static_cast<uint32_t>(streamsOf(p));
      o.hello.commId = peers[static_cast<size_t>(p)].commId;
      o.hello.nonce = peers[static_cast<size_t>(p)].nonce;
      pending.push_back(o);
    }
  }
}

// Polls every socket being set up until all streams joined or the deadline passed.
Status StreamSetup::join(Deadline deadline) {
  std::vector<pollfd> pfds;
  while (missing > 0) {
    FERRY_TRY(startDueConnects());
    pfds.clear();
    pfds.push_back({listenFd, POLLIN, 0});
    for (Pending& o : pending) {
      if (o.fd >= 0) pfds.push_back({o.fd, static_cast<short>(o.outgoing ? POLLOUT : POLLIN), 0});
    }
    if (deadline.expired()) return timeoutError();
    int ready = ::poll(pfds.data(), pfds.size(), std::min(deadline.remainingMs(), 50));
    if (ready < 0 && errno != EINTR) {
      return makeError(ErrorCode::kSystemError, "TCP transport: poll failed: %s", std::strerror(errno));
    }
    if (ready <= 0) continue;
    if (pfds[0].revents & POLLIN) acceptIncoming();
    advancePending();
  }
  return Status::ok();
}

// Start the connects that are due (a refused one is retried: the peer may not listen yet).
Status StreamSetup::startDueConnects() {
  const Clock::time_point now = Clock::now();
  for (Pending& o : pending) {
    if (!o.outgoing || o.fd >= 0 || now < o.retryAt) continue;
    const TcpAddress& to = peers[static_cast<size_t>(o.peer)];
    o.fd = ::socket(to.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (o.fd < 0) return makeError(ErrorCode::kSystemError, "TCP transport: socket() failed: %s", std::strerror(errno));
    setCongestion(o.fd, congestion);
    if (::connect(o.fd, reinterpret_cast<const sockaddr*>(&to.addr), to.length) != 0 && errno != EINPROGRESS) {
      ::close(o.fd);
      o.fd = -1;
      o.retryAt = now + std::chrono::milliseconds(50);
    }
  }
  return Status::ok();
}

// Names the first stream still missing.
Status StreamSetup::timeoutError() const {
  std::string what;
  for (size_t p = 0; p < fds.size() && what.empty(); ++p) {
    for (int fd : fds[p]) {
      if (fd < 0) {
        what = "rank " + std::to_string(p) + " at " + peers[p].toString();
        break;
      }
    }
  }
  return makeError(ErrorCode::kTimeout,
                   "rank %d could not join its TCP streams before the deadline (FERRY_TIMEOUT): %d missing, "
                   "the first with %s",
                   self, missing, what.c_str());
}

void StreamSetup::acceptIncoming() {
  for (;;) {
    int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    Pending a;
    a.fd = fd;
    pending.push_back(a);
  }
}

// One step of every stream being set up; a joined stream moves to its slot, a dropped one closes.
void StreamSetup::advancePending() {
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& o = pending[i];
    if (o.fd < 0) continue;
    const Progress progress = o.outgoing ? sendHello(o) : readHello(o);
    if (progress == Progress::kDropped) {
      ::close(o.fd);
      o.fd = -1;
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(i--));
    } else if (progress == Progress::kJoined) {
      setStreamOptions(o.fd, congestion);
      fds[static_cast<size_t>(o.peer)][static_cast<size_t>(o.stream)] = o.fd;
      o.fd = -1;
      --missing;
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(i--));
    }
  }
}

// An outgoing stream: finish the connect, then write the hello. A failure closes the socket and
// retries after a pause, until the deadline.
Progress StreamSetup::sendHello(Pending& o) {
  if (!o.connected) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(o.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EINPROGRESS || err == EALREADY) return Progress::kWaiting;
    if (err != 0) {
      // Refused or unreachable: try again until the deadline.
      ::close(o.fd);
      o.fd = -1;
      o.retryAt = Clock::now() + std::chrono::milliseconds(50);
      return Progress::kWaiting;
    }
    o.connected = true;
  }
  ssize_t w = ::send(o.fd, reinterpret_cast<const uint8_t*>(&o.hello) + o.done, sizeof(Hello) - o.done, MSG_NOSIGNAL);
  if (w > 0) o.done += static_cast<size_t>(w);
  if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    ::close(o.fd);
    o.fd = -1;
    o.connected = false;
    o.done = 0;
    o.retryAt = Clock::now() + std::chrono::milliseconds(50);
    return Progress::kWaiting;
  }
  return o.done == sizeof(Hello) ? Progress::kJoined : Progress::kWaiting;
}

// An accepted stream: read the hello and keep the stream only if it names this communicator and a
// stream of a lower rank not joined yet.
Progress StreamSetup::readHello(Pending& o) const {
  bool drop = false, joined = false;
  ssize_t r = ::recv(o.fd, reinterpret_cast<uint8_t*>(&o.hello) + o.done, sizeof(Hello) - o.done, 0);
  if (r > 0) o.done += static_cast<size_t>(r);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) drop = true;
  if (o.done == sizeof(Hello)) {
    const Hello& h = o.hello;
    const int from = static_cast<int>(h.rank);
    const TcpAddress& me = peers[static_cast<size_t>(self)];
    if (h.magic != kHelloMagic || h.commId != me.commId || h.nonce != me.nonce || from < 0 || from >= self ||
        static_cast<int>(h.stream) >= streamsOf(from) || static_cast<int>(h.streams) != streamsOf(from) ||
        fds[static_cast<size_t>(from)][h.stream] >= 0) {
      FERRY_WARN(log::kTransport,
                 "TCP transport: dropped a connection that did not say the right hello "
                 "(claims rank %u, stream %u of %u)",
                 h.rank, h.stream, h.streams);
      drop = true;
    } else {
      o.peer = from;
      o.stream = static_cast<int>(h.stream);
      joined = true;
    }
  }
  return drop ? Progress::kDropped : joined ? Progress::kJoined : Progress::kWaiting;
}

}  // namespace

std::vector<uint8_t> TcpAddress::serialize() const {
  std::vector<uint8_t> out(4 + 4 + 4 + 8 + 8 + 4 + sizeof(sockaddr_storage));
  uint8_t* p = out.data();
  auto put = [&](const void* v, size_t n) {
    std::memcpy(p, v, n);
    p += n;
  };
  uint32_t len = length;
  put(&kAddressMagic, 4);
  put(&rank, 4);
  put(&streams, 4);
  put(&commId, 8);
  put(&nonce, 8);
  put(&len, 4);
  put(&addr, sizeof(addr));
  return out;
}

Result<TcpAddress> TcpAddress::deserialize(const std::vector<uint8_t>& bytes, int from) {
  TcpAddress a;
  uint32_t magic = 0, len = 0;
  if (bytes.size() != 4 + 4 + 4 + 8 + 8 + 4 + sizeof(sockaddr_storage)) {
    return makeError(ErrorCode::kInternalError, "rank %d published a TCP address of %zu bytes (expected %zu)", from,
                     bytes.size(), 4 + 4 + 4 + 8 + 8 + 4 + sizeof(sockaddr_storage));
  }
  const uint8_t* p = bytes.data();
  auto get = [&](void* v, size_t n) {
    std::memcpy(v, p, n);
    p += n;
  };
  get(&magic, 4);
  get(&a.rank, 4);
  get(&a.streams, 4);
  get(&a.commId, 8);
  get(&a.nonce, 8);
  get(&len, 4);
  get(&a.addr, sizeof(a.addr));
  a.length = len;
  if (magic != kAddressMagic || a.rank != static_cast<uint32_t>(from) || len > sizeof(sockaddr_storage) ||
      (a.addr.ss_family != AF_INET && a.addr.ss_family != AF_INET6) || a.streams < 1 ||
      a.streams > static_cast<uint32_t>(kMaxStreams)) {
    return makeError(ErrorCode::kInternalError,
                     "rank %d published a malformed TCP address (rank field %u, %u streams, family %d)", from, a.rank,
                     a.streams, a.addr.ss_family);
  }
  return a;
}

std::string TcpAddress::toString() const { return describe(addr); }

Result<int> listenTcp(const sockaddr_storage& bind, socklen_t length, const std::string& congestion,
                      sockaddr_storage* bound, socklen_t* boundLength) {
  int fd = ::socket(bind.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return makeError(ErrorCode::kSystemError, "TCP transport: socket() failed: %s", std::strerror(errno));
  setCongestion(fd, congestion);
  sockaddr_storage a = bind;
  if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&a)->sin_port = 0;
  if (a.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), length) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    int e = errno;
    ::close(fd);
    return makeError(ErrorCode::kSystemError, "TCP transport: cannot listen on %s: %s", describe(a).c_str(),
                     std::strerror(e));
  }
  *boundLength = sizeof(*bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(bound), boundLength);
  return fd;
}

Result<std::vector<std::vector<int>>> connectStreams(int self, int listenFd, const std::vector<TcpAddress>& peers,
                                                     const std::vector<int>& streams, const std::string& congestion,
                                                     Deadline deadline) {
  StreamSetup setup{self, listenFd, peers, streams, congestion};
  setup.planStreams();
  Status joined = setup.join(deadline);
  if (!joined.isOk()) {
    closeAll(setup.fds, setup.pending);
    return joined;
  }
  return std::move(setup.fds);
}

}  // namespace ferry::transport::tcp
