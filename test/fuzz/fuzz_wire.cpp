// Fuzzes the rendezvous wire format as a rank reads it: the frame reader fed a byte stream in
// arbitrary pieces, under the client's header limits, and every body decoder on what it assembles.
//
// Input: one byte of world size (the client's limit on OK frames depends on it), one byte that
// seeds the receive sizes, then the stream. Decoded bodies are re-encoded and must give back the
// same bytes: a decoder that accepts something it cannot have produced is a bug too.
#include <cstring>

#include "runtime/bootstrap/wire.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;
using namespace ferry::bootstrap;

namespace {

// The client's validators (store_client.cpp): CHALLENGE of its size, OK up to the largest reply,
// ERROR up to its limit.
Status clientLimits(const wire::FrameHeader& h, int size) {
  if (h.type == static_cast<uint16_t>(wire::MsgType::kChallenge)) {
    if (h.length > wire::kChallengeBytes) return makeError(ErrorCode::kRemoteError, "CHALLENGE too long");
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(wire::MsgType::kOk)) {
    if (h.length > wire::maxGatherReplyBytes(size)) return makeError(ErrorCode::kRemoteError, "OK too long");
    return Status::ok();
  }
  if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
    if (h.length > wire::kMaxErrorBytes) return makeError(ErrorCode::kRemoteError, "ERROR too long");
    return Status::ok();
  }
  return makeError(ErrorCode::kRemoteError, "unexpected %s", wire::msgTypeName(h.type).c_str());
}

void checkBodies(const wire::Frame& f, int size) {
  const std::vector<uint8_t>& p = f.payload;
  // A rank decodes an OK as the reply to its round; try the round the payload claims and a wrong one.
  uint64_t claimed = 0;
  if (p.size() >= 8) {
    for (int i = 0; i < 8; ++i) claimed = claimed << 8 | p[static_cast<size_t>(i)];
  }
  for (uint64_t round : {claimed, claimed + 1}) {
    auto all = wire::decodeGatherReply(p, round, size);
    if (all.isOk()) {
      FERRY_FUZZ_CHECK(round == claimed && all->size() == static_cast<size_t>(size));
      auto again = wire::encodeGatherReply(round, *all);
      FERRY_FUZZ_CHECK(again->size() == wire::kHeaderBytes + p.size());
      FERRY_FUZZ_CHECK(std::memcmp(again->data() + wire::kHeaderBytes, p.data(), p.size()) == 0);
    }
  }
  Status e = wire::decodeError(p);
  FERRY_FUZZ_CHECK(!e.isOk());
  auto g = wire::decodeGather(p);
  if (g.isOk()) {
    auto again = wire::encodeGather(g->round, g->deadlineMs, g->data);
    FERRY_FUZZ_CHECK(again->size() == wire::kHeaderBytes + p.size());
    FERRY_FUZZ_CHECK(std::memcmp(again->data() + wire::kHeaderBytes, p.data(), p.size()) == 0);
  } else {
    FERRY_FUZZ_CHECK(p.size() < wire::kGatherPrefixBytes);
  }
  // HELLO and CHALLENGE share a body; a protocol-1 HELLO decodes to its version alone.
  auto h = wire::decodeHello(p);
  FERRY_FUZZ_CHECK(h.isOk() == (p.size() == wire::kHelloBytes || (p.size() == wire::kLegacyHelloBytes && h.isOk() &&
                                                                  h->version != wire::kProtocolVersion)));
  if (h.isOk() && p.size() == wire::kHelloBytes) {
    auto again =
        wire::encodeHello(*h, f.type == wire::MsgType::kChallenge ? wire::MsgType::kChallenge : wire::MsgType::kHello);
    FERRY_FUZZ_CHECK(std::memcmp(again->data() + wire::kHeaderBytes, p.data(), p.size()) == 0);
  } else if (h.isOk()) {
    FERRY_FUZZ_CHECK(h->version != wire::kProtocolVersion);
  }
  auto a = wire::decodeAuth(p);
  FERRY_FUZZ_CHECK(a.isOk() == (p.size() == wire::kAuthBytes));
  if (a.isOk()) {
    auto again = wire::encodeAuth(*a);
    FERRY_FUZZ_CHECK(std::memcmp(again->data() + wire::kHeaderBytes, p.data(), p.size()) == 0);
  }
  auto w = wire::decodeWelcome(p);
  FERRY_FUZZ_CHECK(w.isOk() == (p.size() == wire::kWelcomeBytes));
  if (w.isOk()) {
    auto again = wire::encodeWelcome(*w);
    FERRY_FUZZ_CHECK(std::memcmp(again->data() + wire::kHeaderBytes, p.data(), p.size()) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const int world = 1 + in.u8() % 8;
  uint32_t pieces = in.u8() | 1u;  // a small LCG state: receive sizes from 1 to 64 bytes
  std::vector<uint8_t> stream = in.rest();
  wire::FrameReader reader([world](const wire::FrameHeader& h) { return clientLimits(h, world); });
  size_t at = 0;
  while (at < stream.size()) {
    std::span<uint8_t> space = reader.space();
    FERRY_FUZZ_CHECK(!space.empty());
    pieces = pieces * 1103515245u + 12345u;
    size_t n = std::min({space.size(), stream.size() - at, size_t{1} + (pieces >> 16) % 64});
    std::memcpy(space.data(), stream.data() + at, n);
    at += n;
    Status ok = reader.commit(n);
    if (!ok.isOk()) break;  // the client gives up on the root
    FERRY_FUZZ_CHECK(!reader.progress().empty());
    if (reader.complete()) {
      wire::Frame f = reader.take();
      FERRY_FUZZ_CHECK(f.type == wire::MsgType::kOk || f.type == wire::MsgType::kError ||
                       f.type == wire::MsgType::kChallenge);
      checkBodies(f, world);
    }
  }
  return 0;
}
