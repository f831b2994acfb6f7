// memcpy-rate: how fast one core copies memory, the ceiling against which bench/compare reads the
// host collectives' bandwidths.
//
//   memcpy-rate [SIZE ...] [-P N [-W STEPS] | -H | -C] [-J FILE]   sizes with K, M, G (powers of 1024);
//                                                                   default 16M 256M
//
// For each size: two page-aligned buffers, written once so that no page fault is timed, then
// memcpy from one to the other, repeated, the best (shortest) copy kept. The rate is bytes copied
// per second in GB/s (10^9 bytes/s); the memory system moves twice that (each byte is read and
// written). Repeats: enough for about 2 GiB of copies per size, at least 5. The process runs on
// whatever core the scheduler gives it; bench/compare runs it before and after the libraries.
//
// -P N: N processes copy at once, each between buffers of its own of SIZE bytes, every repeat
// started together (a barrier in shared memory); a repeat lasts until its slowest copy ends, and
// the rate is per process (SIZE over that time). This is what N ranks that each copy SIZE bytes
// can reach together: 2 ranks of an out-of-place all-gather or all-to-all each write their whole
// output, so their bus bandwidth cannot pass half of the -P 2 rate.
//
// -W STEPS: each process walks through buffers sized for the largest SIZE given, as ferry-perf's
// sweep walks nccl-tests' shifts: copy i moves SIZE bytes at offset (i mod steps) x SIZE, steps
// being STEPS or as many as fit. So the data a size's copies touch is what a sweep's -n STEPS
// timed calls touch: in the caches up to some size, from memory past it, and a benchmark's bus
// bandwidth steps down there whatever the library does (./run bench prints both).
//
// -H: hand-off. Two processes take turns through one buffer of SIZE bytes in shared memory: one
// copies its own SIZE bytes in, then the other copies them out to its own buffer, as a mailbox
// passes data between ranks that hold plain buffers. A repeat is both copies; the rate is SIZE
// over that time. The second copy reads lines the other core has just written, and the first
// writes lines the other core has just read, so this measures what moving a cache line between
// the two cores costs, which a single-core memcpy does not see.
//
// -C: cross-memory attach. One process reads another's buffer of SIZE bytes into its own with
// process_vm_readv, as a single-copy reader of a peer's plain buffer does: once from a buffer on
// 4 KiB pages, once from one moved onto 2 MiB pages (two rows per size). The kernel pins the
// source's pages one by one, so small pages cost the read about half its rate.
//
// With -J the results are also written as JSON: {"schema": "ferry-memcpy/1", "host", "cpu",
// "processes", "handoff" (with -H), "cma" (with -C), "results": [{"size", "repeats", "best_seconds",
// "median_seconds", "best_gbps", "median_gbps", "source_page_kib" (with -C)}]}.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "size_arg.hpp"

namespace {

struct Rate {
  size_t size = 0;
  int repeats = 0;
  double bestSeconds = 0;
  double medianSeconds = 0;
};

// Keeps the compiler from proving the copy's result unused.
void touch(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// What the processes of one measurement share: a barrier that starts every repeat together and
// each process's time per repeat.
struct alignas(64) Shared {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  std::atomic<int> failed{0};
  // Followed in the mapping by processes x repeats seconds: times()[process * repeats + repeat].
  double* times() { return reinterpret_cast<double*>(this + 1); }
  const double* times() const { return reinterpret_cast<const double*>(this + 1); }
};

// Every process calls it with the same count of processes; returns when all have arrived, or
// after kBarrierSeconds (a process died or cannot run): then it marks the measurement failed.
constexpr double kBarrierSeconds = 60;
void barrier(Shared* sh, int self, int processes) {
  const int gen = sh->generation.load(std::memory_order_acquire);
  if (sh->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == processes) {
    sh->arrived.store(0, std::memory_order_relaxed);
    sh->generation.store(gen + 1, std::memory_order_release);
    return;
  }
  // Two cores, perhaps more processes: yield rather than spin the others off their cores.
  const auto start = std::chrono::steady_clock::now();
  while (sh->generation.load(std::memory_order_acquire) == gen && sh->failed.load() == 0) {
    sched_yield();
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kBarrierSeconds) {
      std::fprintf(stderr, "memcpy-rate: process %d of %d waited %.0f s for the others to start a round\n", self,
                   processes, kBarrierSeconds);
      sh->failed.store(1);
    }
  }
}

// One process's part: `repeats` + 1 copies of `size` bytes, each after the barrier; the first one
// (caches, TLBs) untimed. The buffers are `span` bytes, walked in steps of `size`.
bool copyRepeats(Shared* sh, int self, int processes, size_t size, size_t span, int repeats) {
  void* src = nullptr;
  void* dst = nullptr;
  if (posix_memalign(&src, 4096, span) != 0 || posix_memalign(&dst, 4096, span) != 0) {
    std::fprintf(stderr, "memcpy-rate: cannot allocate two buffers of %zu bytes\n", span);
    sh->failed.store(1);  // both are freed below
  } else {
    std::memset(src, 1, span);
    std::memset(dst, 2, span);
  }
  const size_t steps = span / size;
  for (int i = 0; i < repeats + 1; ++i) {
    barrier(sh, self, processes);
    if (sh->failed.load() != 0) break;  // every process leaves at the same repeat
    const size_t at = static_cast<size_t>(i) % steps * size;
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(static_cast<uint8_t*>(dst) + at, static_cast<const uint8_t*>(src) + at, size);
    touch(dst);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) sh->times()[static_cast<size_t>(self) * repeats + (i - 1)] = s;
  }
  std::free(src);
  std::free(dst);
  return sh->failed.load() == 0;
}

