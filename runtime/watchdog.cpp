#include "runtime/watchdog.hpp"

#include <cstring>

#include "collectives/tag.hpp"
#include "base/log.hpp"
#include "runtime/state_dump.hpp"

namespace ferry {
namespace {
constexpr size_t kControlBytes = 2048;
// Reports: [i32 error code][text]. A report passed on (Watchdog::report) sets this bit in the code,
// and its text is the first report as its receiver worded it, source included.
constexpr int32_t kPassedOn = 1 << 30;
constexpr uint64_t kControlTag = coll::makeTag(coll::TagClass::kControl, 0, 0);
constexpr uint64_t kStatusTag = coll::makeTag(coll::TagClass::kStatus, 0, 0);
constexpr size_t kStatusBytes = 1024;
// Status messages: [u32 kind][u64 seq asked] then, for an answer, [u64 the answerer's call]
// [u8 active][its state line].
constexpr uint32_t kQuery = 1, kAnswer = 2;
constexpr size_t kStatusHead = 4 + 8;
// An answer after the head: call number (8), active (1), the call's packed description (8) and
// count (8), then the state line.
constexpr size_t kAnswerFixed = 8 + 1 + 8 + 8;
}  // namespace

Watchdog::Watchdog(transport::Transport* transport, int rank, std::vector<PeerInfo> peers, double checkSeconds)
    : transport_(transport), rank_(rank), peers_(std::move(peers)), checkSeconds_(checkSeconds),
      nextCheck_(Clock::now()), controlBuffer_(kControlBytes), statusBuffer_(kStatusBytes) {
  const PeerInfo& me = peers_[rank_];
  watchedMask_.assign(peers_.size(), false);
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    watchedMask_[r] = r != rank_ && peers_[r].hostId == me.hostId && peers_[r].pidNamespace == me.pidNamespace;
  }
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  if (transport_ != nullptr) {
    if (control_.pending()) transport_->cancel(&control_);
    if (status_.pending()) transport_->cancel(&status_);
    for (Outgoing& o : statusSends_) {
      if (o.request.pending()) transport_->cancel(&o.request);
    }
    Deadline grace = Deadline::after(0.05);
    auto pending = [&] {
      bool any = control_.pending() || status_.pending();
      for (Outgoing& o : statusSends_) any |= o.request.pending();
      return any;
    };
    while (pending() && !grace.expired()) transport_->progress();
  }
  transport_ = nullptr;
}

Status Watchdog::start() {
  if (transport_ == nullptr) return Status::ok();
  answers_.assign(peers_.size(), Answer{});
  FERRY_TRY(transport_->postRecv(transport::kAnyPeer, kStatusTag, coll::kClassMask, statusBuffer_.data(),
                                 statusBuffer_.size(), &status_));
  return transport_->postRecv(transport::kAnyPeer, kControlTag, coll::kClassMask, controlBuffer_.data(),
                              controlBuffer_.size(), &control_);
}

