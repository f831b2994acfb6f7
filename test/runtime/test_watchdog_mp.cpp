// The watchdog's reports between processes over ferry's TCP transport: a rank that fails tells
// the others why, and the cause must reach every rank before the news that a connection ended.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "base/deadline.hpp"
#include "collectives/tag.hpp"
#include "runtime/peer_info.hpp"
#include "runtime/watchdog.hpp"
#include "test/transports/rank_harness.hpp"

using namespace ferry;
using namespace ferry::test;
using transport::Request;

namespace {

// A report as the watchdogs send it: [i32 error code][text], on the control tag.
constexpr uint64_t kControlTag = coll::makeTag(coll::TagClass::kControl, 0, 0);

std::vector<PeerInfo> distinctHosts(int n) {
  // Each rank on a host of its own: the watchdog checks no process ids, only what the ranks say.
  std::vector<PeerInfo> peers(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    peers[static_cast<size_t>(r)].hostname = peers[static_cast<size_t>(r)].hostId = "host" + std::to_string(r);
  return peers;
}

std::string waitFor(RankContext& ctx, Request& req, const char* what) {
  Deadline deadline = Deadline::after(20);
  while (req.pending() && !deadline.expired()) ctx.transport().progress();
  return req.pending() ? std::string(what) + " still pending after 20 s" : "";
}

}  // namespace

// Rank 0's first report reaches rank 1 only (as when rank 0 is descheduled between its sends).
// Rank 1 fails on it and closes its connections; rank 2, waiting on rank 1, sees that connection
// end. Rank 2 must name rank 0's cause, not the ended connection: rank 1 passed the report on
// before it closed.
TEST_CASE("a rank that fails on a report passes it on before its connections end", "[mp][watchdog]") {
  auto outcomes = runTransportRanks("tcp", 3, [](RankContext& ctx) -> std::string {
    ctx.skipFinalBarrier();
    Watchdog dog(&ctx.transport(), ctx.rank(), distinctHosts(3), 1.0);
    if (Status s = dog.start(); !s.isOk()) return "watchdog start: " + s.toString();
    auto& t = ctx.transport();
    std::string failed;
    if (ctx.rank() == 0) {
      std::string payload(4, '\0');
      const int32_t code = static_cast<int32_t>(ErrorCode::kMismatch);
      std::memcpy(payload.data(), &code, 4);
      payload += "collective mismatch planted by rank 0";
      Request req;
      if (Status s = t.postSend(1, kControlTag, payload.data(), payload.size(), &req); !s.isOk()) {
        return "report to rank 1: " + s.toString();
      }
      failed = waitFor(ctx, req, "the report to rank 1");
      // Stay until rank 2 has judged, so that its connection to this rank outlives rank 1's.
      if (failed.empty() && !ctx.spinUntilMarked("judged", 30)) failed = "rank 2 never judged";
    } else if (ctx.rank() == 1) {
      Deadline deadline = Deadline::after(20);
      Status s;
      while ((s = dog.poll(-1)).isOk() && !deadline.expired()) t.progress();
      if (s.isOk()) return "no report from rank 0 within 20 s";
      // As a communicator's failed call does: report, then close at once.
      dog.report(s);
      dog.stop();
      t.close(0.2, true);
      return "";
    } else {
      char byte = 0;
      Request req;
      if (Status s = t.postRecv(1, 7, transport::kTagMask, &byte, 1, &req); !s.isOk()) return s.toString();
      failed = waitFor(ctx, req, "the receive from rank 1");
      if (failed.empty() && req.state != Request::State::kFailed) failed = "the receive from rank 1 completed";
      if (failed.empty()) {
        for (int i = 0; i < 16; ++i) t.progress();
        Status why = dog.poll(-1);
        if (why.isOk()) {
          failed = "rank 1's connection ended (" + req.error + ") with no report before it";
        } else if (why.code() != ErrorCode::kMismatch || why.message().find("planted by rank 0") == std::string::npos ||
                   why.message().find("passed on by rank 1") == std::string::npos) {
          failed = "expected rank 0's mismatch passed on by rank 1, got " + why.toString();
        }
        std::printf("rank 2: %s\n", why.toString().c_str());
      }
      ctx.mark("judged");
    }
    dog.stop();
    return failed;
  });
  CHECK(summarize(outcomes) == "");
  for (const RankOutcome& o : outcomes) INFO(o.output);
}
