// ServerSession: the root's per-connection protocol (see server_session.hpp).
//
// Every check that can be made from a frame's header is made before its payload is allocated, so
// a peer announcing 4 GiB costs a log line, not memory; the body checks (decodeGather) follow.
#include "runtime/bootstrap/server_session.hpp"

namespace ferry::bootstrap {

ServerSession::ServerSession(uint64_t id, std::string peer)
    : id_(id), peer_(std::move(peer)), reader_([this](const wire::FrameHeader& h) { return validate(h); }) {}

std::string ServerSession::who() const {
  return rank_ < 0 ? peer_ : peer_ + " (rank " + std::to_string(rank_) + ")";
}

// What a client may send, decided from the header alone.
Status ServerSession::validate(const wire::FrameHeader& h) const {
  using wire::MsgType;
  if (h.type == static_cast<uint16_t>(MsgType::kHello)) {
    if (rank_ >= 0) return makeError(ErrorCode::kRemoteError, "a second HELLO from registered rank %d", rank_);
    if (h.length != wire::kHelloBytes) {
      return makeError(ErrorCode::kRemoteError, "HELLO frame announces %u bytes (expected exactly %zu)",
                       h.length, wire::kHelloBytes);
    }
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(MsgType::kGather)) {
    if (rank_ < 0) {
      return makeError(ErrorCode::kRemoteError, "GATHER before HELLO (a connection must present the secret first)");
    }
    if (h.length < wire::kGatherPrefixBytes || h.length > wire::kGatherPrefixBytes + wire::kMaxContributionBytes) {
      return makeError(ErrorCode::kRemoteError, "GATHER frame announces %u bytes (expected %zu to %zu)", h.length,
                       wire::kGatherPrefixBytes, wire::kGatherPrefixBytes + wire::kMaxContributionBytes);
    }
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(MsgType::kOk) || h.type == static_cast<uint16_t>(MsgType::kError)) {
    return makeError(ErrorCode::kRemoteError, "%s frames only flow from the root to the ranks",
                     wire::msgTypeName(h.type).c_str());
  }
  return makeError(ErrorCode::kRemoteError, "unknown message type %u (length %u)", unsigned{h.type}, h.length);
}

Status ServerSession::received(size_t n, RootState& state, bool* jobActivity) {
  FERRY_TRY(reader_.commit(n));
  if (!reader_.complete()) return Status::ok();
  return dispatch(reader_.take(), state, jobActivity);
}

Status ServerSession::dispatch(wire::Frame frame, RootState& state, bool* jobActivity) {
  if (frame.type == wire::MsgType::kHello) {
    int rank = state.hello(id_, peer_, wire::decodeHello(frame.payload));
    if (rank < 0) {
      refused_ = true;
    } else {
      rank_ = rank;
      *jobActivity = true;
    }
    return Status::ok();
  }
  // validate() lets nothing but HELLO and GATHER through, and GATHER only from a rank.
  *jobActivity = true;
  auto request = wire::decodeGather(std::move(frame.payload));
  FERRY_TRY(request);
  state.gather(rank_, std::move(request.value()));
  return Status::ok();
}

}  // namespace ferry::bootstrap
