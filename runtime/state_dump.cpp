// The SIGUSR1 handler only writes one byte to a pipe (async-signal-safe); a detached thread reads
// it and prints the registered communicators' states through the normal logger. The handler is
// installed on the first registration, and only if the application left SIGUSR1 at its default.
#include "runtime/state_dump.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "base/deadline.hpp"
#include "base/log.hpp"

namespace ferry {
namespace {

struct Entry {
  uint64_t commId;
  int rank;
  int size;
  const coll::CallTrace* trace;
  std::function<std::string()> extra;
};

std::mutex gMutex;
std::map<uint64_t, Entry>& registry() {
  static auto* r = new std::map<uint64_t, Entry>;  // never freed: the dump thread may outlive main
  return *r;
}
uint64_t gNextKey = 1;
int gPipe[2] = {-1, -1};

void onSignal(int) {
  char c = 1;
  ssize_t w = write(gPipe[1], &c, 1);
  (void)w;
}

void installOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
    if (pipe(gPipe) != 0) return;
    std::thread([] {
      char c;
      while (read(gPipe[0], &c, 1) == 1) dumpAllStates();
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

}  // namespace

StateDumpRegistration::StateDumpRegistration(uint64_t commId, int rank, int size, const coll::CallTrace* trace,
                                             std::function<std::string()> extra) {
  std::lock_guard<std::mutex> lock(gMutex);
  key_ = gNextKey++;
  registry()[key_] = Entry{commId, rank, size, trace, std::move(extra)};
  installOnce();
}

StateDumpRegistration::~StateDumpRegistration() {
  std::lock_guard<std::mutex> lock(gMutex);
  registry().erase(key_);
}

std::string describeState(uint64_t commId, int rank, int size, const coll::CallTrace& t) {
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "comm %016llx rank %d of %d: ", static_cast<unsigned long long>(commId), rank,
                        size);
  unsigned long long seq = t.seq.load(std::memory_order_relaxed);
  const char* call = t.call.load(std::memory_order_relaxed);
  if (!t.active.load(std::memory_order_acquire)) {
    if (seq == 0) {
      std::snprintf(buf + n, sizeof(buf) - n, "idle, no call yet");
    } else {
      std::snprintf(buf + n, sizeof(buf) - n, "idle after call #%llu (%s)", seq, call != nullptr ? call : "?");
    }
    return buf;
  }
  // startNs is 0 until the call first blocks (Exec::startClock): it has run for microseconds.
  const int64_t startNs = t.startNs.load();
  double running = startNs == 0 ? 0.0 : static_cast<double>(Clock::now().time_since_epoch().count() - startNs) / 1e9;
  n += std::snprintf(buf + n, sizeof(buf) - n, "%s(count=%zu) #%llu running for %.1f s", call != nullptr ? call : "?",
                     t.count.load(std::memory_order_relaxed), seq, running);
  const char* phase = t.phase.load(std::memory_order_relaxed);
  if (phase != nullptr && phase[0] != '\0') {
    n += std::snprintf(buf + n, sizeof(buf) - n, ", in %s step %d/%d", phase, t.step.load() + 1, t.steps.load());
  }
  int peer = t.peer.load(std::memory_order_relaxed);
  if (peer >= 0) std::snprintf(buf + n, sizeof(buf) - n, ", waiting for rank %d", peer);
  return buf;
}

void dumpAllStates() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (registry().empty()) {
    log::write(log::Level::kWarn, log::kColl, "state dump (SIGUSR1): no communicator in this process");
  }
  for (const auto& [key, e] : registry()) {
    log::write(log::Level::kWarn, log::kColl, "state dump (SIGUSR1): %s",
               describeState(e.commId, e.rank, e.size, *e.trace).c_str());
    const std::string more = e.extra ? e.extra() : std::string();
    if (!more.empty()) log::write(log::Level::kWarn, log::kColl, "state dump (SIGUSR1): %s", more.c_str());
  }
}

}  // namespace ferry
