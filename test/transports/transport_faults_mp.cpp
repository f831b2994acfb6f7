// Transport conformance suite, the edges: receive buffers larger and smaller than the message,
// sends to oneself and to ranks that do not exist, cancel, close with requests in flight, and a
// peer killed with SIGKILL. Each check bounds its own time: a transport that hangs fails here.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstring>

#include "test/transports/conformance.hpp"

using namespace ferry;
using namespace ferry::test;
using transport::kAnyPeer;
using transport::kTagMask;
using transport::Request;

namespace {

std::string stateName(const Request& r) {
  switch (r.state) {
    case Request::State::kIdle: return "idle";
    case Request::State::kPending: return "pending";
    case Request::State::kDone: return "done";
    case Request::State::kFailed: return "failed (" + r.error + ")";
  }
  return "?";
}

}  // namespace

TEST_CASE("a receive larger than the message reports the bytes that arrived and keeps the rest", "[edges]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    const size_t pairs[][2] = {{0, 16}, {10, 1000}, {8200, 16384}, {(1 << 20) + 3, 2 << 20}};  // {message, posted}
    for (size_t k = 0; k < std::size(pairs); ++k) {
      const size_t bytes = pairs[k][0], posted = pairs[k][1];
      const uint64_t tag = 40 + k;
      std::string what = std::to_string(bytes) + " B into a " + std::to_string(posted) + "-byte receive";
      Request r;
      std::vector<uint8_t> buf(posted, 0xEE);
      if (c.rank() == 0) {
        fillPattern(buf.data(), bytes, seedOf(0, 1, tag, 0));
        Status s = t.postSend(1, tag, buf.data(), bytes, &r);
        if (!s.isOk()) return what + ": postSend failed: " + s.toString();
        std::string err = c.wait(r, 20, what);
        if (err.empty()) err = checkSent(r, what);
        if (!err.empty()) return err;
        continue;
      }
      Status s = t.postRecv(0, tag, kTagMask, buf.data(), posted, &r);
      if (!s.isOk()) return what + ": postRecv failed: " + s.toString();
      std::string err = c.wait(r, 20, what);
      if (err.empty()) err = checkReceived(r, 0, tag, bytes, what);
      if (err.empty() && r.bytes != posted) err = what + ": bytes changed to " + std::to_string(r.bytes);
      if (err.empty()) err = checkPattern(buf.data(), bytes, seedOf(0, 1, tag, 0), what);
      if (err.empty()) err = checkUntouched(buf.data(), bytes, posted, 0xEE, what);
      if (!err.empty()) return err;
    }
    return "";
  });
}

// transport.hpp does not spell out truncation; both transports fail the receive with "message
// truncated", and anything else (a kDone receive holding part of the message) would lose data
// silently, so the suite holds every transport to that.
TEST_CASE("a message larger than the receive fails it, writes nothing past it, and the pair still works", "[edges]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    const size_t pairs[][2] = {{100, 50}, {9000, 8000}, {65536, 10000}, {1 << 20, 4096}};  // {message, posted}
    constexpr size_t kCanary = 4096;
    for (size_t k = 0; k < std::size(pairs); ++k) {
      const size_t bytes = pairs[k][0], posted = pairs[k][1];
      const uint64_t tag = 60 + k;
      std::string what = std::to_string(bytes) + " B into a " + std::to_string(posted) + "-byte receive";
      Request r, after;
      std::vector<uint8_t> buf(std::max(bytes, posted + kCanary), 0xEE);
      uint8_t small[8] = {};
      if (c.rank() == 0) {
        fillPattern(buf.data(), bytes, seedOf(0, 1, tag, 0));
        Status s = t.postSend(1, tag, buf.data(), bytes, &r);
        if (!s.isOk()) return what + ": postSend failed: " + s.toString();
        // The sender may see the failure or not; it must not stay pending.
        std::string err = c.wait(r, 10, what + " (the sender)");
        if (!err.empty()) return err;
      } else {
        Status s = t.postRecv(0, tag, kTagMask, buf.data(), posted, &r);
        if (!s.isOk()) return what + ": postRecv failed: " + s.toString();
        std::string err = c.wait(r, 10, what);
        if (!err.empty()) return err;
        if (r.state != Request::State::kFailed) {
          return what + ": the receive ended " + stateName(r) + " with received " + std::to_string(r.received) +
                 " instead of failing";
        }
        if (r.error.empty()) return what + ": failed with an empty error";
        err = checkUntouched(buf.data(), posted, posted + kCanary, 0xEE, what);
        if (!err.empty()) return err;
      }
      // The same pair and tag still carry a message afterwards.
      Status s = c.rank() == 0 ? t.postSend(1, tag, small, sizeof(small), &after)
                               : t.postRecv(0, tag, kTagMask, small, sizeof(small), &after);
      if (!s.isOk()) return what + ": posting after the truncation failed: " + s.toString();
      std::string err = c.wait(after, 10, what + ", the message after it");
      if (err.empty() && after.state != Request::State::kDone)
        err = what + ", the message after it: " + stateName(after);
      if (!err.empty()) return err;
    }
    return "";
  });
}

