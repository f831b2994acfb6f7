// Fuzzes the rendezvous root as hostile peers see it: whole connections' byte streams through
// ServerSession (the root's per-connection protocol) into RootState (the rendezvous rules), with
// no sockets in between, exactly as the poll loop hands bytes over.
//
// Input: one byte of the root's configured world size (0: rank 0's registration sets it), then a
// script of steps, each one byte `op` and then its operands:
//   op % 8 in 0..4  bytes for connection op/8 % 4: one byte n, then n bytes of stream
//   op % 8 == 5     connection op/8 % 4 closes (a registered rank leaves; the slot gets a new peer)
//   op % 8 == 6     the root's clock tick (round deadlines)
//   op % 8 == 7     the whole handshake with the job's secret on connection op/8 % 4: rank, size
//                   (one byte each), then one byte of flags: 1 sends only the HELLO, 2 flips a bit of
//                   the proof, 4 proves a different claim than the AUTH makes
// The last step answers the root's fresh challenge, which the fuzzer cannot see; the seeds use it.
// Whatever the script, the root's replies must be well-formed frames a rank can parse, a proof
// that does not match must never register a rank, and a connection the root refused or dropped
// gets nothing more read from it.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/bootstrap/handshake.hpp"
#include "runtime/bootstrap/root_state.hpp"
#include "runtime/bootstrap/server_session.hpp"
#include "runtime/bootstrap/store.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;
using namespace ferry::bootstrap;

namespace {

// 32 hex digits: the secret itself, so that seed files can spell it out.
const Secret kSecret = Secret::fromString("00112233445566778899aabbccddeeff");
constexpr int kConns = 4;

// Collects the root's replies and checks each one as a rank's reader would.
class CheckingSink final : public ReplySink {
 public:
  void reply(uint64_t conn, wire::OutFrame frame) override {
    FERRY_FUZZ_CHECK(frame != nullptr && frame->size() >= wire::kHeaderBytes);
    wire::FrameReader reader([](const wire::FrameHeader& h) -> Status {
      if (h.type == static_cast<uint16_t>(wire::MsgType::kError)) {
        FERRY_FUZZ_CHECK(h.length <= wire::kMaxErrorBytes);
      } else if (h.type == static_cast<uint16_t>(wire::MsgType::kChallenge)) {
        FERRY_FUZZ_CHECK(h.length == wire::kChallengeBytes);
      } else {
        FERRY_FUZZ_CHECK(h.type == static_cast<uint16_t>(wire::MsgType::kOk));
      }
      return Status::ok();
    });
    auto space = reader.space();
    std::memcpy(space.data(), frame->data(), wire::kHeaderBytes);
    FERRY_FUZZ_CHECK(reader.commit(wire::kHeaderBytes).isOk());
    if (!reader.complete()) {
      space = reader.space();
      FERRY_FUZZ_CHECK(space.size() == frame->size() - wire::kHeaderBytes);
      std::memcpy(space.data(), frame->data() + wire::kHeaderBytes, space.size());
      FERRY_FUZZ_CHECK(reader.commit(space.size()).isOk());
    }
    FERRY_FUZZ_CHECK(reader.complete());
    wire::Frame f = reader.take();
    if (f.type == wire::MsgType::kError) FERRY_FUZZ_CHECK(!wire::decodeError(f.payload).isOk());
    replies[conn]++;
    last[conn] = std::move(f);
  }
  void admit(uint64_t conn, int rank) override { admitted[conn] = rank; }
  void refuse(uint64_t conn) override { refused[conn] = true; }
  std::map<uint64_t, int> replies;
  std::map<uint64_t, wire::Frame> last;
  std::map<uint64_t, int> admitted;
  std::map<uint64_t, bool> refused;
};

struct Slot {
  std::unique_ptr<ServerSession> session;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  CheckingSink sink;
  RootState state(kSecret, in.u8() % 5, sink);
  uint64_t nextId = 1;
  std::array<Slot, kConns> slots;
  auto fresh = [&](Slot& s) {
    s.session = std::make_unique<ServerSession>(nextId, "10.0.0.1:" + std::to_string(40000 + nextId));
    ++nextId;
  };
  // What the server's admit() and refuse() do, for the connections RootState named.
  auto settle = [&](Slot& s) {
    auto a = sink.admitted.find(s.session->id());
    if (a != sink.admitted.end()) s.session->admit(a->second);
    if (sink.refused.count(s.session->id()) != 0) s.session->markRefused();
  };
  // What the server's sweep() does with a connection it closes.
  auto close = [&](Slot& s) {
    settle(s);
    if (s.session->rank() >= 0) {
      state.disconnected(s.session->rank());
    } else if (s.session->authenticated()) {
      state.forget(s.session->id());
    }
    fresh(s);
  };
  auto feed = [&](Slot& s, const std::vector<uint8_t>& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      std::span<uint8_t> space = s.session->space();
      FERRY_FUZZ_CHECK(!space.empty());
      size_t n = std::min(space.size(), bytes.size() - at);
      std::memcpy(space.data(), bytes.data() + at, n);
      at += n;
      bool activity = false;
      Status ok = s.session->received(n, state, &activity);
      for (Slot& other : slots) settle(other);
      if (!ok.isOk() || s.session->refused()) {
        FERRY_FUZZ_CHECK(!ok.message().empty() || s.session->refused());
        close(s);  // dropped, or closed once its refusal is sent: the rest goes nowhere
        return;
      }
    }
  };
  for (Slot& s : slots) fresh(s);
  while (!in.empty()) {
    const uint8_t op = in.u8();
    Slot& s = slots[(op >> 3) % kConns];
    switch (op & 7) {
      case 5: close(s); break;
      case 6: state.tick(); break;
      case 7: {
        const Claim claim{in.u8(), in.u8()};
        const uint8_t flags = in.u8();
        wire::Hello h;
        h.nonce.fill(flags);
        const uint64_t id = s.session->id();
        sink.last.erase(id);
        feed(s, *wire::encodeHello(h));
        auto challenge = sink.last.find(id);
        if ((flags & 1) != 0 || challenge == sink.last.end() || challenge->second.type != wire::MsgType::kChallenge) {
          break;
        }
        auto rootHello = wire::decodeHello(challenge->second.payload);
        FERRY_FUZZ_CHECK(rootHello.isOk() && rootHello->version == wire::kProtocolVersion);
        wire::Auth auth;
        auth.claim = claim;
        Claim proved = claim;
        if ((flags & 4) != 0) proved.rank ^= 1;
        auth.proof = rankProof(kSecret, rootHello->nonce, h.nonce, proved);
        if ((flags & 2) != 0) auth.proof[flags % 32] ^= 1;
        feed(s, *wire::encodeAuth(auth));
        // A proof that does not match the claim registers nobody and parks nobody: the connection is
        // refused, or dropped (bytes fed before made these frames arrive out of order).
        if ((flags & 6) != 0) {
          FERRY_FUZZ_CHECK(sink.admitted.count(id) == 0 && (sink.refused.count(id) != 0 || s.session->id() != id));
        }
        break;
      }
      default: feed(s, in.bytes(in.u8())); break;
    }
    (void)state.nextDeadline();
    (void)state.finished();
  }
  for (Slot& s : slots) close(s);
  return 0;
}
