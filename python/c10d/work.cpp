// Work objects of the c10d backend (work.hpp).
#include "python/c10d/work.hpp"

#include <ATen/core/jit_type.h>

#include <stdexcept>

namespace ferry::torch_c10d {

FerryWork::FerryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::function<void()> start,
                     std::vector<c10::Device> devices)
    : c10d::Work(rank, type), outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), std::move(devices))),
      start_(std::move(start)) {}

void FerryWork::start() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lock(start_mutex_);
    f.swap(start_);
  }
  if (f) f();
}

bool FerryWork::isCompleted() {
  start();
  return c10d::Work::isCompleted();
}

bool FerryWork::wait(std::chrono::milliseconds timeout) {
  start();
  return c10d::Work::wait(timeout);
}

c10::intrusive_ptr<c10::ivalue::Future> FerryWork::getFuture() {
  start();
  return future_;
}

int FerryWork::sourceRank() const {
  const int source = source_.load();
  // torch's own error for a Work that is not a completed receive from any source.
  return source >= 0 ? source : c10d::Work::sourceRank();
}

void FerryWork::complete(const Status& status) {
  std::call_once(completed_once_, [&] {
    if (status.isOk()) {
      finish();
      future_->markCompleted(c10::IValue(outputs_));
    } else {
      // torch shows the exception's message as the Python error: ferry's sentence, whole.
      auto error = std::make_exception_ptr(std::runtime_error("ferry: " + status.toString()));
      finish(error);
      future_->setError(error);
    }
  });
}

Completion::~Completion() {
  complete(Status(ErrorCode::kAborted, "the operation never ran: its process group was destroyed first"));
}

void Completion::complete(const Status& status) {
  for (auto& w : works_) w->complete(status);
  works_.clear();
}

}  // namespace ferry::torch_c10d