TEST_CASE("a send to oneself is delivered or refused up front; a rank out of range is refused", "[edges]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    const int me = c.rank();
    uint8_t out[16], in[16] = {};
    fillPattern(out, sizeof(out), seedOf(me, me, 5, 0));
    Request send, recv;
    Status sr = t.postRecv(me, 5, kTagMask, in, sizeof(in), &recv);
    Status ss = t.postSend(me, 5, out, sizeof(out), &send);
    if (sr.isOk() != ss.isOk()) {
      return "a send to oneself was " + std::string(ss.isOk() ? "accepted" : "refused") +
             " but a receive from oneself " + (sr.isOk() ? "accepted" : "refused");
    }
    if (!ss.isOk()) {
      // Refused: neither request may be left pending (nothing would ever complete it).
      if (send.pending() || recv.pending()) return "a refused self-send left its request pending";
      std::printf("rank %d: self-send refused: %s\n", me, ss.toString().c_str());
    } else {
      std::string err = c.wait(send, 10, "self-send");
      if (err.empty()) err = c.wait(recv, 10, "self-receive");
      if (err.empty()) err = checkReceived(recv, me, 5, sizeof(out), "self-receive");
      if (err.empty()) err = checkPattern(in, sizeof(in), seedOf(me, me, 5, 0), "self-receive");
      if (!err.empty()) return err;
    }
    for (int bad : {-2, c.size(), c.size() + 7}) {
      Request r;
      if (t.postSend(bad, 1, out, 1, &r).isOk()) return "a send to rank " + std::to_string(bad) + " was accepted";
      if (t.postRecv(bad, 1, kTagMask, in, 1, &r).isOk())
        return "a receive from rank " + std::to_string(bad) + " was accepted";
      if (r.pending()) return "a refused request to rank " + std::to_string(bad) + " is pending";
    }
    return "";
  });
}

TEST_CASE("cancel ends a pending receive as failed, and the canceled receive takes no later message", "[edges]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    constexpr uint64_t kTag = 300;
    uint8_t buf[32] = {};
    if (c.rank() == 1) {
      Request specific, any;
      Status s = t.postRecv(0, kTag, kTagMask, buf, sizeof(buf), &specific);
      if (s.isOk()) s = t.postRecv(kAnyPeer, kTag, kTagMask, buf, sizeof(buf), &any);
      if (!s.isOk()) return "postRecv failed: " + s.toString();
      t.cancel(&specific);
      t.cancel(&any);
      std::string err = c.wait(specific, 5, "canceled receive");
      if (err.empty()) err = c.wait(any, 5, "canceled any-peer receive");
      if (!err.empty()) return err;
      if (specific.state != Request::State::kFailed || any.state != Request::State::kFailed) {
        return "canceled receives ended " + stateName(specific) + " and " + stateName(any) + ", expected failed";
      }
      err = c.barrier();  // only now does rank 0 send
      Request fresh;
      if (err.empty()) s = t.postRecv(0, kTag, kTagMask, buf, sizeof(buf), &fresh);
      if (err.empty() && !s.isOk()) err = "postRecv failed: " + s.toString();
      if (err.empty()) err = c.wait(fresh, 10, "receive after cancel");
      if (err.empty()) err = checkReceived(fresh, 0, kTag, sizeof(buf), "receive after cancel");
      if (err.empty()) err = checkPattern(buf, sizeof(buf), seedOf(0, 1, kTag, 0), "receive after cancel");
      return err;
    }
    std::string err = c.barrier();
    fillPattern(buf, sizeof(buf), seedOf(0, 1, kTag, 0));
    Request send;
    Status s = t.postSend(1, kTag, buf, sizeof(buf), &send);
    if (err.empty() && !s.isOk()) err = "postSend failed: " + s.toString();
    if (err.empty()) err = c.wait(send, 10, "send after the peer canceled");
    if (err.empty()) err = checkSent(send, "send after the peer canceled");
    return err;
  });
}

