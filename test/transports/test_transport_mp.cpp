// Transport conformance suite: the contract of transports/transport.hpp, checked on real processes
// over one transport per run (`--transport NAME`, or FERRY_TEST_TRANSPORT: ucx, ucx-local, shm,
// shm-rings, shm-refused, tcp, tcp-1; meson declares one test per transport). The ranks bootstrap the
// transport themselves (rank_harness.hpp). This file holds main() and the data path: sizes,
// ordering, any-peer receives, tags and many requests at once; transport_faults_mp.cpp holds the
// edges (truncation, self-sends, cancel, close, a peer that dies); conformance.cpp the shared
// checks. Checks a transport does not claim in its capabilities are skipped with a warning.
// FERRY_TEST_VERBOSE=1 prints every rank's output, passing or not.
#include <catch2/catch.hpp>

#include "test/common/catch_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "test/transports/conformance.hpp"

using namespace ferry;
using namespace ferry::test;
using transport::kAnyPeer;
using transport::kTagMask;
using transport::Request;

namespace {

// Sizes around every threshold either transport has (shm: 8128-byte slots, eager messages over
// several slots up to 32 KiB; UCX picks its own rendezvous threshold, typically some KiB over
// TCP), up to 16 MiB.
const size_t kSizes[] = {0,     1,     7,     64,     4095,    4096,          8127,    8128,
                         8129,  8192,  16383, 16385,  16256,   16257,         32767,   32768,
                         32769, 65536, 65537, 262147, 1 << 20, (4 << 20) + 1, 16 << 20};

// Message sizes the ordering checks cycle through: eager and rendezvous interleaved, so a large
// message may not be overtaken by the small ones posted after it.
const size_t kMixedSizes[] = {0, 1, 300, 8000, 9000, 70000, 13, 200000, 24000};
constexpr size_t kMixedMax = 200000;

size_t mixedSize(uint64_t seq) { return kMixedSizes[seq % std::size(kMixedSizes)]; }

}  // namespace

TEST_CASE("every payload size from 0 B to 16 MiB arrives intact, both directions at once", "[p2p]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    const int peer = 1 - c.rank();
    constexpr size_t kCanary = 64;
    for (size_t k = 0; k < std::size(kSizes); ++k) {
      const size_t bytes = kSizes[k];
      const uint64_t tag = 1000 + k;
      std::string what = std::to_string(bytes) + " B";
      std::vector<uint8_t> out(bytes), in(bytes + kCanary, 0xEE);
      fillPattern(out.data(), bytes, seedOf(c.rank(), peer, tag, 0));
      Request reqs[2];
      // The caller's cookie survives the whole operation.
      reqs[0].cookie = 0xC0FFEE00 + k;
      reqs[1].cookie = 0xC0FFEE80 + k;
      // Alternate which side is posted first, so both expected and unexpected arrivals occur.
      for (int i = 0; i < 2; ++i) {
        Status s = (i == int(k % 2)) ? t.postRecv(peer, tag, kTagMask, in.data(), bytes, &reqs[0])
                                     : t.postSend(peer, tag, out.data(), bytes, &reqs[1]);
        if (!s.isOk()) return what + ": post failed: " + s.toString();
      }
      std::string err = c.waitAll(reqs, 2, 20, what);
      if (err.empty()) err = checkReceived(reqs[0], peer, tag, bytes, what);
      if (err.empty()) err = checkSent(reqs[1], what);
      if (err.empty()) err = checkPattern(in.data(), bytes, seedOf(peer, c.rank(), tag, 0), what);
      if (err.empty()) err = checkUntouched(in.data(), bytes, bytes + kCanary, 0xEE, what);
      if (err.empty() && (reqs[0].cookie != 0xC0FFEE00 + k || reqs[1].cookie != 0xC0FFEE80 + k)) {
        err = what + ": the transport changed a request's cookie";
      }
      if (!err.empty()) return err;
    }
    return "";
  });
}