void Watchdog::checkStatus() {
  // Sends that finished (or failed: the peer is gone) are retired from the front.
  while (!statusSends_.empty() && !statusSends_.front().request.pending()) statusSends_.pop_front();
  if (transport_ == nullptr || status_.state == transport::Request::State::kPending ||
      status_.state == transport::Request::State::kIdle) {
    return;
  }
  if (status_.state == transport::Request::State::kDone && status_.received >= kStatusHead && status_.source >= 0 &&
      status_.source < static_cast<int>(peers_.size())) {
    uint32_t kind = 0;
    uint64_t seq = 0;
    std::memcpy(&kind, statusBuffer_.data(), 4);
    std::memcpy(&seq, statusBuffer_.data() + 4, 8);
    const int from = status_.source;
    if (kind == kQuery && trace_ != nullptr) {
      std::string payload(kStatusHead + kAnswerFixed, '\0');
      const uint64_t at = trace_->seq.load(std::memory_order_relaxed);
      const uint8_t active = trace_->active.load(std::memory_order_acquire) ? 1 : 0;
      std::memcpy(payload.data(), &kAnswer, 4);
      std::memcpy(payload.data() + 4, &seq, 8);
      std::memcpy(payload.data() + 12, &at, 8);
      payload[20] = static_cast<char>(active);
      const uint64_t desc = trace_->desc.load(std::memory_order_relaxed);
      const uint64_t count = trace_->count.load(std::memory_order_relaxed);
      std::memcpy(payload.data() + 21, &desc, 8);
      std::memcpy(payload.data() + 29, &count, 8);
      payload += describeState(commId_, rank_, size_, *trace_).substr(0, kStatusBytes - payload.size());
      statusSends_.emplace_back();
      Outgoing& o = statusSends_.back();
      o.payload = std::move(payload);
      if (!transport_->postSend(from, kStatusTag, o.payload.data(), o.payload.size(), &o.request).isOk()) {
        statusSends_.pop_back();
      }
    } else if (kind == kAnswer && status_.received >= kStatusHead + kAnswerFixed) {
      Answer& a = answers_[static_cast<size_t>(from)];
      a.seq = seq;
      std::memcpy(&a.at, statusBuffer_.data() + 12, 8);
      a.active = statusBuffer_[20] != 0;
      uint64_t desc = 0, count = 0;
      std::memcpy(&desc, statusBuffer_.data() + 21, 8);
      std::memcpy(&count, statusBuffer_.data() + 29, 8);
      a.call = coll::unpackDesc(desc, count);
      a.hasCall = true;
      a.state.assign(statusBuffer_.data() + kStatusHead + kAnswerFixed, status_.received - kStatusHead - kAnswerFixed);
    }
  }
  // A failed receive (a peer's connection broke under it) is posted again too: others may answer.
  (void)transport_->postRecv(transport::kAnyPeer, kStatusTag, coll::kClassMask, statusBuffer_.data(),
                             statusBuffer_.size(), &status_);
}

void Watchdog::askAll(uint64_t seq, std::vector<bool>* asked) {
  const int n = static_cast<int>(peers_.size());
  asked->assign(static_cast<size_t>(n), false);
  for (int r = 0; r < n; ++r) {
    if (r == rank_ || !transport_->peerError(r).isOk()) continue;
    std::string payload(kStatusHead, '\0');
    std::memcpy(payload.data(), &kQuery, 4);
    std::memcpy(payload.data() + 4, &seq, 8);
    statusSends_.emplace_back();
    Outgoing& o = statusSends_.back();
    o.payload = std::move(payload);
    if (transport_->postSend(r, kStatusTag, o.payload.data(), o.payload.size(), &o.request).isOk()) {
      (*asked)[static_cast<size_t>(r)] = true;
    } else {
      statusSends_.pop_back();
    }
  }
}

Status Watchdog::probeCalls(uint64_t seq, const coll::OpDesc& mine) {
  if (transport_ == nullptr || trace_ == nullptr) return Status::ok();
  if (probedSeq_ != seq) {
    probedSeq_ = seq;
    std::vector<bool> asked;
    askAll(seq, &asked);
    return Status::ok();
  }
  checkStatus();
  std::string differ;
  for (size_t r = 0; r < answers_.size(); ++r) {
    const Answer& a = answers_[r];
    if (a.seq == seq && a.at == seq && a.active && a.hasCall && !coll::sameCall(a.call, mine)) {
      differ += "; rank " + std::to_string(r) + " runs " + coll::describe(a.call);
    }
  }
  if (differ.empty()) return Status::ok();
  return makeError(ErrorCode::kMismatch, "collective mismatch at call #%llu: rank %d runs %s%s",
                   static_cast<unsigned long long>(seq), rank_, coll::describe(mine).c_str(), differ.c_str());
}

