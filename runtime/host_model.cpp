// Measuring the host model: memcpy and reduction rates on buffers larger than the caches, the cost
// of cross-memory attach reads (from this process to itself: the kernel path is the same), and the
// latency of a flag handed between two threads, spinning and sleeping in the kernel.
#include "runtime/host_model.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "kernels/host/reduce.hpp"
#include "base/config.hpp"
#include "base/deadline.hpp"
#include "base/log.hpp"
#include "runtime/topology.hpp"

namespace ferry {
namespace {

// 2: the in-cache memcpy rate; cmaCall timed on 64-byte reads (version 1 derived it from 4 KiB
// reads minus their bytes at the out-of-cache rate, which left about nothing). 3: hand-offs move
// a header and a data line besides the counter, between threads on two CPUs. 4: the in-cache
// float32 sum rate.
constexpr int kVersion = 4;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

template <typename F>
double bestOf(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

long futexCall(std::atomic<uint32_t>* w, int op, uint32_t v) {
  timespec ts{0, 2'000'000};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), op, v, op == FUTEX_WAIT_PRIVATE ? &ts : nullptr, nullptr,
                 0);
}

// Round trips between two threads; returns seconds per one-way hand-off. A hand-off moves what an
// arena hand-off moves: the poster writes a call header and a line of data, then its counter; the
// waiter, once it sees the counter, reads both: a bare flag costs a fraction of the collectives'
// hand-off, and the tuner would count extra hand-offs as nearly free (evidence:
// docs/PERFORMANCE.md, "The host model's hand-off probe"). Spinning, the two threads run on two
// different CPUs where this process may use two, as ferryrun binds ranks.
double handOff(bool sleep, int rounds, const cpu_set_t& allowed) {
  struct alignas(64) Line {
    std::atomic<uint64_t> v{0};
    uint64_t pad[7];
  };
  struct Side {
    Line flag, header, data;
  };
  Side side[2];
  std::atomic<uint32_t> word{0};  // the futex word, when sleeping
  std::atomic<uint64_t> sink{0};
  auto waitFor = [&](Side& s, uint64_t v) {
    if (!sleep) {
      while (s.flag.v.load(std::memory_order_acquire) < v) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
    } else {
      uint32_t seen;
      while ((seen = word.load(std::memory_order_acquire)) < v) futexCall(&word, FUTEX_WAIT_PRIVATE, seen);
    }
    sink.fetch_add(s.header.v.load(std::memory_order_relaxed) + s.data.v.load(std::memory_order_relaxed),
                   std::memory_order_relaxed);
  };
  auto set = [&](Side& s, uint64_t v) {
    s.header.v.store(v, std::memory_order_relaxed);
    s.data.v.store(v, std::memory_order_relaxed);
    s.flag.v.store(v, std::memory_order_release);
    if (sleep) {
      word.store(static_cast<uint32_t>(v), std::memory_order_release);
      futexCall(&word, FUTEX_WAKE_PRIVATE, 1);
    }
  };
  cpu_set_t before;
  CPU_ZERO(&before);
  int cpus[2] = {-1, -1};
  if (!sleep && sched_getaffinity(0, sizeof(before), &before) == 0) {
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus[k++] = c;
    }
  }
  auto pin = [&](int cpu) {
    if (cpu < 0 || cpus[1] < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
  };
  std::thread peer([&] {
    pin(cpus[1]);
    for (int i = 0; i < rounds; ++i) {
      waitFor(side[0], 2 * static_cast<uint64_t>(i) + 1);
      set(side[1], 2 * static_cast<uint64_t>(i) + 2);
    }
  });
  pin(cpus[0]);
  // The best of ten batches: a preemption (other processes, the hypervisor taking the vCPU)
  // lands in one batch and is not the hand-off's cost.
  double best = 1e30;
  const int batch = std::max(rounds / 10, 1);
  for (int i = 0; i < rounds;) {
    const int end = std::min(rounds, i + batch);
    const double t0 = now();
    for (; i < end; ++i) {
      set(side[0], 2 * static_cast<uint64_t>(i) + 1);
      waitFor(side[1], 2 * static_cast<uint64_t>(i) + 2);
    }
    best = std::min(best, (now() - t0) / (2.0 * batch));
  }
  peer.join();
  if (!sleep && cpus[1] >= 0) sched_setaffinity(0, sizeof(before), &before);  // as we were
  return best;
}

std::string defaultCachePath(const std::string& hostKey) {
  std::string dir;
  if (const char* x = readEnv("XDG_CACHE_HOME"); x != nullptr && x[0] != '\0') {
    dir = std::string(x) + "/ferry";
  } else if (const char* h = readEnv("HOME"); h != nullptr && h[0] != '\0') {
    dir = std::string(h) + "/.cache/ferry";
  } else {
    return "";
  }
  size_t hash = std::hash<std::string>{}(hostKey);
  char name[64];
  std::snprintf(name, sizeof(name), "/host-model-%016zx-v%d.txt", hash, kVersion);  // versions side by side
  return dir + name;
}

}  // namespace