TEST_CASE("one sender's messages on one tag arrive in order, whether receives come before or after", "[p2p][order]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    constexpr int kCount = 160;
    constexpr uint64_t kTag = 77;
    std::vector<std::vector<uint8_t>> bufs(kCount, std::vector<uint8_t>(kMixedMax));
    std::vector<Request> reqs(kCount);
    // Phase 0: rank 0 sends everything before rank 1 posts a receive (unexpected messages).
    // Phase 1: rank 0 posts every receive before rank 1 sends (expected messages).
    for (int phase = 0; phase < 2; ++phase) {
      const int sender = phase == 0 ? 0 : 1;
      const int receiver = 1 - sender;
      const bool sendsFirst = phase == 0;
      std::string what = sendsFirst ? "sends posted before receives" : "receives posted before sends";
      auto postAll = [&]() -> std::string {
        for (int i = 0; i < kCount; ++i) {
          Status s;
          if (c.rank() == sender) {
            fillPattern(bufs[i].data(), mixedSize(i), seedOf(sender, receiver, kTag, i));
            s = t.postSend(receiver, kTag, bufs[i].data(), mixedSize(i), &reqs[i]);
          } else {
            s = t.postRecv(sender, kTag, kTagMask, bufs[i].data(), kMixedMax, &reqs[i]);
          }
          if (!s.isOk()) return what + ": post #" + std::to_string(i) + " failed: " + s.toString();
        }
        return "";
      };
      const bool postsBeforeBarrier = (c.rank() == sender) == sendsFirst;
      std::string err = postsBeforeBarrier ? postAll() : "";
      if (err.empty()) err = c.barrier();
      if (err.empty() && !postsBeforeBarrier) err = postAll();
      if (err.empty()) err = c.waitAll(reqs.data(), kCount, 30, what);
      for (int i = 0; err.empty() && i < kCount; ++i) {
        std::string m = what + ", message #" + std::to_string(i);
        if (c.rank() == sender) {
          err = checkSent(reqs[i], m);
        } else {
          err = checkReceived(reqs[i], sender, kTag, mixedSize(i), m);
          if (err.empty()) err = checkPattern(bufs[i].data(), mixedSize(i), seedOf(sender, receiver, kTag, i), m);
        }
      }
      if (!err.empty()) return err;
    }
    return "";
  });
}

// The shared-memory transport carries an eager message over several ring slots; a receive posted
// when only the first of them have arrived (taken into the unexpected list) must get the whole
// message. The sender fills more than the ring, then stops driving its transport while the
// receiver drains what arrived before posting anything.
TEST_CASE("a receive posted while a message is part way through arriving gets all of it", "[p2p][order]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    constexpr int kCount = 12;
    constexpr size_t kBytes = 24000;  // three shm slots: the eleventh message straddles the ring's end
    constexpr uint64_t kTag = 78;
    std::vector<std::vector<uint8_t>> bufs(kCount, std::vector<uint8_t>(kBytes));
    std::vector<Request> reqs(kCount);
    if (c.rank() == 0) {
      for (int i = 0; i < kCount; ++i) {
        fillPattern(bufs[i].data(), kBytes, seedOf(0, 1, kTag, i));
        Status s = t.postSend(1, kTag, bufs[i].data(), kBytes, &reqs[i]);
        if (!s.isOk()) return "post #" + std::to_string(i) + " failed: " + s.toString();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(700));  // no progress: the rest waits
      return c.waitAll(reqs.data(), kCount, 20, "the sends");
    }
    // The sender's posts first (they fill the ring), then drain what arrived without a receive.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    c.spin(0.25);
    for (int i = 0; i < kCount; ++i) {
      Status s = t.postRecv(0, kTag, kTagMask, bufs[i].data(), kBytes, &reqs[i]);
      if (!s.isOk()) return "post #" + std::to_string(i) + " failed: " + s.toString();
    }
    std::string err = c.waitAll(reqs.data(), kCount, 20, "the receives");
    for (int i = 0; err.empty() && i < kCount; ++i) {
      const std::string m = "message #" + std::to_string(i);
      err = checkReceived(reqs[i], 0, kTag, kBytes, m);
      if (err.empty()) err = checkPattern(bufs[i].data(), kBytes, seedOf(0, 1, kTag, i), m);
    }
    return err;
  });
}