std::string Watchdog::whoIsBehind(uint64_t seq, double seconds, const coll::OpDesc& mine, bool* mismatch,
                                  Status* reported) {
  *mismatch = false;
  *reported = Status::ok();
  if (transport_ == nullptr || trace_ == nullptr) return "";
  const int n = static_cast<int>(peers_.size());
  std::vector<bool> asked;
  askAll(seq, &asked);
  auto answered = [&](int r) { return answers_[static_cast<size_t>(r)].seq == seq; };
  Deadline deadline = Deadline::after(seconds);
  Backoff backoff;
  for (;;) {
    bool all = true;
    for (int r = 0; r < n; ++r) all &= !asked[static_cast<size_t>(r)] || answered(r);
    if (all || deadline.expired()) break;
    if (transport_->progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
    checkStatus();
    *reported = checkControl();
    if (reported->isOk() && parent_ != nullptr) *reported = parent_->pollReports();
    if (!reported->isOk()) return "";
  }
  std::string behind, differ;
  int count = 0;
  for (int r = 0; r < n; ++r) {
    if (r == rank_) continue;
    const Answer& a = answers_[static_cast<size_t>(r)];
    std::string why;
    if (!asked[static_cast<size_t>(r)]) {
      why = "its connection failed";
    } else if (!answered(r)) {
      why = "no answer within " + std::to_string(static_cast<int>(seconds * 1000)) +
            " ms: not inside ferry (busy elsewhere, stopped or hung)";
    } else if (a.at < seq || (a.at == seq && !a.active)) {
      why = a.state;
    } else {
      if (a.at == seq && a.hasCall && !coll::sameCall(a.call, mine)) {
        differ +=
            (differ.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " runs " + coll::describe(a.call);
      }
      continue;  // in this call, or past it
    }
    behind += (behind.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + why;
    ++count;
  }
  char head[96];
  std::snprintf(head, sizeof(head), "ranks that have not reached call #%llu: ", static_cast<unsigned long long>(seq));
  std::string text = std::string(head) + (count == 0 ? "none (every rank that answered is in it)" : behind);
  if (!differ.empty()) {
    *mismatch = true;
    text = "collective mismatch at call #" + std::to_string(seq) + ": rank " + std::to_string(rank_) + " runs " +
           coll::describe(mine) + "; " + differ + "; " + text;
  }
  return text;
}

Status Watchdog::checkControl() {
  if (control_.state != transport::Request::State::kDone) return Status::ok();
  int32_t code = 0;
  std::string text = "(no reason given)";
  if (control_.received >= 4) {
    std::memcpy(&code, controlBuffer_.data(), 4);
    text.assign(controlBuffer_.data() + 4, control_.received - 4);
  }
  const bool passedOn = (code & kPassedOn) != 0;
  code &= ~kPassedOn;
  ErrorCode ec = code > 0 && code <= static_cast<int32_t>(ErrorCode::kAborted) ? static_cast<ErrorCode>(code)
                                                                               : ErrorCode::kRemoteError;
  if (ec == ErrorCode::kInvalidArgument || ec == ErrorCode::kInvalidUsage) ec = ErrorCode::kRemoteError;
  if (passedOn) return makeError(ec, "%s (passed on by rank %d)", text.c_str(), control_.source);
  return makeError(ec, "rank %d failed and reported: %s", control_.source, text.c_str());
}

Status Watchdog::pollReports() {
  FERRY_TRY(abortStatus());
  // Called from sub-communicators' waits while this communicator's call holds it: only they drive
  // its transport meanwhile, one at a time.
  std::unique_lock<std::mutex> lock(reportsMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::ok();
  if (transport_ != nullptr) transport_->progress();
  checkStatus();
  return checkControl();
}

Status Watchdog::poll(int peer) {
  FERRY_TRY(abortStatus());
  checkStatus();
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
  // A rank that failed on another rank's report passes that report on to the rest before it
  // closes: a rank that then sees this one's connection end reads the cause just before the end,
  // even where the first report to it comes late (its sender descheduled between its sends).
  const bool passOn = control_.state == transport::Request::State::kDone;
  const Status reported = passOn ? checkControl() : Status::ok();
  const Status& what = passOn ? reported : why;
  std::string payload(4, '\0');
  int32_t code = static_cast<int32_t>(what.code()) | (passOn ? kPassedOn : 0);
  std::memcpy(payload.data(), &code, 4);
  payload += what.message().substr(0, kControlBytes - 4);
  reports_.push_back(std::move(payload));
  const std::string& p = reports_.back();
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    if (r == rank_ || (passOn && r == control_.source) || !transport_->peerError(r).isOk()) continue;
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