std::string HostModel::describe() const {
  char buf[256];
  std::snprintf(
      buf, sizeof(buf),
      "flag hand-off %.2f us spinning, %.1f us sleeping; memcpy %.1f GB/s (%.1f GB/s in the L2); float32 sum "
      "%.1f GB/s (%.1f GB/s in the L2); cross-memory read %.1f GB/s + %.2f us per call; L2 %lld KiB; %d cores",
      syncSpin * 1e6, syncSleep * 1e6, copyBw / 1e9, copyBwCache / 1e9, reduceBw / 1e9, reduceBwCache / 1e9,
      cmaBw / 1e9, cmaCall * 1e6, static_cast<long long>(l2Bytes / 1024), cores);
  return buf;
}

std::vector<uint8_t> HostModel::serialize() const {
  std::ostringstream s;
  s.precision(9);
  s << "ferry-host-model " << kVersion << ' ' << syncSpin << ' ' << syncSleep << ' ' << copyBw << ' ' << copyBwCache
    << ' ' << reduceBw << ' ' << reduceBwCache << ' ' << cmaBw << ' ' << cmaCall << ' ' << l2Bytes << ' ' << cores
    << '\n';
  std::string t = s.str();
  return {t.begin(), t.end()};
}

Result<HostModel> HostModel::deserialize(const std::vector<uint8_t>& bytes) {
  std::istringstream s(std::string(bytes.begin(), bytes.end()));
  std::string magic;
  int version = 0;
  HostModel m;
  s >> magic >> version >> m.syncSpin >> m.syncSleep >> m.copyBw >> m.copyBwCache >> m.reduceBw >> m.reduceBwCache >>
      m.cmaBw >> m.cmaCall >> m.l2Bytes >> m.cores;
  if (!s || magic != "ferry-host-model" || version != kVersion || m.copyBw <= 0 || m.copyBwCache <= 0 ||
      m.reduceBw <= 0 || m.reduceBwCache <= 0 || m.cores <= 0) {
    return makeError(ErrorCode::kInternalError, "not a ferry host model (version %d)", kVersion);
  }
  return m;
}

