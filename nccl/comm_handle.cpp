// struct ncclComm's life cycle: init results, entering and leaving calls, finalize, destroy, abort.
#include "nccl/comm_handle.hpp"

#include <cstring>

using ferry::ErrorCode;
using ferry::Status;

ncclComm::ncclComm(int rank_, int size_, int device_, bool blocking_)
    : rank(rank_), size(size_), device(device_), blocking(blocking_) {}

ncclComm::~ncclComm() = default;

bool ncclComm::finishInit(ferry::Result<std::unique_ptr<ferry::Comm>> created) {
  std::lock_guard<std::mutex> lock(mu_);
  if (created.isOk()) {
    comm_ = std::move(created.value());
    state_ = State::kReady;
  } else {
    error_ = created.status();
    state_ = State::kFailed;
  }
  cv_.notify_all();
  // Destroyed while init ran: nobody else holds the handle any more.
  return abandoned_;
}

Status ncclComm::enter(const char* fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) {
    return ferry::nccl::usageError(fn, "communicator (rank %d of %d) is being destroyed or was aborted", rank, size);
  }
  ++inflight_;
  return Status::ok();
}

void ncclComm::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  --inflight_;
  cv_.notify_all();
}

Status ncclComm::waitReady(const char* fn) {
  std::unique_lock<std::mutex> lock(mu_);
  // A non-blocking init still running: wait for it (it ends by FERRY_TIMEOUT at the latest), or
  // for ncclCommAbort, which must not wait for the init.
  cv_.wait(lock, [&] { return state_ != State::kInitializing || abortedHere_; });
  if (abortedHere_) {
    return Status(ErrorCode::kAborted, std::string(fn) + ": communicator aborted by ncclCommAbort");
  }
  // After ncclCommRevoke only shrinking is meaningful: NCCL's rule, and ferry's shrink is the one
  // call that works on a communicator whose transport was stopped.
  if (revoked_ && std::strcmp(fn, "ncclCommShrink") != 0) {
    return ferry::nccl::usageError(fn,
                                   "communicator (rank %d of %d) was revoked (ncclCommRevoke); only "
                                   "ncclCommShrink, ncclCommDestroy and ncclCommAbort are allowed",
                                   rank, size);
  }
  switch (state_) {
    case State::kFailed:
      return Status(error_.code(), std::string(fn) + ": communicator initialization failed: " + error_.message());
    case State::kFinalized:
      return ferry::nccl::usageError(fn, "communicator (rank %d of %d) was finalized (ncclCommFinalize)", rank, size);
    default: return Status::ok();
  }
}

void ncclComm::noteFailure() {
  // Only failures that made the Comm's error sticky become the asynchronous error: a rejected
  // argument leaves the communicator usable.
  Status sticky = comm_->error();
  if (sticky.isOk()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.isOk()) error_ = sticky;
}

bool ncclComm::abortedHere() {
  std::lock_guard<std::mutex> lock(mu_);
  return abortedHere_;
}

Status ncclComm::asyncStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kInitializing) return Status(ErrorCode::kInProgress, "communicator initialization in progress");
  // Revoked: quiescent once the calls it aborted have returned; their errors are not the comm's.
  if (revoked_) {
    return inflight_ > 0 ? Status(ErrorCode::kInProgress, "communicator revoke in progress") : Status::ok();
  }
  return error_;
}

Status ncclComm::waitInit() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return state_ != State::kInitializing; });
  return state_ == State::kFailed ? error_ : Status::ok();
}

Status ncclComm::finalize(const char* fn) {
  Status st = enter(fn);
  if (!st.isOk()) return st;
  Leave leave{this};
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return state_ != State::kInitializing; });
  if (state_ == State::kFailed) return error_;
  if (revoked_) return ferry::nccl::usageError(fn, "communicator (rank %d of %d) was revoked", rank, size);
  // Every call completed before it returned: there is nothing left to flush.
  state_ = State::kFinalized;
  return Status::ok();
}

Status ncclComm::revoke(const char* fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kInitializing) {
    return ferry::nccl::usageError(fn, "communicator (rank %d of %d) is still initializing", rank, size);
  }
  if (state_ == State::kFinalized) {
    return ferry::nccl::usageError(fn, "communicator (rank %d of %d) was finalized", rank, size);
  }
  revoked_ = true;
  // Thread-safe: calls blocked in the Comm on other threads return kAborted within milliseconds.
  if (comm_) comm_->abort("communicator revoked by ncclCommRevoke");
  cv_.notify_all();
  return Status::ok();
}

void ncclComm::abortCalls(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_) comm_->abort(reason);
}

Status ncclComm::close(ncclComm* c, bool abort) {
  std::unique_lock<std::mutex> lock(c->mu_);
  if (c->closing_) {
    return Status(ErrorCode::kInvalidUsage, "communicator was already destroyed or aborted");
  }
  c->closing_ = true;
  if (abort) {
    c->abortedHere_ = true;
    // Thread-safe: calls blocked in the Comm on other threads return kAborted within milliseconds.
    if (c->comm_) c->comm_->abort("ncclCommAbort called by the application");
    c->cv_.notify_all();  // calls waiting for a non-blocking init give up
  }
  c->cv_.wait(lock, [&] { return c->inflight_ == 0; });
  if (c->state_ == State::kInitializing) {
    c->abandoned_ = true;  // the init thread frees it when Comm::create returns
    return Status::ok();
  }
  lock.unlock();
  delete c;
  return Status::ok();
}