TEST_CASE("a receive from any peer reports source and sender's tag and keeps each sender's order", "[p2p][order]") {
  for (int n : {3, 4}) {
    runAndCheck(n, [](RankContext& c) -> std::string {
      auto& t = c.transport();
      constexpr int kPerSender = 48;
      // The receive matches every tag with this high part; each sender sets the low 16 bits to
      // (rank, sequence), so peerTag tells which message arrived.
      constexpr uint64_t kBase = uint64_t{0xA5C3} << 24;
      constexpr uint64_t kMask = kTagMask & ~uint64_t{0xFFFF};
      auto tagOf = [&](int from, int seq) { return kBase | (uint64_t(from) << 8) | uint64_t(seq); };
      const int senders = c.size() - 1;
      if (c.rank() != 0) {
        std::string err = c.barrier();
        std::vector<std::vector<uint8_t>> bufs(kPerSender);
        std::vector<Request> reqs(kPerSender);
        for (int i = 0; err.empty() && i < kPerSender; ++i) {
          bufs[i].resize(mixedSize(i + c.rank()));
          fillPattern(bufs[i].data(), bufs[i].size(), seedOf(c.rank(), 0, tagOf(c.rank(), i), i));
          Status s = t.postSend(0, tagOf(c.rank(), i), bufs[i].data(), bufs[i].size(), &reqs[i]);
          if (!s.isOk()) err = "postSend failed: " + s.toString();
        }
        if (err.empty()) err = c.waitAll(reqs.data(), kPerSender, 30, "any-peer sends");
        for (int i = 0; err.empty() && i < kPerSender; ++i) err = checkSent(reqs[i], "send #" + std::to_string(i));
        return err;
      }
      // Rank 0: half of the receives before the senders start, half after.
      const int total = kPerSender * senders;
      std::vector<std::vector<uint8_t>> bufs(total, std::vector<uint8_t>(kMixedMax));
      std::vector<Request> reqs(total);
      auto post = [&](int from, int to) -> std::string {
        for (int i = from; i < to; ++i) {
          Status s = t.postRecv(kAnyPeer, kBase, kMask, bufs[i].data(), kMixedMax, &reqs[i]);
          if (!s.isOk()) return "postRecv(kAnyPeer) failed: " + s.toString();
        }
        return "";
      };
      std::string err = post(0, total / 2);
      if (err.empty()) err = c.barrier();
      if (err.empty()) err = post(total / 2, total);
      if (err.empty()) err = c.waitAll(reqs.data(), total, 30, "any-peer receives");
      std::vector<int> next(c.size(), 0);
      for (int i = 0; err.empty() && i < total; ++i) {
        const Request& r = reqs[i];
        std::string what = "any-peer receive #" + std::to_string(i);
        if (r.state != Request::State::kDone) return what + " failed: " + r.error;
        if (r.source < 1 || r.source >= c.size())
          return what + ": source " + std::to_string(r.source) + " is no sender";
        const int seq = next[r.source]++;
        err = checkReceived(r, r.source, tagOf(r.source, seq), mixedSize(seq + r.source),
                            what + " (rank " + std::to_string(r.source) + "'s #" + std::to_string(seq) + ")");
        if (err.empty()) {
          err = checkPattern(bufs[i].data(), r.received, seedOf(r.source, 0, tagOf(r.source, seq), seq), what);
        }
      }
      for (int s = 1; err.empty() && s < c.size(); ++s) {
        if (next[s] != kPerSender)
          err = "rank " + std::to_string(s) + " delivered " + std::to_string(next[s]) + " messages";
      }
      return err;
    });
  }
}

