// The communicator's background queue: operations queued by Comm::enqueue run in order on one
// progress thread, started on first use. Blocking calls from other threads first wait until the
// queue is idle, then run on their own thread under the same execution lock, so a communicator
// is never driven by two threads at once and calls keep the order in which they were issued.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "ferry/work.hpp"

namespace ferry {

class WorkQueue {
 public:
  using Op = std::function<Status()>;
  ~WorkQueue();

  /// Queue `op`; it runs after everything queued before it.
  std::shared_ptr<Work> enqueue(Op op);
  /// For a blocking call: wait until the queue is idle and take the execution lock. On the
  /// progress thread itself (an op calling the communicator) returns without locking.
  std::unique_lock<std::mutex> acquire();
  /// Fail every queued op that has not started with `why`, wait for the running one, stop the thread.
  void shutdown(const Status& why);

 private:
  void loop();

  struct Item {
    Op op;
    std::shared_ptr<Work> work;
  };
  std::mutex mutex_;            // guards queue_, running_, stop_
  std::condition_variable cv_;  // queue changes
  std::deque<Item> queue_;
  bool running_ = false;
  bool stop_ = false;
  std::mutex exec_;  // held while any operation runs
  std::thread thread_;
  std::thread::id threadId_;
  // Set (under mutex_) when the first op is queued: until then a blocking call has no queue to
  // wait for and takes only the execution lock (two lock round trips less on every small call).
  std::atomic<bool> started_{false};
};

}  // namespace ferry