// Waits until `turn` reaches `want` (the other process's copy finished), or kBarrierSeconds.
bool awaitTurn(const std::atomic<int>& turn, int want, const Shared* sh) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1; turn.load(std::memory_order_acquire) != want; ++i) {
    if (sh->failed.load() != 0) return false;
    if ((i & 1023) == 0) {
      sched_yield();  // the other process may share this core
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kBarrierSeconds) {
        std::fprintf(stderr, "memcpy-rate: the other process did not finish its copy within %.0f s\n", kBarrierSeconds);
        return false;
      }
    }
  }
  return true;
}

// The end of a two-process measurement: waits for the child `pid` (none where fork failed) and,
// where both sides succeeded, sets `rate` from the `repeats` times the parent recorded in `sh`.
bool reapAndRate(pid_t pid, bool ok, const Shared* sh, size_t size, int repeats, Rate* rate) {
  if (pid > 0) {
    int status = 0;
    ok &= waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (ok) {
    std::vector<double> seconds(sh->times(), sh->times() + repeats);
    std::sort(seconds.begin(), seconds.end());
    *rate = {size, repeats, seconds.front(), seconds[seconds.size() / 2]};
  }
  return ok;
}

// -H: `repeats` + 1 rounds of a copy in by the child and a copy out by the parent through one
// shared buffer; the first round (page faults, caches) untimed.
bool measureHandoff(size_t size, Rate* rate) {
  const int repeats = static_cast<int>(std::max<size_t>(5, (size_t{1} << 30) / size));
  const size_t bytes = sizeof(Shared) + sizeof(double) * static_cast<size_t>(repeats) + 64 + size;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "memcpy-rate: cannot map %zu bytes of shared memory\n", bytes);
    return false;
  }
  auto* sh = new (mem) Shared;
  // The turn word: 2i (the child copies in round i), 2i + 1 (the parent copies out); -1 until the
  // parent starts round 0, so that its first store cannot overwrite the child's answer.
  auto* turn = new (static_cast<char*>(mem) + sizeof(Shared) + sizeof(double) * repeats) std::atomic<int>(-1);
  uint8_t* box = reinterpret_cast<uint8_t*>(turn) + 64;
  std::vector<uint8_t> own(size, 1);
  const pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < repeats + 1; ++i) {
      if (!awaitTurn(*turn, 2 * i, sh)) _exit(1);
      std::memcpy(box, own.data(), size);
      turn->store(2 * i + 1, std::memory_order_release);
    }
    _exit(0);
  }
  bool ok = pid > 0;
  if (!ok) std::fprintf(stderr, "memcpy-rate: fork failed\n");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; ok && i < repeats + 1; ++i) {
    // A round starts when the child may begin its copy in.
    if (i > 0) start = std::chrono::steady_clock::now();
    turn->store(2 * i, std::memory_order_release);
    if (!awaitTurn(*turn, 2 * i + 1, sh)) {
      ok = false;
      break;
    }
    std::memcpy(own.data(), box, size);
    touch(own.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) sh->times()[i - 1] = s;
  }
  if (!ok) sh->failed.store(1);
  ok = reapAndRate(pid, ok, sh, size, repeats, rate);
  munmap(mem, bytes);
  return ok;
}

