// Encoding and decoding of the store's frames (layout in wire.hpp).
//
// Kept free of sockets so that client, server and tests share one definition of every byte. Every
// decoder bounds-checks against the payload it was given and never trusts a count from the wire to
// size an allocation before checking it against the bytes that are actually there.
#include "runtime/bootstrap/wire.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ferry::bootstrap::wire {
namespace {

void put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void put64(std::vector<uint8_t>& out, uint64_t v) {
  put32(out, static_cast<uint32_t>(v >> 32));
  put32(out, static_cast<uint32_t>(v));
}

uint32_t get32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint64_t get64(const uint8_t* p) { return (uint64_t{get32(p)} << 32) | get32(p + 4); }

// A frame buffer with the header written and room reserved for the payload.
std::vector<uint8_t> startFrame(MsgType type, size_t payloadBytes) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + payloadBytes);
  put32(out, kMagic);
  put16(out, static_cast<uint16_t>(type));
  put16(out, 0);
  put32(out, static_cast<uint32_t>(payloadBytes));
  return out;
}

OutFrame finish(std::vector<uint8_t> frame) { return std::make_shared<const std::vector<uint8_t>>(std::move(frame)); }

}  // namespace

std::string msgTypeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello: return "HELLO";
    case MsgType::kGather: return "GATHER";
    case MsgType::kOk: return "OK";
    case MsgType::kError: return "ERROR";
    case MsgType::kChallenge: return "CHALLENGE";
    case MsgType::kAuth: return "AUTH";
  }
  return "unknown type " + std::to_string(type);
}

OutFrame encodeHello(const Hello& hello, MsgType type) {
  auto out = startFrame(type, kHelloBytes);
  put32(out, hello.version);
  out.insert(out.end(), hello.nonce.begin(), hello.nonce.end());
  return finish(std::move(out));
}

Result<Hello> decodeHello(const std::vector<uint8_t>& payload) {
  Hello h;
  if (payload.size() == kLegacyHelloBytes && get32(payload.data() + 24) != kProtocolVersion) {
    h.version = get32(payload.data() + 24);
    return h;
  }
  if (payload.size() != kHelloBytes) {
    return makeError(ErrorCode::kRemoteError, "HELLO body of %zu bytes (expected exactly %zu)", payload.size(),
                     kHelloBytes);
  }
  h.version = get32(payload.data());
  std::copy(payload.begin() + 4, payload.end(), h.nonce.begin());
  return h;
}

OutFrame encodeAuth(const Auth& auth) {
  auto out = startFrame(MsgType::kAuth, kAuthBytes);
  put32(out, auth.claim.rank);
  put32(out, auth.claim.size);
  out.insert(out.end(), auth.proof.begin(), auth.proof.end());
  return finish(std::move(out));
}

Result<Auth> decodeAuth(const std::vector<uint8_t>& payload) {
  if (payload.size() != kAuthBytes) {
    return makeError(ErrorCode::kRemoteError, "AUTH body of %zu bytes (expected exactly %zu)", payload.size(),
                     kAuthBytes);
  }
  Auth a;
  a.claim.rank = get32(payload.data());
  a.claim.size = get32(payload.data() + 4);
  std::copy(payload.begin() + 8, payload.end(), a.proof.begin());
  return a;
}

OutFrame encodeGather(uint64_t round, uint32_t deadlineMs, const std::vector<uint8_t>& data) {
  auto out = startFrame(MsgType::kGather, kGatherPrefixBytes + data.size());
  put64(out, round);
  put32(out, deadlineMs);
  out.insert(out.end(), data.begin(), data.end());
  return finish(std::move(out));
}

Result<GatherRequest> decodeGather(std::vector<uint8_t> payload) {
  if (payload.size() < kGatherPrefixBytes) {
    return makeError(ErrorCode::kRemoteError, "GATHER body of %zu bytes is shorter than its %zu-byte prefix",
                     payload.size(), kGatherPrefixBytes);
  }
  GatherRequest g;
  g.round = get64(payload.data());
  g.deadlineMs = get32(payload.data() + 8);
  payload.erase(payload.begin(), payload.begin() + kGatherPrefixBytes);
  g.data = std::move(payload);
  return g;
}

OutFrame encodeWelcome(const Digest& rootProof) {
  auto out = startFrame(MsgType::kOk, kWelcomeBytes);
  out.insert(out.end(), rootProof.begin(), rootProof.end());
  return finish(std::move(out));
}

Result<Digest> decodeWelcome(const std::vector<uint8_t>& payload) {
  if (payload.size() != kWelcomeBytes) {
    return makeError(ErrorCode::kRemoteError, "the root accepted the AUTH with %zu bytes instead of its %zu-byte proof",
                     payload.size(), kWelcomeBytes);
  }
  Digest d;
  std::copy(payload.begin(), payload.end(), d.begin());
  return d;
}

OutFrame encodeGatherReply(uint64_t round, const std::vector<std::vector<uint8_t>>& all) {
  size_t bytes = 12;
  for (const auto& d : all) bytes += 4 + d.size();
  auto out = startFrame(MsgType::kOk, bytes);
  put64(out, round);
  put32(out, static_cast<uint32_t>(all.size()));
  for (const auto& d : all) {
    put32(out, static_cast<uint32_t>(d.size()));
    out.insert(out.end(), d.begin(), d.end());
  }
  return finish(std::move(out));
}

