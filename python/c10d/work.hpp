// Work objects of the c10d backend: one per call, completed from ferry's progress thread.
//
// A call is queued on the communicator's progress thread (Comm::enqueue) and returns at once with a
// FerryWork. When the operation has run, the progress thread completes the Work (wait() returns or
// throws ferry's error) and its future (torch's then() callbacks run there; DDP's reducer relies on
// them). An operation the communicator drops unrun (it was destroyed first) still completes its
// Work, with an error: a Completion owns that promise.
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/status.hpp"
#include "python/c10d/compat.hpp"

namespace ferry::torch_c10d {

class FerryWork : public c10d::Work {
 public:
  /// `outputs` are the tensors the call writes (the future's value); `start` is called before any
  /// wait on a Work whose operation may not be queued yet (the lazily batched send/recv); `devices`
  /// are the CUDA devices of stream-ordered outputs (the future then records events on them).
  FerryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::function<void()> start = nullptr,
            std::vector<c10::Device> devices = {});

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  /// The sender of a receive from any source (torch's Work._source_rank()), once it completed.
  int sourceRank() const override;
  /// Record the sender (before complete()).
  void setSourceRank(int rank) { source_ = rank; }

  /// Record the outcome, wake waiters, complete the future (once; later calls are ignored).
  void complete(const Status& status);

 private:
  void start();

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag completed_once_;
  std::mutex start_mutex_;
  std::function<void()> start_;
  std::atomic<int> source_{-1};
};

/// The promise to complete a FerryWork: complete() once the operation ran; destroyed without that,
/// it completes the Work with an error saying the operation never ran.
class Completion {
 public:
  explicit Completion(std::vector<c10::intrusive_ptr<FerryWork>> works) : works_(std::move(works)) {}
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  void complete(const Status& status);

 private:
  std::vector<c10::intrusive_ptr<FerryWork>> works_;
};

}  // namespace ferry::torch_c10d
