// Deadlines and backoff: every blocking wait in ferry takes a Deadline and pauses with a Backoff.
//
// Backoff spins briefly (the common case of a peer a few microseconds behind), then yields, then
// sleeps with a growing interval capped at 100 us, so that 8 ranks on 2 cores still make progress.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdint>

namespace ferry {

using Clock = std::chrono::steady_clock;

/// A point in time after which a wait fails. Default-constructed: never expires.
class Deadline {
 public:
  Deadline() : at_(Clock::time_point::max()) {}
  /// Expires `seconds` from now. Seconds outside (0, 1e9), infinity (FERRY_TIMEOUT=none) and NaN
  /// included, never expire: 1e9 s is 1e18 ns, the most the clock's int64 nanoseconds hold with room
  /// for now(). User input is checked before it gets here (config.cpp's Seconds knobs).
  static Deadline after(double seconds) { return after(seconds, Clock::now()); }
  /// Expires `seconds` after `from`: for a caller that has just read the clock itself.
  static Deadline after(double seconds, Clock::time_point from) {
    Deadline d;
    if (seconds > 0 && seconds < 1e9) {
      d.at_ = from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    }
    return d;
  }
  bool expired() const { return Clock::now() >= at_; }
  /// Remaining milliseconds rounded up (so a poll() for that long does not wake early and spin
  /// through the last millisecond), clamped to [0, INT32_MAX].
  int remainingMs() const {
    if (at_ == Clock::time_point::max()) return INT32_MAX;
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
    if (us <= 0) return 0;
    auto ms = (us + 999) / 1000;
    return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
  }
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

/// Seconds since an arbitrary origin, for durations in messages.
inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Spin, then yield, then sleep: the pause between polls of a wait loop.
class Backoff {
 public:
  void pause() {
    ++n_;
    if (n_ < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (n_ < kSpins + kYields) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs_};
      nanosleep(&ts, nullptr);
      if (sleepNs_ < kMaxSleepNs) sleepNs_ *= 2;
    }
  }
  /// pause(), but a sleep goes to `sleep(ns)` first: a transport that can block until its sockets
  /// have work (Transport::waitForWork) wakes at once when they do; `sleep` returns false when it
  /// cannot, and the pause sleeps as usual.
  template <class Sleep>
  void pause(Sleep&& sleep) {
    if (n_ + 1 < kSpins + kYields) {
      pause();
      return;
    }
    ++n_;
    if (!sleep(sleepNs_)) {
      timespec ts{0, sleepNs_};
      nanosleep(&ts, nullptr);
    }
    if (sleepNs_ < kMaxSleepNs) sleepNs_ *= 2;
  }
  void reset() {
    n_ = 0;
    sleepNs_ = kMinSleepNs;
  }

 private:
  static constexpr uint32_t kSpins = 64;
  static constexpr uint32_t kYields = 64;
  static constexpr long kMinSleepNs = 2000;
  static constexpr long kMaxSleepNs = 100000;
  uint32_t n_ = 0;
  long sleepNs_ = kMinSleepNs;
};

}  // namespace ferry
