// Huge pages under buffers peers read (transports/shm/huge_pages.hpp): which regions are
// collapsed when, with a recording stand-in for the kernel; then the kernel's own MADV_COLLAPSE on
// this process's memory, where transparent huge pages are on.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transports/shm/huge_pages.hpp"

using namespace ferry::transport::shm;

namespace {

constexpr size_t kRegion = size_t{2} << 20;
constexpr uintptr_t kBase = uintptr_t{0x7f0000000000};  // never touched: the stand-in only records

// A HugeBacking whose kernel records each run it is asked to collapse and answers `answer`.
struct Recorded {
  std::mutex mutex;
  std::vector<std::pair<uintptr_t, size_t>> runs;
  int answer = 0;
  HugeBacking backing;
  explicit Recorded(size_t maxRegions = size_t{1} << 16)
      : backing(
            kRegion,
            [this](void* addr, size_t bytes) {
              std::lock_guard<std::mutex> lock(mutex);
              runs.emplace_back(reinterpret_cast<uintptr_t>(addr), bytes);
              return answer;
            },
            maxRegions) {}
  void offer(uintptr_t at, size_t bytes) { backing.offer(reinterpret_cast<const void*>(at), bytes); }
};

}  // namespace

TEST_CASE("a region is collapsed on its second offer, whole regions only", "[huge]") {
  Recorded r;
  r.offer(kBase + 4096, kRegion);  // holds no whole region
  r.offer(kBase + 4096, kRegion);
  CHECK(r.runs.empty());

  // [base + 1 MiB, base + 7 MiB) holds the regions at 2 and 4 MiB.
  r.offer(kBase + (size_t{1} << 20), 6 << 20);
  CHECK(r.runs.empty());
  r.offer(kBase + (size_t{1} << 20), 6 << 20);
  REQUIRE(r.runs.size() == 1);
  CHECK(r.runs[0].first == kBase + kRegion);
  CHECK(r.runs[0].second == 2 * kRegion);
  CHECK(r.backing.counts().collapsed == 2);

  // On huge pages now: not asked again until the recheck.
  r.runs.clear();
  for (uint32_t i = 1; i < HugeBacking::kRecheckOffers; ++i) r.offer(kBase + (size_t{1} << 20), 6 << 20);
  CHECK(r.runs.empty());
  r.offer(kBase + (size_t{1} << 20), 6 << 20);
  CHECK(r.runs.size() == 1);
}

TEST_CASE("only the regions due are collapsed, in contiguous runs", "[huge]") {
  Recorded r;
  r.offer(kBase, 2 * kRegion);
  r.offer(kBase, 2 * kRegion);  // regions 0 and 1 collapsed
  r.offer(kBase + 3 * kRegion, kRegion);
  r.runs.clear();
  // Regions 0..4: 0 and 1 are huge, 2 and 4 are new, 3 was seen once.
  r.offer(kBase, 5 * kRegion);
  REQUIRE(r.runs.size() == 1);
  CHECK(r.runs[0] == std::make_pair(kBase + 3 * kRegion, kRegion));
  r.runs.clear();
  r.offer(kBase, 5 * kRegion);  // now 2 and 4, apart
  REQUIRE(r.runs.size() == 2);
  CHECK(r.runs[0] == std::make_pair(kBase + 2 * kRegion, kRegion));
  CHECK(r.runs[1] == std::make_pair(kBase + 4 * kRegion, kRegion));
}

TEST_CASE("a refused region is retried at doubling intervals, capped", "[huge]") {
  Recorded r;
  r.answer = EAGAIN;
  r.offer(kBase, kRegion);
  r.offer(kBase, kRegion);
  REQUIRE(r.runs.size() == 1);
  CHECK(r.backing.counts().refused == 1);
  std::vector<int> gaps;  // offers between tries
  int since = 0;
  for (int i = 0; i < 8000 && gaps.size() < 9; ++i) {
    const size_t before = r.runs.size();
    r.offer(kBase, kRegion);
    ++since;
    if (r.runs.size() != before) {
      gaps.push_back(since);
      since = 0;
    }
  }
  const std::vector<int> expected{8, 16, 32, 64, 128, 256, 512, 1024, 1024};
  CHECK(gaps == expected);

  // Once the kernel takes it, it counts as huge.
  r.answer = 0;
  for (int i = 0; i < 1024; ++i) r.offer(kBase, kRegion);
  CHECK(r.backing.counts().collapsed == 1);
}