// A send that cancel() reports failed must never be delivered with whatever the caller puts in its
// buffer afterwards: either the message is gone, or (if the transport could not withdraw it) the
// send stays pending until the peer receives it, then ends kDone, and the receiver gets the
// original bytes. Sizes above every eager limit, so
// the bytes are still in the sender's buffer when the cancel comes.
TEST_CASE("a canceled send ends, and is never delivered with bytes written after the cancel", "[edges]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    constexpr uint64_t kTag = 310;
    constexpr size_t kBytes = 256 << 10;
    std::vector<uint8_t> buf(kBytes);
    if (c.rank() == 0) {
      fillPattern(buf.data(), kBytes, seedOf(0, 1, kTag, 0));
      Request send;
      Status s = t.postSend(1, kTag, buf.data(), kBytes, &send);
      if (!s.isOk()) return "postSend failed: " + s.toString();
      c.spin(0.2);  // the peer has seen the message, not matched it
      // A transport that completes such a send on its own has nothing to cancel: the receive
      // below must then simply get the original bytes.
      if (send.pending()) t.cancel(&send);
      // A send the transport cannot withdraw (UCX) stays pending: this long settles which case it is.
      std::string err = c.wait(send, 1.5, "canceled send");
      std::printf("rank 0: canceled send: %s\n", stateName(send).c_str());
      std::fflush(stdout);
      if (send.state == Request::State::kFailed) std::memset(buf.data(), 0xDD, kBytes);  // the caller's again
      std::string berr = c.barrier();
      if (!err.empty()) {
        // Not ended by cancel: the transport could not withdraw it, which transport.hpp allows
        // only if the send then ends kDone once the peer has received it (with the original
        // bytes, which rank 1 checks).
        err = c.wait(send, 10, "a canceled send the transport could not withdraw");
        if (err.empty() && send.state != Request::State::kDone) {
          err = "a canceled send that stayed pending ended " + stateName(send) + " after the peer's receive";
        }
        std::printf("rank 0: canceled send, after the peer's receive: %s\n", stateName(send).c_str());
      }
      if (berr.empty()) berr = c.barrier();  // the buffer lives until rank 1 has tried its receive
      return err.empty() ? berr : err;
    }
    c.spin(0.1);
    std::string err = c.barrier();  // rank 0 has canceled, and maybe reused its buffer
    if (!err.empty()) return err;
    Request recv;
    Status s = t.postRecv(0, kTag, kTagMask, buf.data(), kBytes, &recv);
    if (!s.isOk()) return "postRecv failed: " + s.toString();
    c.wait(recv, 1, "");
    if (recv.pending()) {
      t.cancel(&recv);
      err = c.wait(recv, 3, "canceling the receive nobody sends to");
    }
    std::printf("rank 1: the receive for the canceled send: %s, %zu bytes\n", stateName(recv).c_str(), recv.received);
    std::fflush(stdout);
    if (err.empty() && recv.state == Request::State::kDone) {  // a failed receive delivers nothing
      err = checkPattern(buf.data(), recv.received, seedOf(0, 1, kTag, 0), "the canceled send's message");
      if (!err.empty()) err += " (delivered after the sender's cancel reported it failed)";
    }
    std::string berr = c.barrier();
    return err.empty() ? berr : err;
  });
}