TEST_CASE("receives naming the sender and any-peer receives match in the order they were posted", "[p2p][order]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    constexpr uint64_t kTag = 4242;
    constexpr int kCount = 8;
    // Receive i names the sender when i is even and any peer when odd. Half of the messages are
    // sent before the receives exist (phase 0), half after (phase 1); either way message i must
    // land in receive i, whatever its kind and size.
    for (int phase = 0; phase < 2; ++phase) {
      std::vector<std::vector<uint8_t>> bufs(kCount, std::vector<uint8_t>(kMixedMax));
      std::vector<Request> reqs(kCount);
      const bool sendsFirst = phase == 0;
      auto postAll = [&]() -> std::string {
        for (int i = 0; i < kCount; ++i) {
          const uint64_t seq = uint64_t(phase) * kCount + i;
          Status s;
          if (c.rank() == 0) {
            fillPattern(bufs[i].data(), mixedSize(seq), seedOf(0, 1, kTag, seq));
            s = t.postSend(1, kTag, bufs[i].data(), mixedSize(seq), &reqs[i]);
          } else {
            s = t.postRecv(i % 2 ? kAnyPeer : 0, kTag, kTagMask, bufs[i].data(), kMixedMax, &reqs[i]);
          }
          if (!s.isOk()) return "post failed: " + s.toString();
        }
        return "";
      };
      const bool postsBeforeBarrier = (c.rank() == 0) == sendsFirst;
      std::string err = postsBeforeBarrier ? postAll() : "";
      if (err.empty()) err = c.barrier();
      if (err.empty() && !postsBeforeBarrier) err = postAll();
      if (err.empty()) err = c.waitAll(reqs.data(), kCount, 20, "mixed receives");
      for (int i = 0; err.empty() && i < kCount; ++i) {
        const uint64_t seq = uint64_t(phase) * kCount + i;
        std::string what = std::string(sendsFirst ? "sent first" : "received first") + ", " +
                           (i % 2 ? "any-peer" : "named") + " receive #" + std::to_string(i);
        if (c.rank() == 0) {
          err = checkSent(reqs[i], what);
        } else {
          err = checkReceived(reqs[i], 0, kTag, mixedSize(seq), what);
          if (err.empty()) err = checkPattern(bufs[i].data(), mixedSize(seq), seedOf(0, 1, kTag, seq), what);
        }
      }
      if (!err.empty()) return err;
    }
    return "";
  });
}

TEST_CASE("different tags never match each other; the mask decides which bits count", "[p2p][tags]") {
  runAndCheck(2, [](RankContext& c) -> std::string {
    auto& t = c.transport();
    // Tags that differ in one bit each (the lowest, the highest of the caller's 40) or not at all.
    const uint64_t tags[] = {0, 1, 2, uint64_t{1} << 39, (uint64_t{1} << 39) | 1, kTagMask - 1};
    constexpr size_t kN = std::size(tags);
    constexpr uint64_t kNeverSent = 3;
    // The masked receive's own low byte (0x77) lies outside its mask and must not matter.
    constexpr uint64_t kMasked = 0xAB77, kMaskedSent = 0xAB42, kOther = 0xAC42;
    constexpr size_t kBytes = 24;
    if (c.rank() == 0) {
      // In tag order, then the masked pair: 0xAC42 first, which the masked receive must not take.
      std::vector<std::vector<uint8_t>> bufs(kN + 2, std::vector<uint8_t>(kBytes + 9000));
      std::vector<Request> reqs(kN + 2);
      std::vector<uint64_t> sent(tags, tags + kN);
      sent.push_back(kOther);
      sent.push_back(kMaskedSent);
      for (size_t i = 0; i < sent.size(); ++i) {
        size_t bytes = i % 2 ? kBytes + 9000 : kBytes;  // eager and rendezvous alike
        fillPattern(bufs[i].data(), bytes, seedOf(0, 1, sent[i], 0));
        Status s = t.postSend(1, sent[i], bufs[i].data(), bytes, &reqs[i]);
        if (!s.isOk()) return "postSend failed: " + s.toString();
        if (i == kN / 2) {
          std::string err = c.barrier();  // rank 1 has posted its first receives
          if (!err.empty()) return err;
        }
      }
      std::string err = c.waitAll(reqs.data(), reqs.size(), 20, "tagged sends");
      for (size_t i = 0; err.empty() && i < reqs.size(); ++i)
        err = checkSent(reqs[i], "send on tag " + std::to_string(sent[i]));
      return err;
    }
    // Rank 1 posts in reverse tag order, the masked receive before the exact one for 0xAC42, and
    // one receive on a tag nobody sends.
    std::vector<std::vector<uint8_t>> bufs(kN + 3, std::vector<uint8_t>(kBytes + 9000));
    std::vector<Request> reqs(kN + 3);
    std::vector<uint64_t> wanted;
    for (size_t i = 0; i < kN; ++i) wanted.push_back(tags[kN - 1 - i]);
    auto sizeOf = [&](uint64_t tag) {
      for (size_t i = 0; i < kN; ++i) {
        if (tags[i] == tag) return i % 2 ? kBytes + 9000 : kBytes;
      }
      return tag == kOther ? kBytes : kBytes + 9000;  // index kN and kN+1 on the sender
    };
    Request never;
    std::vector<uint8_t> neverBuf(64);
    Status s = t.postRecv(0, kNeverSent, kTagMask, neverBuf.data(), neverBuf.size(), &never);
    if (!s.isOk()) return "postRecv failed: " + s.toString();
    for (size_t i = 0; i < kN; ++i) {
      s = t.postRecv(0, wanted[i], kTagMask, bufs[i].data(), bufs[i].size(), &reqs[i]);
      if (!s.isOk()) return "postRecv failed: " + s.toString();
      if (i == kN / 2) {
        std::string err = c.barrier();
        if (!err.empty()) return err;
      }
    }
    s = t.postRecv(0, kMasked, 0xFF00, bufs[kN].data(), bufs[kN].size(), &reqs[kN]);
    if (s.isOk()) s = t.postRecv(0, kOther, kTagMask, bufs[kN + 1].data(), bufs[kN + 1].size(), &reqs[kN + 1]);
    if (!s.isOk()) return "postRecv failed: " + s.toString();
    std::string err = c.waitAll(reqs.data(), kN + 2, 20, "tagged receives");
    wanted.push_back(kMaskedSent);
    wanted.push_back(kOther);
    for (size_t i = 0; err.empty() && i < kN + 2; ++i) {
      std::string what = "receive on tag " + std::to_string(i == kN ? kMasked : wanted[i]);
      err = checkReceived(reqs[i], 0, wanted[i], sizeOf(wanted[i]), what);
      if (err.empty()) err = checkPattern(bufs[i].data(), reqs[i].received, seedOf(0, 1, wanted[i], 0), what);
    }
    if (!err.empty()) return err;
    c.spin(0.1);
    if (!never.pending())
      return "a receive on a tag nobody sent ended: " + (never.error.empty() ? "done" : never.error);
    t.cancel(&never);
    err = c.wait(never, 5, "canceled receive");
    if (err.empty() && never.state != Request::State::kFailed)
      err = "a canceled receive that matched nothing ended kDone";
    return err;
  });
}

