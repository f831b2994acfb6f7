// Terminal progress line. See progress.hpp.
#include "bench/perf/progress.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

namespace ferry::perf {
namespace {

bool isTerminalPath(const std::string& path) { return path.starts_with("/dev/pts/") || path.starts_with("/dev/tty"); }

void writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;  // a terminal that went away: progress is best effort
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int Progress::openTerminal() {
  if (::isatty(STDERR_FILENO)) return ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/%d/fd/2", static_cast<int>(::getppid()));
  char target[256] = {};
  const ssize_t n = ::readlink(link, target, sizeof(target) - 1);
  if (n <= 0 || !isTerminalPath(std::string(target, static_cast<size_t>(n)))) return -1;
  const int fd = ::open(target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0 && !::isatty(fd)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

Progress::Progress(std::string tool, bool enabled) : tool_(std::move(tool)), start_(std::chrono::steady_clock::now()) {
  if (!enabled) return;
  fd_ = openTerminal();
  if (fd_ >= 0) thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    if (visible_) writeAll(fd_, "\r\033[K");
  }
  wake_.notify_all();
  thread_.join();
  ::close(fd_);
}

void Progress::set(const std::string& what) {
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  text_ = what;
  visible_ = true;
  draw();
}

void Progress::clear() {
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (visible_) writeAll(fd_, "\r\033[K");
  visible_ = false;
}

void Progress::draw() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char tail[48];
  std::snprintf(tail, sizeof(tail), "  %.1f s", elapsed);
  std::string line = tool_ + ": " + text_ + tail;
  winsize ws{};
  // A line wider than the terminal would wrap, and "\r" would then return to the wrong row.
  if (::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col) line.resize(ws.ws_col - 1);
  writeAll(fd_, "\r\033[K" + line + "\r");
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(250));
    if (!stop_ && visible_) draw();
  }
}

}  // namespace ferry::perf
