// UCX transport.
//
// One ucp context and one worker per communicator (no sharing between communicators, so their tags
// never meet). The wire tag is (source rank << 40) | caller tag: a receive names the peer it
// expects through the rank bits, and the caller's 40 bits carry whatever the collectives put there.
// Requests complete through UCX callbacks that fill the caller's Request; completion happens only
// inside progress() (and cancel() or close()), so every waiting side drives its own transfers
// (UCX's rendezvous protocol for large messages needs both sides to progress).
//
// Every UCX request still in flight is tracked (live_), through a small record UCX keeps in front
// of each request for us (ucp_params.request_size): a dead peer, a forced close and teardown must
// reach requests the caller no longer waits on. A receive belongs to the worker, not to an
// endpoint, so closing endpoints never ends it: those are canceled one by one. Sends belong to
// their endpoint and end when it is force-closed.
#include "transports/ucx/ucx_transport.hpp"

#include <ucp/api/ucp.h>

#include <algorithm>
#include <vector>

#include "base/deadline.hpp"
#include "base/log.hpp"

namespace ferry::transport::ucx {
namespace {

constexpr int kRankShift = kTagBits;
constexpr uint64_t kRankMask = ~kTagMask;
/// The least time close() gives force-closed endpoints to let go of their requests, even when its
/// own limit has passed: destroying a worker under a closing endpoint aborts inside UCX.
constexpr double kForceCloseGrace = 0.5;
/// How long close() lets requests of closed endpoints report their end before it fails them.
constexpr double kSettleSeconds = 0.01;

uint64_t wireTag(int rank, uint64_t tag) { return (static_cast<uint64_t>(rank) << kRankShift) | (tag & kTagMask); }

class UcxTransport;

// Our record inside every UCX request (UCX reserves it; see request_size).
struct Op {
  UcxTransport* owner;  // null while the request is not tracked
  uint32_t index;       // its place in owner->live_
  bool detached;        // the caller's Request already ended; the callback must not touch it
  ucs_status_t failAs;  // set before we cancel the request ourselves: the failure to report
};

void initOp(void* request) {
  auto* op = static_cast<Op*>(request);
  op->owner = nullptr;
  op->index = 0;
  op->detached = false;
  op->failAs = UCS_OK;
}

void finish(Request* r, ucs_status_t status) {
  r->handle = nullptr;
  if (status == UCS_OK) {
    r->state = Request::State::kDone;
  } else {
    r->error = ucs_status_string(status);
    r->state = Request::State::kFailed;
  }
}

// Per-peer endpoint and its health, set by UCX's error callback.
struct Peer {
  ucp_ep_h ep = nullptr;
  int rank = -1;
  ucs_status_t failure = UCS_OK;
  bool sameHost = false;
  bool receivesFailed = false;  // its pending receives were failed after the failure
  UcxTransport* owner = nullptr;
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(int rank, int size) : rank_(rank), size_(size), peers_(size) {}

