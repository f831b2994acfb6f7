// Memory under load: a long run of mixed calls must not make a rank's private memory grow.
//
// Each rank makes kCalls calls (all-reduce, broadcast, all-gather, reduce, reduce-scatter,
// all-to-all and send/receive pairs, mostly small, every kLargeEvery-th one large) from buffers it
// allocates once, so whatever grows is ferry's. It samples its anonymous memory (Pss_Anon of
// /proc/self/smaps_rollup: what malloc and anonymous maps hold, not the shared mailboxes) after a
// warm-up and every kSampleEvery calls, prints the samples, and fails when the last one exceeds
// the first by more than growthLimitKb(). The meson row runs it over the tcp transport, with
// FERRY_TEST_HOSTS=2 so that calls cross it between two "hosts" (it runs as well over ucx, or over
// shm with FERRY_ALGO=ring,chain,pairwise).
#include <malloc.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test/common/mp_harness.hpp"

using namespace ferry;
using namespace ferry::test;

namespace {

constexpr int kCalls = 10000;
constexpr int kSampleEvery = 2000;
constexpr int kWarmupCalls = 1000;
constexpr int kLargeEvery = 17;            // a prime, not a multiple of the 7 kinds: large calls visit them all
constexpr size_t kLargestCount = 1 << 20;  // float32 elements of the largest call (4 MiB)
constexpr size_t kSmallCounts[] = {1, 7, 64, 252, 1023, 4099};
constexpr int kKinds = 7;
// What a rank may gain after the warm-up without anything growing without bound: the tuner's plan
// caches (4096 sizes each at most, and nearly every large call here has a new size), the UCX
// request pools and malloc's bookkeeping: several times what they add up to over these calls, and
// a fraction of what the TCP pool added before it was bounded.
constexpr long kSlackKb = 4096;

// The growth a rank may show: the slack, plus over tcp the transport's pool of freed message
// memory (FERRY_SOCKET_POOL_BYTES, 8 MiB by default), which may hold nothing at the first sample
// and all it may keep at the last.
long growthLimitKb() {
  const char* transport = std::getenv("FERRY_TRANSPORT");
  if (transport == nullptr || std::string(transport) != "tcp") return kSlackKb;
  const char* pool = std::getenv("FERRY_SOCKET_POOL_BYTES");
  const long long poolBytes = pool != nullptr ? std::atoll(pool) : (8ll << 20);
  return kSlackKb + static_cast<long>(poolBytes >> 10);
}

// Pss_Anon of this process in KiB, or -1 when the kernel does not say.
long anonKb() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  long value = -1;
  while (in >> key) {
    if (key == "Pss_Anon:") {
      in >> value;
      return value;
    }
    std::getline(in, key);
  }
  return -1;
}

// anonKb() while no message is on its way to this rank: every rank has finished the calls before
// the first barrier, and none starts the next call before this rank has joined the second. Free
// memory inside malloc's heap goes back to the system first: what is measured is what ferry holds,
// not where malloc happened to place it.
Result<long> quietAnonKb(Comm& c) {
  FERRY_TRY(c.barrier());
  malloc_trim(0);
  const long kb = anonKb();
  FERRY_TRY(c.barrier());
  return kb;
}

std::string failed(const Status& s, const char* what, int call) {
  return std::string(what) + " (call " + std::to_string(call) + ") returned " + s.toString();
}

// Call `i` of the mix: kind i % kKinds, mostly small; every kLargeEvery-th call moves an assorted
// large count (a fixed pseudo-random sequence, the same on every rank), up to kLargestCount.
size_t countOf(int i) {
  if (i % kLargeEvery != kLargeEvery - 1) return kSmallCounts[static_cast<size_t>(i) % std::size(kSmallCounts)];
  uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return kLargestCount / 64 + x % (kLargestCount - kLargestCount / 64);
}

Status oneCall(Comm& c, int kind, size_t count, float* send, float* recv) {
  const int n = c.size();
  const size_t block = count / static_cast<size_t>(n) + 1;
  const int root = static_cast<int>(count % static_cast<size_t>(n));
  switch (kind) {
    case 0: return c.allReduce(send, recv, count, DataType::kFloat32, RedOp::kSum);
    case 1: return c.broadcast(send, recv, count, DataType::kFloat32, root);
    case 2: return c.allGather(send, recv, block, DataType::kFloat32);
    case 3: return c.reduce(send, recv, count, DataType::kFloat32, RedOp::kMax, root);
    case 4: return c.reduceScatter(send, recv, block, DataType::kFloat32, RedOp::kSum);
    case 5: return c.allToAll(send, recv, block, DataType::kFloat32);
    default: {
      // A ring of sends: each rank to the next, from the previous.
      const int to = (c.rank() + 1) % n, from = (c.rank() + n - 1) % n;
      return c.sendRecv(
          {P2pOp::send(send, count, DataType::kFloat32, to), P2pOp::recv(recv, count, DataType::kFloat32, from)});
    }
  }
}

}  // namespace

TEST_CASE("private memory stays flat over 10,000 mixed calls", "[mp][memory]") {
  const int n = launchedWorldSize() > 0 ? launchedWorldSize() : 3;
  auto outcomes = runRanks(
      n,
      [](Comm& c) -> std::string {
        // Every buffer holds the largest call's n blocks, allocated and touched once.
        const size_t elems = (kLargestCount / static_cast<size_t>(c.size()) + 1) * static_cast<size_t>(c.size());
        std::vector<float> send(elems, 1.0f), recv(elems, 0.0f);
        // Warm-up: each kind at the largest count (what ferry keeps per communicator for its largest
        // call, like the scratch memory, reaches its size), then a round of the mix.
        for (int kind = 0; kind < kKinds; ++kind) {
          Status s = oneCall(c, kind, kLargestCount, send.data(), recv.data());
          if (!s.isOk()) return failed(s, "a warm-up call", kind);
        }
        for (int i = 0; i < kWarmupCalls; ++i) {
          Status s = oneCall(c, i % kKinds, countOf(i), send.data(), recv.data());
          if (!s.isOk()) return failed(s, "a warm-up call", i);
        }
        std::vector<long> samples;
        for (int i = 0; i < kCalls; ++i) {
          if (i % kSampleEvery == 0) {
            auto kb = quietAnonKb(c);
            if (!kb.isOk()) return failed(kb.status(), "a barrier", i);
            samples.push_back(*kb);
          }
          // Sizes the warm-up did not see: a pool that keeps every size it met would grow.
          Status s = oneCall(c, i % kKinds, countOf(kWarmupCalls + i), send.data(), recv.data());
          if (!s.isOk()) return failed(s, "a call", i);
        }
        auto last = quietAnonKb(c);
        if (!last.isOk()) return failed(last.status(), "a barrier", kCalls);
        samples.push_back(*last);
        std::string line = "rank " + std::to_string(c.rank()) + " Pss_Anon KiB at calls 0..10k after warm-up:";
        for (long kb : samples) line += " " + std::to_string(kb);
        std::fprintf(stderr, "%s\n", line.c_str());
        if (samples.front() < 0) return "";  // no Pss_Anon on this kernel: nothing to compare
        const long growth = samples.back() - samples.front(), limit = growthLimitKb();
        if (growth > limit) {
          return line + ": grew by " + std::to_string(growth) + " KiB, more than " + std::to_string(limit);
        }
        return "";
      },
      120);
  for (const RankOutcome& o : outcomes) std::printf("%s", o.output.c_str());
  CHECK(summarize(outcomes) == "");
}
