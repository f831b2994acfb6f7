// Fuzzes the records ranks hand each other once the rendezvous is up: identity records (PeerInfo,
// one per rank through the store's allGather), the host model rank 0 shares (also read back from
// the on-disk cache), and the watchdog's messages: the report through which a failing rank tells
// the others why, and the status queries and answers about where each rank's call stands (their
// payloads arrive over the transport into fixed buffers).
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

// A transport that only holds the watchdog's receives (error reports on the control tag class,
// status queries and answers on the status class), which the harness then completes with the
// fuzzer's bytes as if rank 1 had sent them. Sends (the answers to queries) complete at once.
class ReceivesOnly final : public transport::Transport {
 public:
  struct Posted {
    transport::Request* req = nullptr;
    void* buf = nullptr;
  };
  const char* name() const override { return "fuzz"; }
  transport::Capabilities capabilities() const override { return {}; }
  std::vector<uint8_t> localAddress() const override { return {}; }
  Status connect(const std::vector<std::vector<uint8_t>>&) override { return Status::ok(); }
  Status postSend(int peer, uint64_t tag, const void*, size_t bytes, transport::Request* req) override {
    req->start(true, peer, tag, bytes);
    req->state = transport::Request::State::kDone;
    return Status::ok();
  }
  Status postRecv(int peer, uint64_t tag, uint64_t, void* buf, size_t bytes, transport::Request* req) override {
    req->start(false, peer, tag, bytes);
    (tag == coll::makeTag(coll::TagClass::kControl, 0, 0) ? control : status) = Posted{req, buf};
    return Status::ok();
  }
  void cancel(transport::Request* req) override {
    if (req->pending()) req->state = transport::Request::State::kFailed;
  }
  bool progress() override { return false; }
  Status peerError(int) const override { return Status::ok(); }
  void close(double, bool) override {}

  Posted control;
  Posted status;
};

// Deliver `bytes` from rank 1 into a posted receive, truncated to its size as UCX and shm do.
void deliver(const ReceivesOnly::Posted& p, const std::vector<uint8_t>& bytes) {
  FERRY_FUZZ_CHECK(p.req != nullptr && p.req->pending());
  size_t n = std::min(bytes.size(), p.req->bytes);
  if (n > 0) std::memcpy(p.buf, bytes.data(), n);
  p.req->received = n;
  p.req->source = 1;
  p.req->peerTag = p.req->tag;
  p.req->state = transport::Request::State::kDone;
}

// A report (`status` false: the control tag class) or a status query or answer (`status` true).
void watchdogMessage(const std::vector<uint8_t>& bytes, bool status) {
  ReceivesOnly t;
  std::vector<PeerInfo> peers(2);
  peers[0].hostId = "a";
  peers[1].hostId = "b";
  coll::CallTrace trace;
  trace.seq = 7;
  trace.call = "allReduce";
  Watchdog w(&t, 0, peers, 1.0);
  w.setTrace(0x1234, 2, &trace);
  FERRY_FUZZ_CHECK(w.start().isOk());
  if (status) {
    deliver(t.status, bytes);
    FERRY_FUZZ_CHECK(w.poll(1).isOk());         // a query is answered, an answer kept: no error
    FERRY_FUZZ_CHECK(t.status.req->pending());  // and the receive is posted again
  } else {
    deliver(t.control, bytes);
    Status s = w.poll(1);
    // It names its sender: as the rank that failed, or as the rank that passed another's report on.
    FERRY_FUZZ_CHECK(!s.isOk() && (s.message().find("rank 1 failed and reported") != std::string::npos ||
                                   s.message().find("(passed on by rank 1)") != std::string::npos));
    FERRY_FUZZ_CHECK(s.code() != ErrorCode::kInvalidArgument && s.code() != ErrorCode::kInvalidUsage);
  }
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
  switch (which % 4) {
    case 0: peerInfo(rest); break;
    case 1: hostModel(rest); break;
    case 2: watchdogMessage(rest, false); break;
    default: watchdogMessage(rest, true); break;
  }
  return 0;
}