TEST_CASE("hundreds of concurrent requests to and from every peer, in a shuffled order", "[p2p][load]") {
  for (int n : {2, 3, 4}) {
    runAndCheck(
        n,
        [](RankContext& c) -> std::string {
          auto& t = c.transport();
          constexpr int kPerPeer = 96;  // sends and as many receives per peer: 576 requests at 4 ranks
          auto sizeOf = [](int i) -> size_t { return i % 32 == 5 ? 300000 : i % 8 == 3 ? 20000 : size_t(i * 7 % 500); };
          // Every fourth message shares tag 9 (order matters there); the rest have a tag of their own.
          auto tagOf = [](int i) -> uint64_t { return i % 4 == 0 ? 9 : 100 + uint64_t(i); };
          struct Op {
            bool send;
            int peer;
            int i;
          };
          std::vector<Op> ops;
          for (int p = 0; p < c.size(); ++p) {
            if (p == c.rank()) continue;
            for (int i = 0; i < kPerPeer; ++i) ops.push_back({true, p, i});
            for (int i = 0; i < kPerPeer; ++i) ops.push_back({false, p, i});
          }
          // Shuffle, then restore per-(peer, tag 9) post order so the expected pairing is defined.
          std::mt19937 rng(1234 + c.rank());
          std::shuffle(ops.begin(), ops.end(), rng);
          for (bool send : {true, false}) {
            for (int p = 0; p < c.size(); ++p) {
              std::vector<int> at, seqs;
              for (size_t k = 0; k < ops.size(); ++k) {
                if (ops[k].send == send && ops[k].peer == p && tagOf(ops[k].i) == 9) {
                  at.push_back(int(k));
                  seqs.push_back(ops[k].i);
                }
              }
              std::sort(seqs.begin(), seqs.end());
              for (size_t j = 0; j < at.size(); ++j) ops[at[j]].i = seqs[j];
            }
          }
          std::vector<std::vector<uint8_t>> bufs(ops.size());
          std::vector<Request> reqs(ops.size());
          for (size_t k = 0; k < ops.size(); ++k) {
            const Op& o = ops[k];
            bufs[k].resize(sizeOf(o.i));
            Status s;
            if (o.send) {
              fillPattern(bufs[k].data(), bufs[k].size(), seedOf(c.rank(), o.peer, tagOf(o.i), o.i));
              s = t.postSend(o.peer, tagOf(o.i), bufs[k].data(), bufs[k].size(), &reqs[k]);
            } else {
              s = t.postRecv(o.peer, tagOf(o.i), kTagMask, bufs[k].data(), bufs[k].size(), &reqs[k]);
            }
            if (!s.isOk()) return "post failed: " + s.toString();
            if (k % 16 == 0) t.progress();  // some arrive while others are still being posted
          }
          std::string err =
              c.waitAll(reqs.data(), reqs.size(), 40, std::to_string(reqs.size()) + " concurrent requests");
          for (size_t k = 0; err.empty() && k < ops.size(); ++k) {
            const Op& o = ops[k];
            std::string what = std::string(o.send ? "send to " : "receive from ") + std::to_string(o.peer) + " #" +
                               std::to_string(o.i);
            if (o.send) {
              err = checkSent(reqs[k], what);
            } else {
              err = checkReceived(reqs[k], o.peer, tagOf(o.i), sizeOf(o.i), what);
              if (err.empty())
                err = checkPattern(bufs[k].data(), sizeOf(o.i), seedOf(o.peer, c.rank(), tagOf(o.i), o.i), what);
            }
          }
          return err;
        },
        60);
  }
}

