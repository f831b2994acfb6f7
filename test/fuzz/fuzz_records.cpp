// Fuzzes the records ranks hand each other once the rendezvous is up: identity records (PeerInfo,
// one per rank through the store's allGather), the host model rank 0 shares (also read back from
// the on-disk cache), and the watchdog's control message, through which a failing rank tells the
// others why (its payload arrives over the transport into a fixed buffer).
//
// Input: one selector byte, then the record. Whatever decodes must encode back to itself.
#include <algorithm>
#include <cstring>

#include "runtime/host_model.hpp"
#include "runtime/peer_info.hpp"
#include "runtime/watchdog.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;

namespace {

void peerInfo(const std::vector<uint8_t>& bytes) {
  auto p = PeerInfo::deserialize(bytes, 3);
  if (!p.isOk()) {
    FERRY_FUZZ_CHECK(p.status().message().find("rank 3") != std::string::npos);
    return;
  }
  FERRY_FUZZ_CHECK(p->serialize() == bytes);
}

void hostModel(const std::vector<uint8_t>& bytes) {
  auto m = HostModel::deserialize(bytes);
  if (!m.isOk()) return;
  FERRY_FUZZ_CHECK(!m->describe().empty());
  auto again = HostModel::deserialize(m->serialize());
  FERRY_FUZZ_CHECK(again.isOk() && again->cores == m->cores && again->l2Bytes == m->l2Bytes);
}

// A transport that only holds the watchdog's control receive, which the harness then completes
// with the fuzzer's bytes as if rank 1 had sent them.
class ControlOnly final : public transport::Transport {
 public:
  const char* name() const override { return "fuzz"; }
  transport::Capabilities capabilities() const override { return {}; }
  std::vector<uint8_t> localAddress() const override { return {}; }
  Status connect(const std::vector<std::vector<uint8_t>>&) override { return Status::ok(); }
  Status postSend(int, uint64_t, const void*, size_t, transport::Request*) override { return Status::ok(); }
  Status postRecv(int peer, uint64_t tag, uint64_t, void* buf, size_t bytes, transport::Request* req) override {
    req->start(false, peer, tag, bytes);
    recv = req;
    buffer = buf;
    return Status::ok();
  }
  void cancel(transport::Request* req) override {
    if (req->pending()) req->state = transport::Request::State::kFailed;
  }
  bool progress() override { return false; }
  Status peerError(int) const override { return Status::ok(); }
  void close(double, bool) override {}

  transport::Request* recv = nullptr;
  void* buffer = nullptr;
};

void controlMessage(const std::vector<uint8_t>& bytes) {
  ControlOnly t;
  std::vector<PeerInfo> peers(2);
  peers[0].hostId = "a";
  peers[1].hostId = "b";
  Watchdog w(&t, 0, peers, 1.0);
  FERRY_FUZZ_CHECK(w.start().isOk() && t.recv != nullptr);
  // The transport truncates to the posted size, as UCX and shm do.
  size_t n = std::min(bytes.size(), t.recv->bytes);
  if (n > 0) std::memcpy(t.buffer, bytes.data(), n);
  t.recv->received = n;
  t.recv->source = 1;
  t.recv->peerTag = t.recv->tag;
  t.recv->state = transport::Request::State::kDone;
  Status s = w.poll(1);
  FERRY_FUZZ_CHECK(!s.isOk() && s.message().find("rank 1 failed and reported") != std::string::npos);
  FERRY_FUZZ_CHECK(s.code() != ErrorCode::kInvalidArgument && s.code() != ErrorCode::kInvalidUsage);
  w.stop();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t which = in.u8();
  std::vector<uint8_t> rest = in.rest();
  switch (which % 3) {
    case 0: peerInfo(rest); break;
    case 1: hostModel(rest); break;
    default: controlMessage(rest); break;
  }
  return 0;
}
