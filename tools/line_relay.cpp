// Line relay: see line_relay.hpp for why output moves a whole line at a time.
#include "tools/line_relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ferry::tools {
namespace {

constexpr size_t kReadChunk = 64 * 1024;  // bytes per read(): a pipe's default capacity
bool gBroken[3] = {false, false, false};  // per standard fd: a write failed

}  // namespace

int writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n >= 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

bool destBroken(int dest) { return dest >= 0 && dest <= 2 && gBroken[dest]; }

LineRelay::LineRelay(int fd, int dest, std::string prefix) : fd_(fd), dest_(dest), prefix_(std::move(prefix)) {
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

LineRelay::LineRelay(LineRelay&& other) noexcept { *this = std::move(other); }

LineRelay& LineRelay::operator=(LineRelay&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    dest_ = other.dest_;
    prefix_ = std::move(other.prefix_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

void LineRelay::emit(const std::string& text) {
  if (text.empty() || destBroken(dest_)) return;
  if (writeAll(dest_, text.data(), text.size()) != 0 && dest_ >= 0 && dest_ <= 2) {
    gBroken[dest_] = true;
  }
}

LineRelay::Read LineRelay::readOnce() {
  if (fd_ < 0) return Read::kClosed;
  static char buf[kReadChunk];  // one thread; the data leaves before the next read
  ssize_t n = ::read(fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Read::kAgain;
  if (n <= 0) {
    if (!pending_.empty()) emit(prefix_ + pending_ + "\n");
    close();
    return Read::kClosed;
  }
  // All complete lines of this chunk leave in one write.
  std::string out;
  const char* p = buf;
  const char* end = buf + n;
  while (const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p))) {
    out += prefix_;
    out += pending_;
    out.append(p, nl + 1);
    pending_.clear();
    p = nl + 1;
  }
  pending_.append(p, end);
  if (pending_.size() >= kMaxLine) {
    out += prefix_ + pending_ + "\n";
    pending_.clear();
  }
  emit(out);
  return Read::kData;
}

void LineRelay::drain(int maxReads) {
  for (int i = 0; i < maxReads && readOnce() == Read::kData; ++i) {
  }
}

void LineRelay::finish() {
  drain();
  if (fd_ >= 0 && !pending_.empty()) emit(prefix_ + pending_ + "\n");
  close();
}

void LineRelay::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pending_.clear();
}

}  // namespace ferry::tools