int testMain(int argc, char** argv, RunCatch runCatch) {
  // `--transport NAME` (or FERRY_TEST_TRANSPORT) picks the transport; the rest goes to Catch.
  std::vector<char*> rest;
  std::string name;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--transport" && i + 1 < argc) {
      name = argv[++i];
    } else if (a.rfind("--transport=", 0) == 0) {
      name = a.substr(12);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (name.empty() && std::getenv("FERRY_TEST_TRANSPORT") != nullptr) name = std::getenv("FERRY_TEST_TRANSPORT");
  const auto& names = transportNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::fprintf(stderr, "usage: %s --transport NAME [catch options]; NAME is one of:", argv[0]);
    for (const auto& n : names) std::fprintf(stderr, " %s", n.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const TransportProbe& probe = setTransportUnderTest(name);
  if (!probe.available) {
    std::printf("transport %s is not available here: %s\n", name.c_str(), probe.why.c_str());
    return 77;  // meson: SKIP
  }
  std::printf("transport %s (name() \"%s\"): zeroCopy %d, deviceMemory %d, detectsPeerDeath %d, buffersSends %d\n",
              name.c_str(), probe.name.c_str(), probe.caps.zeroCopy, probe.caps.deviceMemory,
              probe.caps.detectsPeerDeath, probe.caps.buffersSends);
  return runCatch(static_cast<int>(rest.size()), rest.data());
}

// Not a test: `test_transport_mp --transport T "[.throughput]"` prints how fast one rank streams
// messages to another (sizes as FERRY_TEST_BYTES, default 256 KiB; 8 receives posted ahead).
TEST_CASE("throughput of one pair", "[.throughput]") {
  runAndCheck(
      2,
      [](RankContext& c) -> std::string {
        auto& t = c.transport();
        const char* env = std::getenv("FERRY_TEST_BYTES");
        const size_t bytes = env != nullptr ? std::strtoull(env, nullptr, 10) : (256 << 10);
        const size_t total = size_t{512} << 20;
        const int count = static_cast<int>(std::max<size_t>(total / std::max<size_t>(bytes, 1), 16));
        constexpr int kDepth = 8;
        std::vector<std::vector<uint8_t>> bufs(kDepth, std::vector<uint8_t>(bytes, 1));
        Request reqs[kDepth];
        auto t0 = Clock::now();
        for (int i = 0; i < count; ++i) {
          Request& r = reqs[i % kDepth];
          if (r.pending()) {
            std::string err = c.wait(r, 30, "message");
            if (!err.empty()) return err;
          }
          r = Request{};
          Status s = c.rank() == 0 ? t.postSend(1, 7, bufs[i % kDepth].data(), bytes, &r)
                                   : t.postRecv(0, 7, kTagMask, bufs[i % kDepth].data(), bytes, &r);
          if (!s.isOk()) return s.toString();
        }
        std::string err = c.waitAll(reqs, kDepth, 30, "last messages");
        double s = secondsSince(t0);
        if (c.rank() == 1) std::printf("%zu B x %d: %.3f GB/s\n", bytes, count, double(bytes) * count / s / 1e9);
        return err;
      },
      120);
}