  ~UcxTransport() override {
    close(1.0, false);
    if (worker_ != nullptr) drainUnexpected();
    if (address_ != nullptr) ucp_worker_release_address(worker_, address_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  Status init(const UcxOptions& o) {
    ucp_config_t* cfg = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_config_read failed: %s", ucs_status_string(st));
    if (!o.netDevices.empty()) {
      st = ucp_config_modify(cfg, "NET_DEVICES", o.netDevices.c_str());
      if (st != UCS_OK) {
        ucp_config_release(cfg);
        return makeError(ErrorCode::kInvalidArgument, "UCX rejected NET_DEVICES='%s': %s", o.netDevices.c_str(),
                         ucs_status_string(st));
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_REQUEST_INIT;
    params.features = UCP_FEATURE_TAG;
    params.estimated_num_eps = static_cast<size_t>(size_);
    params.request_size = sizeof(Op);
    params.request_init = initOp;
    st = ucp_init(&params, cfg, &context_);
    ucp_config_release(cfg);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_init failed: %s", ucs_status_string(st));

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(context_, &wp, &worker_);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_worker_create failed: %s", ucs_status_string(st));
    st = ucp_worker_get_address(worker_, &address_, &addressLength_);
    if (st != UCS_OK)
      return makeError(ErrorCode::kSystemError, "ucp_worker_get_address failed: %s", ucs_status_string(st));
    for (int r = 0; r < size_; ++r) {
      peers_[r].rank = r;
      peers_[r].owner = this;
      peers_[r].sameHost = r < static_cast<int>(o.sameHost.size()) && o.sameHost[r];
      // Same-host endpoints go without peer error handling (see UcxOptions::sameHost).
      if (r != rank_ && peers_[r].sameHost) allPeersWatched_ = false;
    }
    FERRY_INFO(log::kNet, "UCX %s worker ready (%zu-byte address, NET_DEVICES=%s)", ucp_get_version_string(),
               addressLength_, o.netDevices.empty() ? "(UCX default)" : o.netDevices.c_str());
    return Status::ok();
  }

  const char* name() const override { return "ucx"; }
  // Peer death is detected only where every endpoint has UCX's peer error handling.
  Capabilities capabilities() const override { return {true, false, allPeersWatched_}; }

  std::vector<uint8_t> localAddress() const override {
    const auto* p = reinterpret_cast<const uint8_t*>(address_);
    return std::vector<uint8_t>(p, p + addressLength_);
  }

  Status connect(const std::vector<std::vector<uint8_t>>& addrs) override {
    if (static_cast<int>(addrs.size()) != size_) {
      return makeError(ErrorCode::kInternalError, "UCX connect got %zu addresses, expected %d", addrs.size(), size_);
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (addrs[r].empty()) return makeError(ErrorCode::kInternalError, "rank %d published an empty UCX address", r);
      ucp_ep_params_t ep{};
      ep.field_mask =
          UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(addrs[r].data());
      ep.err_mode = peers_[r].sameHost ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = onPeerError;
      ep.err_handler.arg = &peers_[r];
      ucs_status_t st = ucp_ep_create(worker_, &ep, &peers_[r].ep);
      if (st != UCS_OK) {
        return makeError(ErrorCode::kSystemError, "rank %d cannot create a UCX endpoint to rank %d: %s", rank_, r,
                         ucs_status_string(st));
      }
    }
    return Status::ok();
  }

  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override {
    if (closed_ || peer < 0 || peer >= size_ || peer == rank_ || peers_[peer].ep == nullptr) {
      return makeError(ErrorCode::kInternalError, "UCX send to invalid peer %d (rank %d of %d%s)", peer, rank_, size_,
                       closed_ ? ", transport closed" : "");
    }
    req->start(true, peer, tag, bytes);
    if (peers_[peer].failure != UCS_OK) {
      finish(req, peers_[peer].failure);
      return Status::ok();
    }
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = onSend;
    p.user_data = req;
    ucs_status_ptr_t sp = ucp_tag_send_nbx(peers_[peer].ep, buf, bytes, wireTag(rank_, tag), &p);
    posted(req, sp);
    return Status::ok();
  }

  Status postRecv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t bytes, Request* req) override {
    if (closed_ || (peer != kAnyPeer && (peer < 0 || peer >= size_ || peer == rank_))) {
      return makeError(ErrorCode::kInternalError, "UCX receive from invalid peer %d (rank %d of %d%s)", peer, rank_,
                       size_, closed_ ? ", transport closed" : "");
    }
    req->start(false, peer, tag, bytes);
    if (peer != kAnyPeer && peers_[peer].failure != UCS_OK) {
      finish(req, peers_[peer].failure);
      return Status::ok();
    }
    ucp_tag_recv_info_t info{};
    ucp_request_param_t p{};
    // No immediate completion: UCX 1.13 does not report the sender's tag for receives that
    // complete inside the call, and the tag is how mismatches are named. (Such a receive still
    // completes inside the call, through the callback.)
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = onRecv;
    p.user_data = req;
    p.recv_info.tag_info = &info;
    uint64_t wmask = (mask & kTagMask) | (peer == kAnyPeer ? 0 : kRankMask);
    ucs_status_ptr_t sp = ucp_tag_recv_nbx(worker_, buf, bytes, wireTag(peer == kAnyPeer ? 0 : peer, tag), wmask, &p);
    if (sp == nullptr) {
      onRecv(nullptr, UCS_OK, &info, req);
    } else {
      posted(req, sp);
    }
    return Status::ok();
  }

  // Receives are withdrawn from the worker. UCX 1.13 ignores the cancel of a tag send: such a
  // send stays pending until its peer receives it (it then ends kDone, with the bytes it had when
  // posted, which the caller has not touched while it was pending) or until close() ends it.
  void cancel(Request* req) override {
    if (req->pending() && req->handle != nullptr) ucp_request_cancel(worker_, req->handle);
  }

  bool progress() override {
    bool any = ucp_worker_progress(worker_) != 0;
    if (peerFailed_) {
      peerFailed_ = false;
      failReceivesFromFailedPeers();
      any = true;
    }
    return any;
  }

  Status peerError(int peer) const override {
    if (peer < 0 || peer >= size_ || peers_[peer].failure == UCS_OK) return Status::ok();
    return makeError(ErrorCode::kRemoteError, "the connection to rank %d failed (UCX: %s)", peer,
                     ucs_status_string(peers_[peer].failure));
  }

  // Flush (unless forced) until the limit, cancel every receive, then close the endpoints: those
  // that flushed gracefully, the others by force, which fails their sends. Nothing the caller
  // posted is left pending, and no endpoint is left closing when the worker is destroyed.
  /// Take the messages that arrived but that nothing received (late status answers, a report
  /// sent while this rank was leaving): UCX warns of each one left when the worker goes. Eager
  /// messages complete at once; anything else gets 50 ms in all, then is cancelled.
  void drainUnexpected() {
    Deadline deadline = Deadline::after(0.05);
    std::vector<uint8_t> sink;
    for (int n = 0; n < 4096 && !deadline.expired(); ++n) {
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);
      if (msg == nullptr) {
        if (ucp_worker_progress(worker_) == 0) break;
        continue;
      }
      sink.resize(std::max<size_t>(info.length, 1));
      ucp_request_param_t rp{};
      ucs_status_ptr_t sp = ucp_tag_msg_recv_nbx(worker_, sink.data(), info.length, msg, &rp);
      if (sp == nullptr || UCS_PTR_IS_ERR(sp)) continue;
      while (ucp_request_check_status(sp) == UCS_INPROGRESS && !deadline.expired()) ucp_worker_progress(worker_);
      if (ucp_request_check_status(sp) == UCS_INPROGRESS) ucp_request_cancel(worker_, sp);
      ucp_request_free(sp);
    }
  }

  void close(double seconds, bool force) override {
    if (closed_) return;
    closed_ = true;
    Deadline deadline = Deadline::after(std::max(seconds, 1e-6));
    std::vector<bool> flushed(size_, false);
    if (!force) flushEndpoints(deadline, &flushed);
    cancelReceives([](const Request&) { return true; }, UCS_ERR_CANCELED);

    std::vector<void*> closing;
    bool forced = false;
    for (int r = 0; r < size_; ++r) {
      Peer& p = peers_[r];
      if (p.ep == nullptr) continue;
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      cp.flags = flushed[r] && p.failure == UCS_OK ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      forced |= cp.flags != 0;
      ucs_status_ptr_t sp = ucp_ep_close_nbx(p.ep, &cp);
      if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) closing.push_back(sp);
      p.ep = nullptr;
    }
    Deadline grace = Deadline::after(kForceCloseGrace);
    Backoff backoff;
    auto closingBusy = [&] {
      for (void* sp : closing) {
        if (ucp_request_check_status(sp) == UCS_INPROGRESS) return true;
      }
      return false;
    };
    while (closingBusy() && !(deadline.expired() && grace.expired())) {
      if (ucp_worker_progress(worker_) == 0) backoff.pause();
    }
    for (void* sp : closing) ucp_request_free(sp);  // released by UCX once complete
    // The sends of force-closed endpoints end with them. An endpoint without peer error handling
    // (same host) keeps a rendezvous send its peer never answered: that one never ends.
    Deadline settle = Deadline::after(kSettleSeconds);
    while (!live_.empty() && !settle.expired()) {
      if (ucp_worker_progress(worker_) == 0) backoff.pause();
    }
    if (!live_.empty()) {
      // Their peer may still read those send buffers if it takes the message later (UCX's
      // rendezvous over shared memory reads the sender's memory).
      FERRY_WARN(log::kNet,
                 "rank %d: %zu UCX requests outlived closing the endpoints%s (no peer error handling); failing them",
                 rank_, live_.size(), forced ? " by force" : "");
    }
    // Whatever UCX still holds ends now for the caller, and UCX's late completion finds it detached.
    while (!live_.empty()) {
      Live l = live_.back();
      auto* op = static_cast<Op*>(l.ucx);
      untrack(op);
      op->detached = true;
      finish(l.req, UCS_ERR_CANCELED);
    }
  }

 private:
  struct Live {
    void* ucx;
    Request* req;
  };

  static void onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* p = static_cast<Peer*>(arg);
    if (p->failure == UCS_OK) {
      p->failure = status;
      // Its sends fail through the endpoint; its receives are failed by the next progress(),
      // outside UCX's callback.
      p->owner->peerFailed_ = true;
      // A peer that finished and closed its side while nothing of ours was waiting on it (ranks
      // leave one after another) is no news for the user; a peer lost with transfers pending is.
      bool waiting = false;
      for (const Live& l : p->owner->live_) waiting |= l.req != nullptr && l.req->peer == p->rank;
      if (waiting) {
        FERRY_WARN(log::kNet, "UCX reports the connection to rank %d failed: %s", p->rank, ucs_status_string(status));
      } else {
        FERRY_INFO(log::kNet,
                   "UCX reports the connection to rank %d closed or failed while no transfer with it was "
                   "pending: %s",
                   p->rank, ucs_status_string(status));
      }
    }
  }

