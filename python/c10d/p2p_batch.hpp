// The c10d backend's batch of host send/recv calls (backend.hpp says when a batch starts).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ferry/comm.hpp"
#include "python/c10d/any_source.hpp"
#include "python/c10d/tensor_args.hpp"
#include "python/c10d/work.hpp"

namespace ferry::torch_c10d {

/// Sends and receives waiting to be handed to the progress thread as one Comm::sendRecv batch.
/// Shared with the Works it holds (they start the batch when waited on), and outlived by them.
class P2pBatch {
 public:
  P2pBatch(Comm* comm, std::shared_ptr<AnySource> anySource) : comm_(comm), anySource_(std::move(anySource)) {}

  /// `buf` is the transfer's tensor: kept alive until the batch ran, and copied back then when staged.
  void add(const P2pOp& op, Buffer buf, c10::intrusive_ptr<FerryWork> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.push_back(op);
    keep_.push_back(std::move(buf));
    works_.push_back(std::move(work));
  }

  /// Queue what is batched as one Comm::sendRecv (nothing when empty).
  void flush() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ops_.empty() || comm_ == nullptr) return;
    auto done = std::make_shared<Completion>(std::move(works_));
    comm_->enqueue([done, ops = std::move(ops_), keep = std::move(keep_), any = anySource_](Comm& c) {
      any->noteReceives(ops);
      Status st = c.sendRecv(ops);
      if (st.isOk()) st = writeBack(keep);
      done->complete(st);
      return st;
    });
    ops_.clear();
    keep_.clear();
    works_.clear();
  }

  /// Flush, then forget the communicator (it is being destroyed).
  void detach() {
    flush();
    std::lock_guard<std::mutex> lock(mutex_);
    comm_ = nullptr;
  }

 private:
  std::mutex mutex_;
  Comm* comm_;
  std::shared_ptr<AnySource> anySource_;
  std::vector<P2pOp> ops_;
  std::vector<Buffer> keep_;  // the tensors' storage stays alive until the batch ran
  std::vector<c10::intrusive_ptr<FerryWork>> works_;
};

}  // namespace ferry::torch_c10d
