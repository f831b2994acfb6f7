// The communicator's background queue: operations queued by Comm::enqueue run in order on one
// progress thread, started on first use. Blocking calls from other threads first wait until the
// queue is idle, then run on their own thread under the same execution lock, so a communicator
// is never driven by two threads at once and calls keep the order in which they were issued.
#pragma once

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "ferry/work.hpp"

namespace ferry {

/// A mutex for the execution lock: lock and unlock are one atomic operation each while nobody
/// waits (every small call takes it; glibc's mutex is two calls into libc), and a contended lock
/// sleeps in the kernel (std::atomic::wait) instead of spinning.
class ExecMutex {
 public:
  void lock() {
    uint32_t free = 0;
    if (!state_.compare_exchange_strong(free, 1, std::memory_order_acquire, std::memory_order_relaxed)) lockSlow();
  }
  bool try_lock() {
    uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) state_.notify_one();
  }

 private:
  void lockSlow();
  std::atomic<uint32_t> state_{0};  // 0 free, 1 held, 2 held and someone may sleep on it
};

class WorkQueue {
 public:
  using Op = std::function<Status()>;
  ~WorkQueue();

  /// Queue `op`; it runs after everything queued before it.
  std::shared_ptr<Work> enqueue(Op op);
  /// For a blocking call: wait until the queue is idle and take the execution lock. On the
  /// progress thread itself (an op calling the communicator) returns without locking.
  std::unique_lock<ExecMutex> acquire() {
    // Nothing was ever queued: no progress thread, no queue to drain. (An op queued by another
    // thread meanwhile runs under exec_ after this call, as if it had been queued after it.)
    if (!started_.load(std::memory_order_acquire)) return std::unique_lock<ExecMutex>(exec_);
    return acquireQueued();
  }
  /// Fail every queued op that has not started with `why`, wait for the running one, stop the thread.
  void shutdown(const Status& why);

 private:
  void loop();
  std::unique_lock<ExecMutex> acquireQueued();

  struct Item {
    Op op;
    std::shared_ptr<Work> work;
  };
  std::mutex mutex_;            // guards queue_, running_, stop_
  std::condition_variable cv_;  // queue changes
  std::deque<Item> queue_;
  bool running_ = false;
  bool stop_ = false;
  ExecMutex exec_;  // held while any operation runs
  std::thread thread_;
  std::thread::id threadId_;
  // Set (under mutex_) when the first op is queued: until then a blocking call has no queue to
  // wait for and takes only the execution lock (two lock round trips less on every small call).
  std::atomic<bool> started_{false};
};

}  // namespace ferry