  // What a completion callback does first: stop tracking, and say whether the caller's Request
  // may still be written (and with which status, when we canceled it ourselves).
  static bool retire(void* ucxReq, ucs_status_t* status) {
    auto* op = static_cast<Op*>(ucxReq);
    bool detached = op->detached;
    if (*status == UCS_ERR_CANCELED && op->failAs != UCS_OK) *status = op->failAs;
    if (op->owner != nullptr) op->owner->untrack(op);
    op->detached = false;
    op->failAs = UCS_OK;
    return !detached;
  }

  static void onSend(void* ucxReq, ucs_status_t status, void* user) {
    if (retire(ucxReq, &status)) finish(static_cast<Request*>(user), status);
    ucp_request_free(ucxReq);
  }

  static void onRecv(void* ucxReq, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
    auto* r = static_cast<Request*>(user);
    const ucs_status_t raw = status;
    bool attached = ucxReq == nullptr || retire(ucxReq, &status);
    if (attached) {
      if (info != nullptr && raw != UCS_ERR_CANCELED) {
        r->received = info->length;
        r->peerTag = info->sender_tag & kTagMask;
        r->source = static_cast<int>(info->sender_tag >> kRankShift);
      }
      if (status == UCS_ERR_MESSAGE_TRUNCATED) {
        r->handle = nullptr;
        r->error = "message truncated: the sender sent more than the " + std::to_string(r->bytes) + " bytes posted";
        r->state = Request::State::kFailed;
      } else {
        finish(r, status);
      }
    }
    if (ucxReq != nullptr) ucp_request_free(ucxReq);
  }