// -C: `repeats` + 1 single-copy reads (process_vm_readv, cross-memory attach) of a child's buffer of
// `size` bytes into the parent's own, the first (page faults) untimed. The child's buffer is on
// 4 KiB pages or, with `huge`, moved onto huge pages (MADV_COLLAPSE): the kernel pins the source's
// pages one by one before it copies, so the page size sets the rate (ferry's FERRY_HUGE_PAGES).
bool measureCma(size_t size, bool huge, Rate* rate) {
  const int repeats = static_cast<int>(std::max<size_t>(5, (size_t{1} << 30) / size));
  const size_t bytes = sizeof(Shared) + sizeof(double) * static_cast<size_t>(repeats) + 64;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "memcpy-rate: cannot map %zu bytes of shared memory\n", bytes);
    return false;
  }
  auto* sh = new (mem) Shared;
  // The child's buffer address once it is ready (0 before); the parent stores 1 in `done` to end it.
  auto* where = new (static_cast<char*>(mem) + sizeof(Shared) + sizeof(double) * repeats) std::atomic<uintptr_t>(0);
  auto* done = new (where + 1) std::atomic<int>(0);
  constexpr size_t kAlign = size_t{2} << 20;
  const pid_t pid = fork();
  if (pid == 0) {
    void* m = mmap(nullptr, size + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) _exit(1);
    auto* buf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m) + kAlign - 1) & ~(kAlign - 1));
    madvise(buf, size, MADV_NOHUGEPAGE);
    std::memset(buf, 1, size);
    if (huge) {
      madvise(buf, size, MADV_HUGEPAGE);
      if (madvise(buf, size, 25 /* MADV_COLLAPSE */) != 0) {
        std::fprintf(stderr, "memcpy-rate: the kernel would not move %zu bytes onto huge pages: %s\n", size,
                     std::strerror(errno));
        _exit(1);
      }
    }
    where->store(reinterpret_cast<uintptr_t>(buf), std::memory_order_release);
    if (!awaitTurn(*done, 1, sh)) _exit(1);
    _exit(0);
  }
  bool ok = pid > 0;
  if (!ok) std::fprintf(stderr, "memcpy-rate: fork failed\n");
  std::vector<uint8_t> own(size, 2);
  const auto start = std::chrono::steady_clock::now();
  while (ok && where->load(std::memory_order_acquire) == 0) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kBarrierSeconds) {
      ok = false;
      break;
    }
    sched_yield();
  }
  for (int i = 0; ok && i < repeats + 1; ++i) {
    iovec local{own.data(), size};
    iovec remote{reinterpret_cast<void*>(where->load()), size};
    const auto t0 = std::chrono::steady_clock::now();
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size)) {
      std::fprintf(stderr, "memcpy-rate: process_vm_readv of %zu bytes failed: %s\n", size, std::strerror(errno));
      ok = false;
      break;
    }
    touch(own.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) sh->times()[i - 1] = s;
  }
  done->store(1, std::memory_order_release);
  ok = reapAndRate(pid, ok, sh, size, repeats, rate);
  munmap(mem, bytes);
  return ok;
}

bool measure(size_t size, size_t span, int processes, Rate* rate) {
  const int repeats = static_cast<int>(std::max<size_t>(5, (size_t{2} << 30) / size));
  const size_t bytes = sizeof(Shared) + sizeof(double) * static_cast<size_t>(processes) * repeats;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "memcpy-rate: cannot map %zu bytes of shared memory\n", bytes);
    return false;
  }
  auto* sh = new (mem) Shared;
  std::vector<pid_t> children;
  for (int p = 1; p < processes; ++p) {
    const pid_t pid = fork();
    if (pid == 0) _exit(copyRepeats(sh, p, processes, size, span, repeats) ? 0 : 1);
    if (pid < 0) {
      std::fprintf(stderr, "memcpy-rate: fork failed for process %d of %d\n", p, processes);
      sh->failed.store(1);
      for (pid_t c : children) kill(c, SIGKILL);
      for (pid_t c : children) waitpid(c, nullptr, 0);
      munmap(mem, bytes);
      return false;
    }
    children.push_back(pid);
  }
  bool ok = copyRepeats(sh, 0, processes, size, span, repeats);
  for (pid_t c : children) {
    int status = 0;
    ok &= waitpid(c, &status, 0) == c && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (ok) {
    // A repeat lasts until its slowest process finished.
    std::vector<double> seconds(static_cast<size_t>(repeats), 0.0);
    for (int p = 0; p < processes; ++p) {
      for (int i = 0; i < repeats; ++i) {
        seconds[i] = std::max(seconds[i], sh->times()[static_cast<size_t>(p) * repeats + i]);
      }
    }
    std::sort(seconds.begin(), seconds.end());
    *rate = {size, repeats, seconds.front(), seconds[seconds.size() / 2]};
  }
  munmap(mem, bytes);
  return ok;
}

