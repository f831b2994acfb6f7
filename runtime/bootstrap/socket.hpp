// Thin, deadline-aware wrappers over the BSD socket calls the store needs.
//
// Everything is non-blocking: the server multiplexes with poll() and must never sit in a call for
// one peer, and the client bounds every wait by a deadline. Helpers report errno-level outcomes;
// the callers turn them into sentences that name the root, the rank and the round.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <string>

#include "ferry/status.hpp"
#include "base/deadline.hpp"
#include "runtime/bootstrap/store.hpp"

namespace ferry::bootstrap {

/// An owned file descriptor, closed on destruction.
class Fd {
 public:
  /// No descriptor.
  Fd() = default;
  /// Take ownership of `fd` (may be -1).
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }          ///< the descriptor, still owned
  bool valid() const { return fd_ >= 0; }  ///< holds a descriptor
  /// Close now (idempotent).
  void reset();

 private:
  int fd_ = -1;
};

/// A non-blocking listening socket on `bind` with SO_REUSEADDR; `bound` receives the actual address.
Result<Fd> listenOn(const SocketAddress& bind, SocketAddress* bound);

/// Accept one pending connection (non-blocking, close-on-exec, TCP_NODELAY). Returns an invalid Fd
/// and sets *err (EAGAIN when nothing is pending) on failure.
Fd acceptOne(int listenFd, SocketAddress* peer, int* err);

/// Connect to `addr`, retrying refused and other transient failures with a growing pause until
/// `deadline` (ranks may start before the root listens). The socket is non-blocking.
Result<Fd> connectWithRetry(const SocketAddress& addr, Deadline deadline);

/// How a bounded send or receive ended.
enum class IoEnd { kDone, kClosed, kTimedOut, kFailed };

/// Send all of `data` before `until`; *err holds errno for kFailed.
IoEnd sendAll(int fd, std::span<const uint8_t> data, Clock::time_point until, int* err);

/// Wait until `fd` is readable (or closed) before `until`; false on timeout.
bool waitReadable(int fd, Clock::time_point until);

/// Milliseconds from now until `until` for poll(), rounded up, clamped to [0, cap].
int pollTimeoutMs(Clock::time_point until, int cap);

}  // namespace ferry::bootstrap
