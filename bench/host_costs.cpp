// host-costs: what the operating system and the hypervisor charge for the things a single-host
// collective does besides copying: a system call, a yield, a hand-off between two processes on
// one CPU, and the first pass over memory another mapping shares. On bare metal the first three
// are tenths of a microsecond; under some hypervisors they are ten times that, and then they, not
// the copies, set the time of calls of a few bytes when ranks outnumber cores (docs/PERFORMANCE.md).
//
//   host-costs [SIZE]      SIZE (K, M, G: powers of 1024) of the shared-mapping test; default 64M
//
// Prints one line per measurement:
//   system call           getppid(), the cheapest system call (median of 5 runs of 20,000)
//   sched_yield, alone    sched_yield() with nothing else runnable on the CPU
//   process hand-off      two processes bound to one CPU take turns through a flag in shared
//                         memory, each yielding until it is its turn: time per turn
//   first memcpy ...      memcpy out of a new read-only MAP_SHARED mapping of a memfd the
//                         process wrote through another mapping (what a peer's hostAlloc buffer
//                         is to a rank), on its first pass and its second: untouched, after one
//                         load per 4 KiB page, and after MAP_POPULATE and one load per page
//                         (each case in a process of its own)
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "size_arg.hpp"

namespace {

// SIZE, whole pages of at least one.
bool parseSizeArg(const char* text, size_t* out) {
  if (!ferry::bench::parseSizeArg(text, out) || *out < 4096) return false;
  *out &= ~size_t{4095};
  return true;
}

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <typename F>
double medianMicros(int runs, int calls, F&& f) {
  std::vector<double> us;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    us.push_back(secondsSince(t0) / calls * 1e6);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Two processes bound to the CPU this one runs on alternate `turns` times through a flag in
// shared memory; microseconds per turn, or a negative value if the test could not run.
double handOffMicros(int turns) {
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return -1;
  auto* flag = new (m) std::atomic<long>(0);
  cpu_set_t one;
  CPU_ZERO(&one);
  const int cpu = sched_getcpu();
  CPU_SET(cpu < 0 ? 0 : cpu, &one);
  cpu_set_t old;
  sched_getaffinity(0, sizeof(old), &old);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return -1;
  const auto t0 = Clock::now();
  const pid_t child = fork();
  if (child < 0) return -1;
  const long me = child == 0 ? 1 : 0;
  for (int i = 0; i < turns; ++i) {
    while ((flag->load(std::memory_order_acquire) & 1) != me) sched_yield();
    flag->fetch_add(1, std::memory_order_acq_rel);
  }
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const double us = secondsSince(t0) / (2.0 * turns) * 1e6;
  sched_setaffinity(0, sizeof(old), &old);
  munmap(m, 4096);
  return us;
}

struct Passes {
  double first = 0, second = 0;  // GB/s (10^9 bytes copied per second)
};

// memcpy out of a fresh second mapping of a memfd written through its first.
bool sharedPasses(size_t bytes, bool touch, bool populate, Passes* out) {
  char* dst = static_cast<char*>(std::aligned_alloc(4096, bytes));
  if (dst == nullptr) return false;
  std::memset(dst, 1, bytes);  // written here: no fault (nor copy-on-write) is timed
  const int fd = memfd_create("ferry-host-costs", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return false;
  void* w = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (w == MAP_FAILED) return false;
  std::memset(w, 3, bytes);
  void* r = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  close(fd);
  if (r == MAP_FAILED) return false;
  const auto* src = static_cast<const volatile char*>(r);
  if (touch) {
    unsigned sum = 0;
    for (size_t off = 0; off < bytes; off += 4096) sum += static_cast<unsigned char>(src[off]);
    if (sum == 1) std::printf(" ");  // keeps the loads
  }
  for (double* pass : {&out->first, &out->second}) {
    const auto t0 = Clock::now();
    std::memcpy(dst, r, bytes);
    *pass = static_cast<double>(bytes) / secondsSince(t0) / 1e9;
  }
  munmap(r, bytes);
  munmap(w, bytes);
  std::free(dst);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  if (argc > 2 || (argc == 2 && !parseSizeArg(argv[1], &bytes))) {
    std::fprintf(stderr, "usage: host-costs [SIZE]   (SIZE of the shared-mapping test, at least 4K; default 64M)\n");
    return 2;
  }
  std::printf("# host-costs: microseconds per operation (median of 5 runs), GB/s = 10^9 bytes copied per second\n");
  std::printf("%-44s %8.3f us\n", "system call (getppid)", medianMicros(5, 20000, [] { syscall(SYS_getppid); }));
  std::printf("%-44s %8.3f us\n", "sched_yield, nothing else to run", medianMicros(5, 20000, [] { sched_yield(); }));
  std::vector<double> hand;
  for (int i = 0; i < 5; ++i) hand.push_back(handOffMicros(20000));
  std::sort(hand.begin(), hand.end());
  if (hand[2] < 0) {
    std::printf("%-44s %8s\n", "process hand-off on one CPU (sched_yield)", "n/a");
  } else {
    std::printf("%-44s %8.3f us\n", "process hand-off on one CPU (sched_yield)", hand[2]);
  }
  struct Case {
    const char* name;
    bool touch, populate;
  } cases[] = {{"untouched", false, false},
               {"one load per page", true, false},
               {"MAP_POPULATE + one load per page", true, true}};
  // Each case in a process of its own: in one process a case's mapping lands where the previous
  // one's was, and what the hypervisor kept of that one skews the first pass.
  auto* shared = static_cast<Passes*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 1;
  for (const Case& c : cases) {
    char label[96];
    std::snprintf(label, sizeof(label), "memcpy %zu MiB from a new shared mapping, %s", bytes >> 20, c.name);
    const pid_t child = fork();
    if (child == 0) _exit(sharedPasses(bytes, c.touch, c.populate, shared) ? 0 : 1);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("%s: failed\n", label);
      continue;
    }
    std::printf("%s: first pass %.2f GB/s, second %.2f GB/s\n", label, shared->first, shared->second);
  }
  return 0;
}
