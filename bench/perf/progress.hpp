// Progress of a long sweep on the terminal: one line on stderr, rewritten in place, naming the
// current collective and size and the elapsed time. Nothing at all when no terminal is there.
//
// Which terminal. A rank started directly has its own stderr; a rank started by a launcher that
// relays output (ferryrun, mpirun) has a pipe, and the launcher's stderr is what the user sees.
// So the line goes to our stderr when it is a terminal, else to our parent's stderr when that is
// a terminal (Linux /proc), else nowhere: `ferry-perf ... 2>log` and `ferryrun ... 2>log` stay
// clean, while `ferryrun ... > table.txt` still shows progress.
//
// The line is drawn as "\r<erase line>text\r": the cursor stays in column 0, so any line the
// launcher relays afterwards (a table row, longer than the progress text) overwrites it. Before
// printing a short line, callers clear() the progress line.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ferry::perf {

class Progress {
 public:
  /// `tool` starts the line; `enabled`: this rank may draw (rank 0 only). Finds the terminal and
  /// starts the redraw thread.
  Progress(std::string tool, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// True when a terminal was found.
  bool active() const { return fd_ >= 0; }
  /// Show `what`, followed by the time since construction; redrawn about four times a second.
  void set(const std::string& what);
  /// Erase the line until the next set().
  void clear();

  /// The file descriptor progress goes to, or -1: stderr if a terminal, else the parent's.
  static int openTerminal();

 private:
  void draw();  // with mutex_ held
  void loop();

  std::string tool_;
  int fd_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string text_;
  bool visible_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ferry::perf