// A forced close must fail everything in flight (transport.hpp: "so none touches its buffers
// afterwards"); a flushing close must still return within its time limit. The requests live on
// the heap and are never freed, so a transport that does touch them later cannot corrupt the test.
TEST_CASE("close with requests in flight returns in time, and a forced close fails them all", "[edges][close]") {
  for (bool force : {true, false}) {
    INFO((force ? "forced close" : "flushing close"));
    runAndCheck(
        2,
        [force](RankContext& c) -> std::string {
          auto& t = c.transport();
          c.skipFinalBarrier();
          if (c.rank() == 1) {
            // Stays connected, posts nothing and never answers, until rank 0 has closed and destroyed
            // its transport (or for as long as that may take: 0.2 s, the close's 1 s and a margin).
            c.spinUntilMarked("closed", force ? 2.0 : 3.0);
            return "";
          }
          auto* reqs = new Request[4];
          auto* bufs = new std::vector<uint8_t>[4];
          for (int i = 0; i < 4; ++i) bufs[i].assign(i == 2 ? (1 << 20) : 64, 0x5A);
          Status s = t.postRecv(1, 100, kTagMask, bufs[0].data(), bufs[0].size(), &reqs[0]);
          if (s.isOk()) s = t.postRecv(kAnyPeer, 101, kTagMask, bufs[1].data(), bufs[1].size(), &reqs[1]);
          if (s.isOk()) s = t.postSend(1, 102, bufs[2].data(), bufs[2].size(), &reqs[2]);  // never received
          if (s.isOk()) s = t.postSend(1, 103, bufs[3].data(), bufs[3].size(), &reqs[3]);  // eager, may finish
          if (!s.isOk()) return "post failed: " + s.toString();
          c.spin(0.2);
          // A transport that buffers sends may finish the 1 MiB one: rank 1's side keeps it.
          const int mustPend = probeUnderTest().caps.buffersSends ? 2 : 3;
          for (int i = 0; i < mustPend; ++i) {
            if (!reqs[i].pending())
              return "request " + std::to_string(i) + " ended before close: " + stateName(reqs[i]);
          }
          const double limit = 1.0;
          auto t0 = Clock::now();
          t.close(limit, force);
          double took = secondsSince(t0);
          if (took > limit + 1.0) return "close(" + std::to_string(limit) + " s) took " + std::to_string(took) + " s";
          std::string err;
          if (force) {
            // Allow progress() to deliver the failures, then name what is still pending.
            err = c.waitAll(reqs, 4, 2, "after a forced close");
            std::string states;
            for (int i = 0; i < 4; ++i) states += " #" + std::to_string(i) + " " + stateName(reqs[i]) + ";";
            if (!err.empty()) {
              err =
                  "a forced close left requests pending (recv from 1, any-peer recv, 1 MiB send, 64 B send):" + states;
            }
            for (int i = 0; err.empty() && i < mustPend; ++i) {
              if (reqs[i].state != Request::State::kFailed)
                err = "after a forced close request #" + std::to_string(i) + " is " + stateName(reqs[i]);
            }
          }
          // Destroying the transport afterwards must not crash, whatever is still posted.
          std::printf("rank 0: close(%.1f s, %s) returned after %.2f s; destroying the transport\n", limit,
                      force ? "force" : "flush", took);
          std::fflush(stdout);
          c.destroyTransport();
          c.mark("closed");
          return err;
        },
        20);
  }
}