TEST_CASE("the memory of offers starts afresh past its bound", "[huge]") {
  Recorded r(4);
  r.offer(kBase, 3 * kRegion);
  r.offer(kBase + 8 * kRegion, 3 * kRegion);  // 6 regions > 4: forgets the first three
  r.offer(kBase, 3 * kRegion);                // seen once again, not twice
  CHECK(r.runs.empty());
  r.offer(kBase, 3 * kRegion);
  CHECK(r.runs.size() == 1);
}

TEST_CASE("threads offering one buffer at once collapse it once", "[huge]") {
  Recorded r;
  r.offer(kBase, 8 * kRegion);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) r.offer(kBase, 8 * kRegion);
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(r.runs.size() == 1);
  CHECK(r.runs[0] == std::make_pair(kBase, 8 * kRegion));
}

namespace {

// AnonHugePages of the mapping that contains `addr`, in KiB (-1: not found).
long anonHugeKb(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  const auto want = reinterpret_cast<uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = want >= lo && want < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

}  // namespace

TEST_CASE("the kernel moves an offered buffer onto huge pages and keeps its bytes", "[huge]") {
  HugeBacking* backing = processHugeBacking();
  if (backing == nullptr) {
    WARN("transparent huge pages are off on this machine: nothing to check");
    return;
  }
  const size_t region = backing->regionBytes();
  const size_t bytes = 4 * region;
  // A guard page on each side keeps the mapping apart from its neighbours (no merged mapping
  // whose huge pages would count here).
  const size_t total = 4096 + bytes + region + 4096;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* base = static_cast<uint8_t*>(m);
  mprotect(base, 4096, PROT_NONE);
  mprotect(base + total - 4096, 4096, PROT_NONE);
  // Two pages past a region boundary at most, as malloc's buffers are: three whole regions inside.
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + 4096 + region - 1) & ~(region - 1);
  auto* buf = reinterpret_cast<uint8_t*>(aligned) + 4096;
  // Faulted in on small pages. Where the system gives huge pages to every mapping ("always"),
  // only a mapping marked otherwise gets small ones, and MADV_HUGEPAGE must then make it eligible
  // again, which also lets khugepaged collapse it on its own; elsewhere nothing is marked, so only
  // the offers can collapse it.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  const bool always = mode.find("[always]") != std::string::npos;
  if (always) madvise(base + 4096, bytes + region, MADV_NOHUGEPAGE);
  for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  if (always) madvise(base + 4096, bytes + region, MADV_HUGEPAGE);
  const long hugeBefore = anonHugeKb(buf);
  REQUIRE(hugeBefore == 0);
  const auto before = backing->counts();
  backing->offer(buf, bytes);
  if (!always) CHECK(anonHugeKb(buf) == 0);  // the first offer only remembers
  backing->offer(buf, bytes);
  const auto after = backing->counts();
  if (after.refused > before.refused) {
    WARN("the kernel refused MADV_COLLAPSE here (a kernel before 6.1?): reads stay on small pages");
  } else {
    CHECK(after.collapsed - before.collapsed == 3);
    if (always) {
      CHECK(anonHugeKb(buf) >= static_cast<long>(3 * region / 1024));
    } else {
      CHECK(anonHugeKb(buf) == static_cast<long>(3 * region / 1024));
    }
  }
  bool same = true;
  for (size_t i = 0; i < bytes && same; ++i) same = buf[i] == static_cast<uint8_t>(i * 131 + (i >> 12));
  CHECK(same);
  munmap(m, total);
}
