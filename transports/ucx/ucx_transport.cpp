// UCX transport.
//
// One ucp context and one worker per communicator (no sharing between communicators, so their tags
// never meet). The wire tag is (source rank << 40) | caller tag: a receive names the peer it
// expects through the rank bits, and the caller's 40 bits carry whatever the collectives put there.
// Requests complete through UCX callbacks that fill the caller's Request; completion happens only
// inside progress(), so every waiting side drives its own transfers (UCX's rendezvous protocol for
// large messages needs both sides to progress).
#include "transports/ucx/ucx_transport.hpp"

#include <ucp/api/ucp.h>

#include <vector>

#include "runtime/base/deadline.hpp"
#include "runtime/base/log.hpp"

namespace ferry::transport::ucx {
namespace {

constexpr int kRankShift = kTagBits;
constexpr uint64_t kRankMask = ~kTagMask;

uint64_t wireTag(int rank, uint64_t tag) { return (static_cast<uint64_t>(rank) << kRankShift) | (tag & kTagMask); }

void finish(Request* r, ucs_status_t status) {
  r->handle = nullptr;
  if (status == UCS_OK) {
    r->state = Request::State::kDone;
  } else {
    r->error = ucs_status_string(status);
    r->state = Request::State::kFailed;
  }
}

void onSend(void* ucxReq, ucs_status_t status, void* user) {
  finish(static_cast<Request*>(user), status);
  ucp_request_free(ucxReq);
}

void onRecv(void* ucxReq, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<Request*>(user);
  if (info != nullptr && status != UCS_ERR_CANCELED) {
    r->received = info->length;
    r->peerTag = info->sender_tag & kTagMask;
    r->source = static_cast<int>(info->sender_tag >> kRankShift);
  }
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    r->handle = nullptr;
    r->error = "message truncated: the sender sent more than the " + std::to_string(r->bytes) +
               " bytes posted";
    r->state = Request::State::kFailed;
  } else {
    finish(r, status);
  }
  if (ucxReq != nullptr) ucp_request_free(ucxReq);
}

// Per-peer endpoint and its health, set by UCX's error callback.
struct Peer {
  ucp_ep_h ep = nullptr;
  int rank = -1;
  ucs_status_t failure = UCS_OK;
  bool sameHost = false;
};

void onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<Peer*>(arg);
  if (p->failure == UCS_OK) {
    p->failure = status;
    FERRY_WARN(log::kNet, "UCX reports the connection to rank %d failed: %s", p->rank,
               ucs_status_string(status));
  }
}

class UcxTransport final : public Transport {
 public:
  UcxTransport(int rank, int size) : rank_(rank), size_(size), peers_(size) {}

  ~UcxTransport() override {
    close(1.0, false);
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
        return makeError(ErrorCode::kInvalidArgument, "UCX rejected NET_DEVICES='%s': %s",
                         o.netDevices.c_str(), ucs_status_string(st));
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG;
    params.estimated_num_eps = static_cast<size_t>(size_);
    st = ucp_init(&params, cfg, &context_);
    ucp_config_release(cfg);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_init failed: %s", ucs_status_string(st));

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(context_, &wp, &worker_);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_worker_create failed: %s", ucs_status_string(st));
    st = ucp_worker_get_address(worker_, &address_, &addressLength_);
    if (st != UCS_OK) return makeError(ErrorCode::kSystemError, "ucp_worker_get_address failed: %s", ucs_status_string(st));
    for (int r = 0; r < size_; ++r) {
      peers_[r].rank = r;
      peers_[r].sameHost = r < static_cast<int>(o.sameHost.size()) && o.sameHost[r];
    }
    FERRY_INFO(log::kNet, "UCX %s worker ready (%zu-byte address, NET_DEVICES=%s)", ucp_get_version_string(),
               addressLength_, o.netDevices.empty() ? "(UCX default)" : o.netDevices.c_str());
    return Status::ok();
  }

  const char* name() const override { return "ucx"; }
  Capabilities capabilities() const override { return {true, false, true}; }

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
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
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
    if (peer < 0 || peer >= size_ || peer == rank_ || peers_[peer].ep == nullptr) {
      return makeError(ErrorCode::kInternalError, "UCX send to invalid peer %d (rank %d of %d)", peer, rank_, size_);
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
    complete(req, sp);
    return Status::ok();
  }

  Status postRecv(int peer, uint64_t tag, uint64_t mask, void* buf, size_t bytes, Request* req) override {
    if (peer != kAnyPeer && (peer < 0 || peer >= size_ || peer == rank_)) {
      return makeError(ErrorCode::kInternalError, "UCX receive from invalid peer %d (rank %d of %d)", peer, rank_, size_);
    }
    req->start(false, peer, tag, bytes);
    ucp_tag_recv_info_t info{};
    ucp_request_param_t p{};
    // No immediate completion: UCX 1.13 does not report the sender's tag for receives that
    // complete inside the call, and the tag is how mismatches are named.
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = onRecv;
    p.user_data = req;
    p.recv_info.tag_info = &info;
    uint64_t wmask = (mask & kTagMask) | (peer == kAnyPeer ? 0 : kRankMask);
    ucs_status_ptr_t sp = ucp_tag_recv_nbx(worker_, buf, bytes, wireTag(peer == kAnyPeer ? 0 : peer, tag), wmask, &p);
    if (sp == nullptr) {
      onRecv(nullptr, UCS_OK, &info, req);
    } else if (UCS_PTR_IS_ERR(sp)) {
      finish(req, UCS_PTR_STATUS(sp));
    } else {
      req->handle = sp;
    }
    return Status::ok();
  }

  void cancel(Request* req) override {
    if (req->pending() && req->handle != nullptr) ucp_request_cancel(worker_, req->handle);
  }

  bool progress() override { return ucp_worker_progress(worker_) != 0; }

  Status peerError(int peer) const override {
    if (peer < 0 || peer >= size_ || peers_[peer].failure == UCS_OK) return Status::ok();
    return makeError(ErrorCode::kRemoteError, "the connection to rank %d failed (UCX: %s)", peer,
                     ucs_status_string(peers_[peer].failure));
  }

  void close(double seconds, bool force) override {
    std::vector<void*> pending;
    for (auto& p : peers_) {
      if (p.ep == nullptr) continue;
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      cp.flags = force || p.failure != UCS_OK ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      ucs_status_ptr_t sp = ucp_ep_close_nbx(p.ep, &cp);
      if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) pending.push_back(sp);
      p.ep = nullptr;
    }
    Deadline deadline = Deadline::after(seconds);
    Backoff backoff;
    for (void* sp : pending) {
      while (ucp_request_check_status(sp) == UCS_INPROGRESS && !deadline.expired()) {
        if (ucp_worker_progress(worker_) == 0) backoff.pause();
      }
      ucp_request_free(sp);
    }
  }

 private:

  static void complete(Request* req, ucs_status_ptr_t sp) {
    if (sp == nullptr) {
      finish(req, UCS_OK);
    } else if (UCS_PTR_IS_ERR(sp)) {
      finish(req, UCS_PTR_STATUS(sp));
    } else {
      req->handle = sp;
    }
  }

  int rank_;
  int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t addressLength_ = 0;
  std::vector<Peer> peers_;
};

}  // namespace

Result<std::unique_ptr<Transport>> createUcxTransport(const UcxOptions& options) {
  auto t = std::make_unique<UcxTransport>(options.rank, options.size);
  FERRY_TRY(t->init(options));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace ferry::transport::ucx