TEST_CASE("a peer killed with SIGKILL is reported and fails its requests within a bounded time", "[edges][death]") {
  if (!probeUnderTest().caps.detectsPeerDeath) {
    WARN("skipped: " << transportUnderTest() << " does not claim detectsPeerDeath");
    return;
  }
  constexpr double kBound = 10;
  // Rank 2 dies after the barrier; ranks 0 and 1 have a receive from it, a rendezvous-sized and a
  // small send to it in flight, and must also still reach each other afterwards.
  runAndCheck(
      3,
      [](RankContext& c) -> std::string {
        auto& t = c.transport();
        constexpr int kVictim = 2;
        c.skipFinalBarrier();
        std::vector<uint8_t> big(4 << 20, 1), small(64, 2), in(64);
        Request reqs[3];
        if (c.rank() != kVictim) {
          Status s = t.postRecv(kVictim, 500, kTagMask, in.data(), in.size(), &reqs[0]);
          if (s.isOk()) s = t.postSend(kVictim, 501, big.data(), big.size(), &reqs[1]);
          if (!s.isOk()) return "post failed: " + s.toString();
        }
        std::string err = c.barrier();
        if (!err.empty()) return err;
        if (c.rank() == kVictim) {
          raise(SIGKILL);
          return "still alive after SIGKILL";
        }
        auto t0 = Clock::now();
        // Wait for the report: the pending requests, or peerError, whichever the transport gives first.
        Deadline deadline = Deadline::after(kBound);
        Backoff backoff;
        while (t.peerError(kVictim).isOk() && !deadline.expired()) {
          if (t.progress()) backoff.reset();
          else backoff.pause();
        }
        double reported = secondsSince(t0);
        Status pe = t.peerError(kVictim);
        std::printf("rank %d: peerError(%d) after %.2f s: %s\n", c.rank(), kVictim, reported, pe.toString().c_str());
        if (pe.isOk())
          return "peerError(" + std::to_string(kVictim) + ") still ok " + std::to_string(kBound) + " s after its death";
        // A send posted after the report must fail too, not hang.
        Status s = t.postSend(kVictim, 502, small.data(), small.size(), &reqs[2]);
        if (!s.isOk()) reqs[2].state = Request::State::kFailed;  // refusing up front is a failure report too
        err = c.waitAll(reqs, 3, kBound - reported + 1, "requests involving the dead rank");
        std::string states = " (recv from it: " + stateName(reqs[0]) + "; 4 MiB send: " + stateName(reqs[1]) +
                             "; send after the report: " + stateName(reqs[2]) + ")";
        if (!err.empty()) err += states;
        // The 4 MiB send may have been taken whole before the death by a transport that buffers sends
        // (the victim's side kept it); it must end either way, and everything else must fail.
        for (int i = 0; err.empty() && i < 3; ++i) {
          if (i == 1 && probeUnderTest().caps.buffersSends && reqs[i].state == Request::State::kDone) continue;
          if (reqs[i].state != Request::State::kFailed) err = "a request involving the dead rank did not fail" + states;
        }
        // Whatever happened above, the survivors must still reach each other.
        if (!t.peerError(1 - c.rank()).isOk()) {
          return err + "; the living peer is reported failed: " + t.peerError(1 - c.rank()).toString();
        }
        Request pair[2];
        uint8_t a[8] = {1}, b[8] = {};
        s = t.postRecv(1 - c.rank(), 510, kTagMask, b, sizeof(b), &pair[0]);
        if (s.isOk()) s = t.postSend(1 - c.rank(), 510, a, sizeof(a), &pair[1]);
        if (!s.isOk()) return err + "; post between survivors failed: " + s.toString();
        std::string pairErr = c.waitAll(pair, 2, 10, "survivors' exchange");
        if (pairErr.empty() && (pair[0].state != Request::State::kDone || pair[1].state != Request::State::kDone)) {
          pairErr = "survivors' exchange failed: " + stateName(pair[0]) + ", " + stateName(pair[1]);
        }
        std::printf("rank %d: survivors' exchange: %s\n", c.rank(), pairErr.empty() ? "ok" : pairErr.c_str());
        std::fflush(stdout);
        if (!pairErr.empty()) err += (err.empty() ? "" : "; ") + pairErr;
        return err;
      },
      40, {0, 0, 128 + SIGKILL});
}

TEST_CASE("what a peer sent before it closed is still received after the close", "[edges][close]") {
  if (!probeUnderTest().caps.buffersSends) {
    WARN("skipped: " << transportUnderTest() << " completes large sends only when they are received");
    return;
  }
  // Rank 1 sends a large message (split over every stream where the transport splits) and a small
  // one, closes in order and exits; rank 0 receives only afterwards.
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    c.skipFinalBarrier();
    const size_t big = (4 << 20) + 3;
    if (c.rank() == 1) {
      std::vector<uint8_t> a(big), b(64);
      fillPattern(a.data(), a.size(), seedOf(1, 0, 900, 0));
      fillPattern(b.data(), b.size(), seedOf(1, 0, 901, 0));
      Request reqs[2];
      Status s = t.postSend(0, 900, a.data(), a.size(), &reqs[0]);
      if (s.isOk()) s = t.postSend(0, 901, b.data(), b.size(), &reqs[1]);
      if (!s.isOk()) return "post failed: " + s.toString();
      std::string err = c.waitAll(reqs, 2, 20, "sends before the close");
      if (!err.empty()) return err;
      t.close(10, false);
      return "";
    }
    c.spin(0.5);  // rank 1 has closed by now (its stream 0 may end before the rest is read)
    std::vector<uint8_t> a(big), b(64);
    Request reqs[2];
    Status s = t.postRecv(1, 900, kTagMask, a.data(), a.size(), &reqs[0]);
    if (s.isOk()) s = t.postRecv(1, 901, kTagMask, b.data(), b.size(), &reqs[1]);
    if (!s.isOk()) return "post failed: " + s.toString();
    std::string err = c.waitAll(reqs, 2, 20, "receives after the peer closed");
    if (err.empty()) err = checkReceived(reqs[0], 1, 900, big, "the large message");
    if (err.empty()) err = checkReceived(reqs[1], 1, 901, 64, "the small message");
    if (err.empty()) err = checkPattern(a.data(), big, seedOf(1, 0, 900, 0), "the large message");
    if (err.empty()) err = checkPattern(b.data(), 64, seedOf(1, 0, 901, 0), "the small message");
    return err;
  });
}
