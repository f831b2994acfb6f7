// Work: a collective running in the background, so computation can overlap communication.
#pragma once

#include <condition_variable>
#include <mutex>

#include "ferry/status.hpp"

namespace ferry {

/// Handle of one operation queued with Comm::enqueue or a Comm::*Async call. Operations of a
/// communicator run one after another, in the order they were queued, on the communicator's
/// progress thread; each carries its own deadline (FERRY_TIMEOUT), so wait() always returns.
class Work {
 public:
  /// True once the operation has finished, successfully or not.
  bool done() const;
  /// Block until the operation has finished; returns its status.
  Status wait();

  /// Used by the runtime: record the outcome and wake waiters.
  void finish(Status status);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

}  // namespace ferry
