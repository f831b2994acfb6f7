#include "runtime/watchdog.hpp"

#include <cstring>

#include "collectives/tag.hpp"
#include "runtime/base/log.hpp"

namespace ferry {
namespace {
constexpr size_t kControlBytes = 2048;
constexpr uint64_t kControlTag = coll::makeTag(coll::TagClass::kControl, 0, 0);
}  // namespace

Watchdog::Watchdog(transport::Transport* transport, int rank, std::vector<PeerInfo> peers, double checkSeconds)
    : transport_(transport), rank_(rank), peers_(std::move(peers)), checkSeconds_(checkSeconds),
      nextCheck_(Clock::now()), controlBuffer_(kControlBytes) {
  const PeerInfo& me = peers_[rank_];
  watchedMask_.assign(peers_.size(), false);
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    watchedMask_[r] = r != rank_ && peers_[r].hostId == me.hostId && peers_[r].pidNamespace == me.pidNamespace;
  }
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  if (transport_ != nullptr && control_.pending()) {
    transport_->cancel(&control_);
    Deadline grace = Deadline::after(0.05);
    while (control_.pending() && !grace.expired()) transport_->progress();
  }
  transport_ = nullptr;
}

Status Watchdog::start() {
  if (transport_ == nullptr) return Status::ok();
  return transport_->postRecv(transport::kAnyPeer, kControlTag, coll::kClassMask, controlBuffer_.data(),
                              controlBuffer_.size(), &control_);
}

Status Watchdog::checkControl() {
  if (control_.state != transport::Request::State::kDone) return Status::ok();
  int32_t code = 0;
  std::string text = "(no reason given)";
  if (control_.received >= 4) {
    std::memcpy(&code, controlBuffer_.data(), 4);
    text.assign(controlBuffer_.data() + 4, control_.received - 4);
  }
  ErrorCode ec = code > 0 && code <= static_cast<int32_t>(ErrorCode::kAborted) ? static_cast<ErrorCode>(code)
                                                                             : ErrorCode::kRemoteError;
  if (ec == ErrorCode::kInvalidArgument || ec == ErrorCode::kInvalidUsage) ec = ErrorCode::kRemoteError;
  return makeError(ec, "rank %d failed and reported: %s", control_.source, text.c_str());
}

Status Watchdog::pollReports() {
  FERRY_TRY(abortStatus());
  // Called from sub-communicators' waits while this communicator's call holds it: only they drive
  // its transport meanwhile, one at a time.
  std::unique_lock<std::mutex> lock(reportsMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::ok();
  if (transport_ != nullptr) transport_->progress();
  return checkControl();
}

Status Watchdog::poll(int peer) {
  FERRY_TRY(abortStatus());
  FERRY_TRY(checkControl());
  if (parent_ != nullptr) FERRY_TRY(parent_->pollReports());
  // Only the peer this rank waits for: a peer that finished its part and exited is no error, and
  // a dead rank further away is reported by the ranks that wait for it.
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !watchedMask_[peer]) return Status::ok();
  Clock::time_point now = Clock::now();
  if (now >= nextCheck_) {
    nextCheck_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(checkSeconds_));
    if (processGone(peers_[peer].pid)) {
      return makeError(ErrorCode::kRemoteError, "rank %d (pid %d on %s) died", peer, static_cast<int>(peers_[peer].pid),
                       peers_[peer].hostname.c_str());
    }
  }
  return Status::ok();
}

void Watchdog::abort(const std::string& reason) {
  abortReason_ = reason;
  aborted_.store(true, std::memory_order_release);
}

void Watchdog::report(const Status& why) {
  if (transport_ == nullptr) return;
  // A rank that learned of the failure from another rank's report does not echo it.
  if (control_.state == transport::Request::State::kDone) return;
  std::string payload(4, '\0');
  int32_t code = static_cast<int32_t>(why.code());
  std::memcpy(payload.data(), &code, 4);
  payload += why.message().substr(0, kControlBytes - 4);
  reports_.push_back(std::move(payload));
  const std::string& p = reports_.back();
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    if (r == rank_ || !transport_->peerError(r).isOk()) continue;
    reportRequests_.push_back(std::make_unique<transport::Request>());
    if (!transport_->postSend(r, kControlTag, p.data(), p.size(), reportRequests_.back().get()).isOk()) {
      reportRequests_.pop_back();
    }
  }
  Deadline deadline = Deadline::after(0.5);  // peers may be descheduled on an oversubscribed host
  Backoff backoff;
  for (auto& req : reportRequests_) {
    while (req->pending() && !deadline.expired()) {
      if (!transport_->progress()) backoff.pause();
    }
  }
  FERRY_INFO(log::kInit, "told %zu peers that this rank failed: %s", reportRequests_.size(), why.message().c_str());
}

}  // namespace ferry
