#include "runtime/work_queue.hpp"

namespace ferry {

bool Work::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

void Work::finish(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = std::move(status);
    done_ = true;
  }
  cv_.notify_all();
}

void ExecMutex::lockSlow() {
  // Mark the lock contended, then sleep while it stays held: the holder's unlock sees 2 and wakes one.
  uint32_t seen = state_.exchange(2, std::memory_order_acquire);
  while (seen != 0) {
    state_.wait(2, std::memory_order_relaxed);
    seen = state_.exchange(2, std::memory_order_acquire);
  }
}

WorkQueue::~WorkQueue() {
  shutdown(Status(ErrorCode::kAborted, "the communicator was destroyed before this operation ran"));
}

std::shared_ptr<Work> WorkQueue::enqueue(Op op) {
  auto work = std::make_shared<Work>();
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_) {
    work->finish(Status(ErrorCode::kInvalidUsage, "operation queued on a communicator being destroyed"));
    return work;
  }
  queue_.push_back({std::move(op), work});
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
    threadId_ = thread_.get_id();
    started_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  return work;
}

std::unique_lock<ExecMutex> WorkQueue::acquireQueued() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (thread_.joinable() && std::this_thread::get_id() == threadId_) return {};
    cv_.wait(lock, [&] { return queue_.empty() && !running_; });
  }
  return std::unique_lock<ExecMutex>(exec_);
}

void WorkQueue::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    Status st;
    {
      std::lock_guard<ExecMutex> exec(exec_);
      st = item.op();
    }
    // Finish before going idle: a blocking call that waited for the queue to drain must find
    // every earlier work done.
    item.work->finish(std::move(st));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
    cv_.notify_all();
  }
}

void WorkQueue::shutdown(const Status& why) {
  std::deque<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& item : dropped) item.work->finish(why);
  if (thread_.joinable()) thread_.join();
}

}  // namespace ferry
