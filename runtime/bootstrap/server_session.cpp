// ServerSession: the root's per-connection protocol (see server_session.hpp).
//
// Every check that can be made from a frame's header is made before its payload is allocated, so
// a peer announcing 4 GiB costs a log line, not memory; the body checks (decodeGather) follow.
#include "runtime/bootstrap/server_session.hpp"

namespace ferry::bootstrap {

ServerSession::ServerSession(uint64_t id, std::string peer)
    : id_(id), peer_(std::move(peer)), reader_([this](const wire::FrameHeader& h) { return validate(h); }) {}

std::string ServerSession::who() const { return rank_ < 0 ? peer_ : peer_ + " (rank " + std::to_string(rank_) + ")"; }

// What a client may send, decided from the header alone.
Status ServerSession::validate(const wire::FrameHeader& h) const {
  using wire::MsgType;
  if (h.type == static_cast<uint16_t>(MsgType::kHello)) {
    if (stage_ != Stage::kHello) return makeError(ErrorCode::kRemoteError, "a second HELLO on one connection");
    // A protocol-1 HELLO is read only to be refused by its version number.
    if (h.length != wire::kHelloBytes && h.length != wire::kLegacyHelloBytes) {
      return makeError(ErrorCode::kRemoteError, "HELLO frame announces %u bytes (expected exactly %zu)", h.length,
                       wire::kHelloBytes);
    }
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(MsgType::kAuth)) {
    if (stage_ != Stage::kAuth) {
      return makeError(ErrorCode::kRemoteError, "AUTH %s",
                       stage_ == Stage::kHello ? "before HELLO (the root's challenge comes first)"
                                               : "on a connection that already authenticated");
    }
    if (h.length != wire::kAuthBytes) {
      return makeError(ErrorCode::kRemoteError, "AUTH frame announces %u bytes (expected exactly %zu)", h.length,
                       wire::kAuthBytes);
    }
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(MsgType::kGather)) {
    if (rank_ < 0) {
      return makeError(ErrorCode::kRemoteError,
                       "GATHER before registering (a connection must prove the secret and be admitted first)");
    }
    if (h.length < wire::kGatherPrefixBytes || h.length > wire::kGatherPrefixBytes + wire::kMaxContributionBytes) {
      return makeError(ErrorCode::kRemoteError, "GATHER frame announces %u bytes (expected %zu to %zu)", h.length,
                       wire::kGatherPrefixBytes, wire::kGatherPrefixBytes + wire::kMaxContributionBytes);
    }
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(MsgType::kOk) || h.type == static_cast<uint16_t>(MsgType::kError) ||
      h.type == static_cast<uint16_t>(MsgType::kChallenge)) {
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

void ServerSession::onHello(const std::vector<uint8_t>& payload, RootState& state) {
  auto hello = wire::decodeHello(payload);
  if (!hello.isOk()) return state.refuse(id_, peer_, hello.status());
  if (hello->version != wire::kProtocolVersion) {
    return state.refuse(id_, peer_,
                        makeError(ErrorCode::kInvalidUsage,
                                  "protocol version %u is not supported (expected %u): all ranks must run the same "
                                  "ferry version",
                                  hello->version, wire::kProtocolVersion));
  }
  rankNonce_ = hello->nonce;
  rootNonce_ = randomNonce();
  stage_ = Stage::kAuth;
  wire::Hello challenge;
  challenge.nonce = rootNonce_;
  state.sink().reply(id_, wire::encodeHello(challenge, wire::MsgType::kChallenge));
}

void ServerSession::onAuth(const std::vector<uint8_t>& payload, RootState& state, bool* jobActivity) {
  auto auth = wire::decodeAuth(payload);
  if (!auth.isOk()) return state.refuse(id_, peer_, auth.status());
  const Digest expected = rankProof(state.secret(), rootNonce_, rankNonce_, auth->claim);
  if (!digestsEqual(expected, auth->proof)) {
    return state.refuse(id_, peer_,
                        makeError(ErrorCode::kInvalidArgument,
                                  "the proof of the job secret for rank %u of %u does not verify (all ranks of a job "
                                  "must use the same unique id or FERRY_SECRET; a replayed or altered handshake "
                                  "fails the same way)",
                                  auth->claim.rank, auth->claim.size));
  }
  stage_ = Stage::kAuthenticated;
  *jobActivity = true;
  const Digest proof = rootProof(state.secret(), rootNonce_, rankNonce_, auth->claim);
  state.hello(id_, peer_, auth->claim, wire::encodeWelcome(proof));
}

Status ServerSession::dispatch(wire::Frame frame, RootState& state, bool* jobActivity) {
  // validate() lets through only what the stage allows: HELLO, then AUTH, then GATHER from a rank.
  if (frame.type == wire::MsgType::kHello) {
    onHello(frame.payload, state);
    return Status::ok();
  }
  if (frame.type == wire::MsgType::kAuth) {
    onAuth(frame.payload, state, jobActivity);
    return Status::ok();
  }
  *jobActivity = true;
  auto request = wire::decodeGather(std::move(frame.payload));
  FERRY_TRY(request);
  state.gather(rank_, std::move(request.value()));
  return Status::ok();
}

}  // namespace ferry::bootstrap