// A flag's count from 1 to `most`; false (and a message naming the flag) for anything else.
bool parseCount(const char* flag, const char* text, const char* what, long most, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > most) {
    std::fprintf(stderr, "memcpy-rate: %s '%s' is not a count of %s (expected 1 to %ld)\n", flag, text, what, most);
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
    }
  }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  std::string json;
  int processes = 1, walk = 0;
  bool handoff = false, cma = false;
  for (int i = 1; i < argc; ++i) {
    size_t s = 0;
    if (std::strcmp(argv[i], "-J") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (std::strcmp(argv[i], "-H") == 0) {
      handoff = true;
    } else if (std::strcmp(argv[i], "-C") == 0) {
      cma = true;
    } else if (std::strcmp(argv[i], "-P") == 0 && i + 1 < argc) {
      if (!parseCount("-P", argv[++i], "processes", 256, &processes)) return 2;
    } else if (std::strcmp(argv[i], "-W") == 0 && i + 1 < argc) {
      if (!parseCount("-W", argv[++i], "steps", 1000000, &walk)) return 2;
    } else if (ferry::bench::parseSizeArg(argv[i], &s)) {
      sizes.push_back(s);
    } else {
      std::fprintf(stderr,
                   "memcpy-rate: '%s' is not a size (K, M, G are powers of 1024)\n"
                   "usage: memcpy-rate [SIZE ...] [-P N [-W STEPS] | -H | -C] [-J FILE]\n",
                   argv[i]);
      return 2;
    }
  }
  if (sizes.empty()) sizes = {size_t{16} << 20, size_t{256} << 20};
  if ((handoff || cma) && processes != 1) {
    std::fprintf(stderr, "memcpy-rate: -H and -C are two processes by themselves; leave out -P\n");
    return 2;
  }
  if (walk != 0 && (handoff || cma)) {
    std::fprintf(stderr, "memcpy-rate: -W walks the copies of -P; leave out -H and -C\n");
    return 2;
  }
  if (handoff && cma) {
    std::fprintf(stderr, "memcpy-rate: -H or -C, not both\n");
    return 2;
  }
  if (handoff || cma) processes = 2;

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string out = "{\n  \"schema\": \"ferry-memcpy/1\",\n  \"host\": \"" + std::string(host) + "\",\n  \"cpu\": \"" +
                    cpuModel() + "\",\n  \"processes\": " + std::to_string(processes) +
                    (handoff ? ",\n  \"handoff\": true" : "") + (cma ? ",\n  \"cma\": true" : "") +
                    (walk != 0 ? ",\n  \"walk_steps\": " + std::to_string(walk) : "") + ",\n  \"results\": [";
  if (cma) {
    std::printf(
        "# memcpy-rate: cross-memory attach, one process reads another's buffer with process_vm_readv, from "
        "4 KiB and from 2 MiB pages; best of N reads (GB/s = 1e9 bytes read per second)\n");
  } else if (handoff) {
    std::printf(
        "# memcpy-rate: hand-off, one process copies into shared memory and another copies it out, in turn; "
        "best of N rounds (GB/s = 1e9 bytes handed over per second)\n");
  } else if (processes == 1) {
    std::printf("# memcpy-rate: one core, best of N copies (GB/s = 1e9 bytes copied per second)\n");
  } else {
    std::printf(
        "# memcpy-rate: %d processes copying at once, best of N rounds, GB/s per process (1e9 bytes copied "
        "per second; a round lasts until its slowest copy ends)\n",
        processes);
  }
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  if (walk != 0) {
    std::printf("# each walking %d steps of the size through buffers of up to %zu bytes, as a sweep's shifts\n", walk,
                largest);
  }
  std::printf("# %12s  %7s  %10s  %10s%s\n", "size (B)", "repeats", "best GB/s", "median GB/s",
              cma ? "  source pages" : "");
  bool first = true;
  for (size_t size : sizes) {
    for (int pages : cma ? std::vector<int>{4, 2048} : std::vector<int>{0}) {  // KiB; 0: not -C
      Rate r;
      const bool measured = cma       ? measureCma(size, pages != 4, &r)
                            : handoff ? measureHandoff(size, &r)
                                      : measure(size, walk != 0 ? std::min(largest, size * walk) : size, processes, &r);
      if (!measured) return 1;
      const double best = static_cast<double>(r.size) / r.bestSeconds / 1e9;
      const double median = static_cast<double>(r.size) / r.medianSeconds / 1e9;
      std::printf("  %12zu  %7d  %10.2f  %10.2f", r.size, r.repeats, best, median);
      if (cma) std::printf("  %d KiB", pages);
      std::printf("\n");
      char buf[360];
      std::snprintf(buf, sizeof(buf),
                    "%s\n    {\"size\": %zu, \"repeats\": %d, \"best_seconds\": %.9g, \"median_seconds\": %.9g, "
                    "\"best_gbps\": %.6g, \"median_gbps\": %.6g%s}",
                    first ? "" : ",", r.size, r.repeats, r.bestSeconds, r.medianSeconds, best, median,
                    cma ? (", \"source_page_kib\": " + std::to_string(pages)).c_str() : "");
      out += buf;
      first = false;
    }
  }
  out += "\n  ]\n}\n";
  if (!json.empty()) {
    std::ofstream f(json, std::ios::trunc);
    f << out;
    if (!f) {
      std::fprintf(stderr, "memcpy-rate: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return 0;
}
