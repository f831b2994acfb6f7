// Socket helpers for the store (see socket.hpp for why everything is non-blocking).
//
// connectWithRetry is the one place that knows which connect failures mean "the root is not up
// yet" (retry) and which mean "this can never work" (fail now), and it guards against the Linux
// loopback quirk where a socket connecting to a free port in the ephemeral range connects to itself.
#include "runtime/bootstrap/socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace ferry::bootstrap {
namespace {

void setNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Failures that a root which has not started (or is restarting its listen) produces.
bool transientConnectError(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EAGAIN || err == EINTR ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED;
}

// True when the socket ended up connected to itself (source address equals destination).
bool selfConnected(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t ll = sizeof(local);
  socklen_t pl = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  return ll == pl && std::memcmp(&local, &peer, ll) == 0;
}

// One connect attempt; returns 0 and a connected socket, or the errno that stopped it.
int connectOnce(const SocketAddress& addr, Deadline deadline, Fd* out) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  int err = 0;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
    err = errno;
  }
  if (err == EINPROGRESS) {
    pollfd p{fd.get(), POLLOUT, 0};
    int n = ::poll(&p, 1, pollTimeoutMs(deadline.at(), INT_MAX));
    if (n == 0) return ETIMEDOUT;
    if (n < 0) return errno;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  if (err != 0) return err;
  if (selfConnected(fd.get())) return ECONNREFUSED;
  setNoDelay(fd.get());
  *out = std::move(fd);
  return 0;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Fd> listenOn(const SocketAddress& bind, SocketAddress* bound) {
  std::string where = bind.toString();
  Fd fd(::socket(bind.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return makeError(ErrorCode::kSystemError, "cannot create the rendezvous socket for %s: %s", where.c_str(),
                     std::strerror(errno));
  }
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return makeError(ErrorCode::kSystemError, "cannot set SO_REUSEADDR on the rendezvous socket for %s: %s",
                     where.c_str(), std::strerror(errno));
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&bind.storage), bind.length) != 0) {
    return makeError(ErrorCode::kSystemError,
                     "cannot bind the rendezvous root to %s: %s (is another job's root using that port?)",
                     where.c_str(), std::strerror(errno));
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return makeError(ErrorCode::kSystemError, "cannot listen on %s: %s", where.c_str(), std::strerror(errno));
  }
  SocketAddress actual;
  actual.length = sizeof(actual.storage);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&actual.storage), &actual.length) != 0) {
    return makeError(ErrorCode::kSystemError, "cannot read back the address bound for %s: %s", where.c_str(),
                     std::strerror(errno));
  }
  *bound = actual;
  return fd;
}

Fd acceptOne(int listenFd, SocketAddress* peer, int* err) {
  peer->length = sizeof(peer->storage);
  int fd =
      ::accept4(listenFd, reinterpret_cast<sockaddr*>(&peer->storage), &peer->length, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return Fd();
  }
  setNoDelay(fd);
  *err = 0;
  return Fd(fd);
}

Result<Fd> connectWithRetry(const SocketAddress& addr, Deadline deadline) {
  using std::chrono::milliseconds;
  const auto start = Clock::now();
  milliseconds pause(10);
  int attempts = 0;
  int lastErr = 0;
  for (;;) {
    ++attempts;
    Fd fd;
    int err = connectOnce(addr, deadline, &fd);
    if (err == 0) return fd;
    lastErr = err;
    if (!transientConnectError(err)) {
      return makeError(ErrorCode::kSystemError, "cannot connect to the rendezvous root at %s: %s",
                       addr.toString().c_str(), std::strerror(err));
    }
    if (deadline.expired()) break;
    // Grow the pause so a thousand ranks waiting for a late root do not hammer it, but stay
    // responsive: the root usually appears within a second.
    // Exact remaining time: remainingMs() rounds down, which would spin through the last millisecond.
    Clock::duration left = deadline.at() - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, left));
    pause = std::min(pause * 2, milliseconds(500));
    if (deadline.expired()) break;
  }
  return makeError(ErrorCode::kTimeout,
                   "could not connect to the rendezvous root at %s within %.1f s (%d attempts, last error: %s); "
                   "is the root process running and listening on that address?",
                   addr.toString().c_str(), secondsSince(start), attempts, std::strerror(lastErr));
}

IoEnd sendAll(int fd, std::span<const uint8_t> data, Clock::time_point until, int* err) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    int e = errno;
    if (n < 0 && e == EINTR) continue;
    if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, pollTimeoutMs(until, INT_MAX));
      if (ready == 0) return IoEnd::kTimedOut;
      continue;
    }
    *err = e;
    return (e == EPIPE || e == ECONNRESET) ? IoEnd::kClosed : IoEnd::kFailed;
  }
  return IoEnd::kDone;
}

bool waitReadable(int fd, Clock::time_point until) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, pollTimeoutMs(until, INT_MAX));
    if (ready > 0) return true;
    if (ready == 0 && Clock::now() >= until) return false;
    // EINTR or an early wake-up from rounding: wait again.
  }
}

int pollTimeoutMs(Clock::time_point until, int cap) {
  if (until == Clock::time_point::max()) return cap;
  auto now = Clock::now();
  if (until <= now) return 0;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(until - now).count();
  long long ms = (us + 999) / 1000;  // round up: waking early only costs another poll
  return static_cast<int>(std::min<long long>(ms, cap));
}

}  // namespace ferry::bootstrap