  // After a post: track what UCX left in flight. A receive may already have completed inside the
  // call (its callback freed the request), so only a Request still pending is tracked.
  void posted(Request* req, ucs_status_ptr_t sp) {
    if (sp == nullptr) {
      finish(req, UCS_OK);
    } else if (UCS_PTR_IS_ERR(sp)) {
      finish(req, UCS_PTR_STATUS(sp));
    } else if (req->pending()) {
      auto* op = static_cast<Op*>(sp);
      op->owner = this;
      op->index = static_cast<uint32_t>(live_.size());
      op->detached = false;
      op->failAs = UCS_OK;
      live_.push_back({sp, req});
      req->handle = sp;
    }
  }

  void untrack(Op* op) {
    uint32_t i = op->index;
    live_[i] = live_.back();
    static_cast<Op*>(live_[i].ucx)->index = i;
    live_.pop_back();
    op->owner = nullptr;
  }

  // Cancels every tracked receive `which` selects; they fail with `why`.
  template <typename Pred>
  void cancelReceives(Pred which, ucs_status_t why) {
    std::vector<void*> victims;
    for (const Live& l : live_) {
      if (!l.req->isSend && which(*l.req)) victims.push_back(l.ucx);
    }
    // A receive UCX is already filling (rendezvous under way) is not canceled: it completes.
    for (void* v : victims) {
      static_cast<Op*>(v)->failAs = why;
      ucp_request_cancel(worker_, v);
    }
  }