Result<std::vector<std::vector<uint8_t>>> decodeGatherReply(const std::vector<uint8_t>& payload, uint64_t round,
                                                            int count) {
  if (payload.size() < 12) {
    return makeError(ErrorCode::kRemoteError,
                     "the root's reply to allGather round %llu has %zu bytes, fewer than its 12-byte prefix",
                     static_cast<unsigned long long>(round), payload.size());
  }
  uint64_t gotRound = get64(payload.data());
  uint32_t gotCount = get32(payload.data() + 8);
  if (gotRound != round || gotCount != static_cast<uint32_t>(count)) {
    return makeError(ErrorCode::kRemoteError,
                     "the root answered round %llu with %u contributions; expected round %llu with %d",
                     static_cast<unsigned long long>(gotRound), gotCount, static_cast<unsigned long long>(round),
                     count);
  }
  std::vector<std::vector<uint8_t>> all(static_cast<size_t>(count));
  size_t off = 12;
  for (int r = 0; r < count; ++r) {
    if (payload.size() - off < 4) {
      return makeError(ErrorCode::kRemoteError, "the root's reply to round %llu ends before rank %d's length",
                       static_cast<unsigned long long>(round), r);
    }
    uint32_t len = get32(payload.data() + off);
    off += 4;
    if (payload.size() - off < len) {
      return makeError(ErrorCode::kRemoteError,
                       "the root's reply to round %llu announces %u bytes for rank %d but only %zu remain",
                       static_cast<unsigned long long>(round), len, r, payload.size() - off);
    }
    all[static_cast<size_t>(r)].assign(payload.begin() + static_cast<long>(off),
                                       payload.begin() + static_cast<long>(off + len));
    off += len;
  }
  if (off != payload.size()) {
    return makeError(ErrorCode::kRemoteError, "the root's reply to round %llu has %zu stray bytes at the end",
                     static_cast<unsigned long long>(round), payload.size() - off);
  }
  return all;
}

size_t maxGatherReplyBytes(int size) {
  size_t n = size > 0 ? static_cast<size_t>(size) : 0;
  size_t data = std::min(n * kMaxContributionBytes, kMaxRoundBytes);
  return 12 + 4 * n + data;
}

OutFrame encodeError(const Status& status) {
  std::string msg = status.message().substr(0, kMaxErrorBytes - 4);
  auto out = startFrame(MsgType::kError, 4 + msg.size());
  put32(out, static_cast<uint32_t>(status.code()));
  out.insert(out.end(), msg.begin(), msg.end());
  return finish(std::move(out));
}

Status decodeError(const std::vector<uint8_t>& payload) {
  if (payload.size() < 4) {
    return makeError(ErrorCode::kRemoteError, "the root sent an ERROR reply too short to hold an error code");
  }
  uint32_t code = get32(payload.data());
  std::string msg(payload.begin() + 4, payload.end());
  if (code == 0 || code > static_cast<uint32_t>(ErrorCode::kAborted)) {
    return Status(ErrorCode::kRemoteError, msg);
  }
  return Status(static_cast<ErrorCode>(code), msg);
}

std::span<uint8_t> FrameReader::space() {
  switch (state_) {
    case State::kHeader: return {header_ + headerGot_, kHeaderBytes - headerGot_};
    case State::kPayload: return {payload_.data() + payloadGot_, payload_.size() - payloadGot_};
    case State::kComplete: break;
  }
  return {};
}

Status FrameReader::commit(size_t n) {
  if (state_ == State::kPayload) {
    payloadGot_ += n;
    if (payloadGot_ == payload_.size()) state_ = State::kComplete;
    return Status::ok();
  }
  if (state_ != State::kHeader) return Status::ok();
  headerGot_ += n;
  if (headerGot_ < kHeaderBytes) return Status::ok();
  parsed_.magic = get32(header_);
  parsed_.type = static_cast<uint16_t>((header_[4] << 8) | header_[5]);
  parsed_.reserved = static_cast<uint16_t>((header_[6] << 8) | header_[7]);
  parsed_.length = get32(header_ + 8);
  if (parsed_.magic != kMagic) {
    return makeError(ErrorCode::kRemoteError, "bad frame magic 0x%08x (expected 0x%08x)", parsed_.magic, kMagic);
  }
  Status verdict = validator_(parsed_);
  if (!verdict.isOk()) return verdict;
  // Only now, with the length accepted, is the payload allocated.
  payload_.assign(parsed_.length, 0);
  payloadGot_ = 0;
  state_ = payload_.empty() ? State::kComplete : State::kPayload;
  return Status::ok();
}

std::string FrameReader::progress() const {
  char buf[96];
  if (state_ == State::kPayload) {
    std::snprintf(buf, sizeof(buf), "%zu of %zu payload bytes", payloadGot_, payload_.size());
  } else {
    std::snprintf(buf, sizeof(buf), "%zu of %zu header bytes", headerGot_, kHeaderBytes);
  }
  return buf;
}

Frame FrameReader::take() {
  Frame f;
  f.type = static_cast<MsgType>(parsed_.type);
  f.payload = std::move(payload_);
  payload_.clear();
  headerGot_ = 0;
  payloadGot_ = 0;
  state_ = State::kHeader;
  return f;
}

}  // namespace ferry::bootstrap::wire