HostModel measureHostModel(const cpu_set_t& cpus) {
  HostModel m;
  m.cores = std::max(CPU_COUNT(&cpus), 1);
  auto topo = discoverTopology();
  m.l2Bytes = topo.isOk() && topo->l2Bytes > 0 ? static_cast<int64_t>(topo->l2Bytes) : 1 << 20;
  // Larger than any L2 and most of an L3 share: what bandwidth-bound collectives see.
  const size_t bytes = size_t{64} << 20;
  auto* a = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  auto* c = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  if (a == nullptr || b == nullptr || c == nullptr) {
    std::free(a);
    std::free(b);
    std::free(c);
    m.copyBw = m.copyBwCache = m.reduceBw = m.reduceBwCache = m.cmaBw = 5e9;
    m.cmaCall = 2e-6;
    m.syncSpin = 2e-7;
    m.syncSleep = 1e-5;
    return m;
  }
  std::memset(a, 1, bytes);
  std::memset(b, 2, bytes);
  std::memset(c, 3, bytes);
  m.copyBw = bytes / bestOf(3, [&] { std::memcpy(b, a, bytes); });
  // One chunk (the tuner's default: L2 / 8) copied over and over stays in the L2: what small
  // messages see. Sixteen copies per timing, so the clock's cost does not count.
  const size_t chunk =
      static_cast<size_t>(std::clamp<int64_t>(m.l2Bytes / 8, int64_t{32} * 1024, int64_t{1024} * 1024));
  m.copyBwCache = 16.0 * static_cast<double>(chunk) / bestOf(5, [&] {
                    for (int i = 0; i < 16; ++i) std::memcpy(b + (i & 1) * chunk, a + (i & 1) * chunk, chunk);
                  });
  const size_t floats = bytes / 4;
  std::fill_n(reinterpret_cast<float*>(a), floats, 1.0f);
  std::fill_n(reinterpret_cast<float*>(b), floats, 2.0f);
  m.reduceBw = bytes / bestOf(3, [&] { kernels::reduce(DataType::kFloat32, RedOp::kSum, c, a, b, floats); });
  // And on one chunk in the L2, as the small calls' reductions run (sixteen per timing).
  m.reduceBwCache = 16.0 * static_cast<double>(chunk) / bestOf(5, [&] {
                      for (int i = 0; i < 16; ++i) kernels::reduce(DataType::kFloat32, RedOp::kSum, c, a, b, chunk / 4);
                    });
  // Cross-memory attach from this process to itself, in 256 KiB calls (what the algorithms use)
  // and in 64-byte calls (the per-call cost: system call, page lookup and pinning).
  const pid_t self = getpid();
  auto cma = [&](size_t chunk, size_t total) {
    for (size_t off = 0; off < total; off += chunk) {
      iovec l{c + off, chunk}, r{a + off, chunk};
      if (process_vm_readv(self, &l, 1, &r, 1, 0) != static_cast<ssize_t>(chunk)) return false;
    }
    return true;
  };
  bool cmaOk = cma(4096, 4096);
  if (cmaOk) {
    double big = bestOf(3, [&] { cma(256 * 1024, bytes); });
    m.cmaBw = bytes / big;
    m.cmaCall = bestOf(3, [&] { cma(64, 64 * 256); }) / 256;
  } else {
    m.cmaBw = m.copyBw / 2;
    m.cmaCall = 5e-6;
  }
  std::free(a);
  std::free(b);
  std::free(c);
  m.syncSleep = handOff(true, 200, cpus);
  m.syncSpin = m.cores >= 2 ? handOff(false, 2000, cpus) : m.syncSleep;
  return m;
}

namespace {

// The cache file for `hostKey` as FERRY_TUNE_FILE says (empty: none).
std::string cachePath(const std::string& hostKey, const std::string& cacheFile) {
  std::string path = cacheFile.empty() ? defaultCachePath(hostKey) : cacheFile;
  return path == "none" ? std::string() : path;
}

// The model cached at `path` for `hostKey`, if there is one.
std::optional<HostModel> readCached(const std::string& path, const std::string& hostKey) {
  if (path.empty()) return std::nullopt;
  std::ifstream f(path);
  std::string line, key;
  if (!std::getline(f, key) || key != hostKey || !std::getline(f, line)) return std::nullopt;
  auto m = HostModel::deserialize(std::vector<uint8_t>(line.begin(), line.end()));
  if (!m.isOk()) return std::nullopt;
  return *m;
}

}  // namespace

HostModel loadOrMeasureHostModel(const std::string& hostKey, const std::string& cacheFile, const cpu_set_t& cpus) {
  const std::string path = cachePath(hostKey, cacheFile);
  // Measured for as many CPUs as the ranks have now: a job bound to fewer (or more) CPUs
  // measures its own.
  if (auto m = readCached(path, hostKey); m && m->cores == std::max(CPU_COUNT(&cpus), 1)) {
    FERRY_INFO(log::kTune, "host model from %s: %s", path.c_str(), m->describe().c_str());
    return *m;
  }
  double t0 = now();
  HostModel m = measureHostModel(cpus);
  FERRY_INFO(log::kTune, "host model measured in %.0f ms: %s", (now() - t0) * 1e3, m.describe().c_str());
  if (!path.empty()) {
    std::string dir = path.substr(0, path.rfind('/'));
    if (!dir.empty()) {
      std::string parent = dir.substr(0, dir.rfind('/'));
      ::mkdir(parent.c_str(), 0700);
      ::mkdir(dir.c_str(), 0700);
    }
    std::string tmp = path + "." + std::to_string(getpid());
    {
      std::ofstream out(tmp);
      auto bytes = m.serialize();
      out << hostKey << '\n' << std::string(bytes.begin(), bytes.end());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
  }
  return m;
}

HostModel loadHostRates(const std::string& hostKey, const std::string& cacheFile, const cpu_set_t& cpus) {
  const std::string path = cachePath(hostKey, cacheFile);
  if (auto m = readCached(path, hostKey)) {
    FERRY_INFO(log::kTune, "host rates from %s: %s", path.c_str(), m->describe().c_str());
    return *m;
  }
  return loadOrMeasureHostModel(hostKey, cacheFile, cpus);
}

}  // namespace ferry
