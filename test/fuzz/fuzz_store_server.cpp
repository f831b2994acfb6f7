// Fuzzes the rendezvous root as hostile peers see it: whole connections' byte streams through
// ServerSession (the root's per-connection protocol) into RootState (the rendezvous rules), with
// no sockets in between, exactly as the poll loop hands bytes over.
//
// Input: a script of steps, each one byte `op` and then its operands:
//   op % 8 in 0..4  bytes for connection op/8 % 4: one byte n, then n bytes of stream
//   op % 8 == 5     connection op/8 % 4 closes (a registered rank leaves; the slot gets a new peer)
//   op % 8 == 6     the root's clock tick (round deadlines)
//   op % 8 == 7     a HELLO with the job's secret for connection op/8 % 4: rank, size (one byte each)
// The last step saves the fuzzer guessing a 16-byte secret; the seeds carry it too. Whatever the
// script, the root's replies must be well-formed frames a rank can parse, and a connection the
// root refused or dropped gets nothing more read from it.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>

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
  }
  std::map<uint64_t, int> replies;
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
  RootState state(kSecret, sink);
  uint64_t nextId = 1;
  std::array<Slot, kConns> slots;
  auto fresh = [&](Slot& s) {
    s.session = std::make_unique<ServerSession>(nextId, "10.0.0.1:" + std::to_string(40000 + nextId));
    ++nextId;
  };
  // What the server's sweep() does with a connection it closes.
  auto close = [&](Slot& s) {
    if (s.session->rank() >= 0) state.disconnected(s.session->rank());
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
        wire::Hello h;
        h.secret = kSecret;
        h.rank = in.u8();
        h.size = in.u8();
        auto frame = wire::encodeHello(h);
        feed(s, *frame);
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