  void failReceivesFromFailedPeers() {
    for (Peer& p : peers_) {
      if (p.failure == UCS_OK || p.receivesFailed) continue;
      p.receivesFailed = true;
      cancelReceives([&](const Request& r) { return r.peer == p.rank; }, p.failure);
    }
  }

  // Flushes every healthy endpoint until `deadline`; flushed[r]: every send to rank r completed.
  // A UCX flush does not wait for rendezvous sends whose receiver has not answered, so those are
  // waited for first, and an endpoint that still has one counts as not flushed.
  void flushEndpoints(const Deadline& deadline, std::vector<bool>* flushed) {
    auto sending = [&](int peer) {
      for (const Live& l : live_) {
        if (l.req->isSend && (peer < 0 || l.req->peer == peer)) return true;
      }
      return false;
    };
    Backoff wait;
    while (sending(-1) && !deadline.expired()) {
      if (ucp_worker_progress(worker_) == 0) wait.pause();
    }
    std::vector<std::pair<int, void*>> flushing;
    for (int r = 0; r < size_; ++r) {
      Peer& p = peers_[r];
      if (p.ep == nullptr || p.failure != UCS_OK) continue;
      ucp_request_param_t fp{};
      ucs_status_ptr_t sp = ucp_ep_flush_nbx(p.ep, &fp);
      if (sp == nullptr) {
        (*flushed)[r] = true;
      } else if (!UCS_PTR_IS_ERR(sp)) {
        flushing.emplace_back(r, sp);
      }
    }
    Backoff backoff;
    for (auto& [r, sp] : flushing) {
      while (ucp_request_check_status(sp) == UCS_INPROGRESS && !deadline.expired()) {
        if (ucp_worker_progress(worker_) == 0) backoff.pause();
      }
      (*flushed)[r] = ucp_request_check_status(sp) == UCS_OK;
      ucp_request_free(sp);  // one still in progress ends when its endpoint is force-closed
    }
    for (int r = 0; r < size_; ++r) {
      if ((*flushed)[r] && sending(r)) (*flushed)[r] = false;
    }
  }

  int rank_;
  int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t addressLength_ = 0;
  std::vector<Peer> peers_;
  std::vector<Live> live_;  // every UCX request the caller's Requests wait on
  bool allPeersWatched_ = true;
  bool peerFailed_ = false;  // a peer failed since the last progress()
  bool closed_ = false;
};

}  // namespace

Result<std::unique_ptr<Transport>> createUcxTransport(const UcxOptions& options) {
  auto t = std::make_unique<UcxTransport>(options.rank, options.size);
  FERRY_TRY(t->init(options));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace ferry::transport::ucx
