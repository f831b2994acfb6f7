// Line relay: copies a child's output pipe to one of our fds, a whole prefixed line at a time.
//
// ferryrun gives every rank pipes for stdout and stderr and is the only writer of its own. Writing
// whole lines only, each in one go from one thread, is what keeps the lines of different ranks from
// mixing mid-line, whatever sizes the ranks' own writes had. A partial line therefore waits for its
// newline; a line that reaches kMaxLine bytes is cut there (the rest follows on a new prefixed line)
// so that memory stays bounded; a last line without a newline gets one when the pipe closes.
#pragma once

#include <cstddef>
#include <string>

namespace ferry::tools {

/// Lines longer than this are cut: the first kMaxLine bytes go out as a line of their own.
constexpr size_t kMaxLine = 1 << 20;

/// Writes all of `data` to `fd`, waiting in poll() when fd is non-blocking and full.
/// Returns 0, or the errno that stopped it (EPIPE when nobody reads fd any more).
int writeAll(int fd, const char* data, size_t size);

/// True once a write to `dest` failed (a closed pipe, say): nothing more is written there.
bool destBroken(int dest);

/// The non-blocking read end of one child pipe, relayed line by line to `dest`. Owns the fd.
class LineRelay {
 public:
  /// What one read() found.
  enum class Read { kData, kAgain, kClosed };

  LineRelay() = default;
  /// Relays `fd` (made non-blocking here) to `dest`, putting `prefix` before every line.
  LineRelay(int fd, int dest, std::string prefix);
  LineRelay(LineRelay&& other) noexcept;
  LineRelay& operator=(LineRelay&& other) noexcept;
  LineRelay(const LineRelay&) = delete;
  LineRelay& operator=(const LineRelay&) = delete;
  ~LineRelay() { close(); }

  /// The pipe's fd, -1 once closed.
  int fd() const { return fd_; }
  /// The fd the lines go to.
  int dest() const { return dest_; }

  /// One read(): relays the complete lines, keeps a partial one. At EOF (or a read error) the
  /// partial line is completed with a newline and the pipe closed.
  Read readOnce();
  /// Reads until the pipe has nothing more right now (at most `maxReads` reads, so that a writer
  /// that never pauses cannot keep us here).
  void drain(int maxReads = 64);
  /// Drains, completes the partial line and closes, even if some process still holds the pipe.
  void finish();
  /// Closes the pipe and drops the partial line; a process writing to it gets SIGPIPE.
  void close();

 private:
  void emit(const std::string& text);

  int fd_ = -1;
  int dest_ = 1;
  std::string prefix_;
  std::string pending_;  // the start of a line whose newline has not arrived yet
};

}  // namespace ferry::tools
