#include "test/common/mp_harness.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "base/deadline.hpp"

namespace ferry::test {

namespace {

// The value of environment variable `name` when it is an integer >= 1; 0 when unset or empty; -1
// when it is something else.
long positiveEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  return (*end == '\0' && errno == 0 && x >= 1) ? x : -1;
}

// --- launched mode --------------------------------------------------------------------------------

// The job's communicator, created by the first runRanks call of a launched process. It is
// destroyed at exit (closing a transport flushes what this rank still sends, so a peer that is a
// call behind still gets its data), by an atexit handler registered after the communicator exists,
// so that it runs before the static objects ferry created while making it are destroyed.
Comm* gLaunchedComm = nullptr;
std::string gLaunchedError;  // why Comm::fromEnv failed, when it did

void destroyLaunchedComm() {
  delete gLaunchedComm;
  gLaunchedComm = nullptr;
}

Comm* launchedComm() {
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto comm = Comm::fromEnv();
    if (comm.isOk()) {
      gLaunchedComm = comm->release();
      std::atexit(destroyLaunchedComm);
    } else {
      gLaunchedError = "Comm::fromEnv failed: " + comm.status().toString();
    }
  }
  return gLaunchedComm;
}

// What the SIGALRM handler writes before it exits: composed before the alarm is armed.
char gTimeoutMessage[160];

void onLaunchedTimeout(int) {
  ssize_t w = write(2, gTimeoutMessage, std::strlen(gTimeoutMessage));
  (void)w;
  _exit(124);
}

std::vector<RankOutcome> runLaunched(int n, const RankBody& body, double timeoutSeconds) {
  const int world = launchedWorldSize();
  std::vector<RankOutcome> out(n);
  if (n != world) {
    std::fprintf(stderr, "runRanks: world size %d skipped (this process is a rank of a %d-rank job)\n", n, world);
    for (auto& o : out) o.exitCode = 0, o.output = "(skipped: the job has " + std::to_string(world) + " ranks)";
    return out;
  }
  for (auto& o : out) o.exitCode = 0, o.output = "(runs in another process)";
  Comm* comm = launchedComm();
  const long rank = comm != nullptr ? comm->rank() : std::atol(std::getenv("FERRY_RANK"));
  RankOutcome& mine = out[static_cast<size_t>(rank >= 0 && rank < n ? rank : 0)];
  if (comm == nullptr) {
    mine.exitCode = 2;
    mine.output = "rank " + std::to_string(rank) + ": " + gLaunchedError;
    return out;
  }
  std::snprintf(gTimeoutMessage, sizeof(gTimeoutMessage),
                "rank %ld: runRanks timed out after %g s; exiting with code 124\n", rank, timeoutSeconds);
  struct sigaction action {
  }, previous{};
  action.sa_handler = onLaunchedTimeout;
  sigaction(SIGALRM, &action, &previous);
  alarm(static_cast<unsigned>(std::ceil(timeoutSeconds)));
  std::string err = body(*comm);
  alarm(0);
  sigaction(SIGALRM, &previous, nullptr);
  std::fflush(stdout);
  if (!err.empty()) {
    mine.exitCode = 1;
    mine.output = "rank " + std::to_string(rank) + ": " + err;
  }
  return out;
}

// The run's count of markDone() calls: a shared anonymous page, mapped before the first fork so
// that every rank of every run inherits it; reset at the start of each run.
std::atomic<int>* doneCounter() {
  static std::atomic<int>* counter = [] {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) std::atomic<int>(0);
  }();
  return counter;
}

}  // namespace

void markDone() {
  if (launchedWorldSize() == 0 && doneCounter() != nullptr) doneCounter()->fetch_add(1);
}

bool waitForDone(int count, double seconds) {
  const Deadline deadline = Deadline::after(seconds);
  const bool shared = launchedWorldSize() == 0 && doneCounter() != nullptr;
  Backoff backoff;
  while (!shared || doneCounter()->load() < count) {
    if (deadline.expired()) return false;
    backoff.pause();
  }
  return true;
}

int launchedWorldSize() {
  if (std::getenv("FERRY_RANK") == nullptr) return 0;
  long world = positiveEnv("FERRY_WORLD_SIZE");
  return world > 0 ? static_cast<int>(world) : 0;
}

std::vector<RankOutcome> runRanks(int n, const RankBody& body, double timeoutSeconds) {
  if (launchedWorldSize() > 0) return runLaunched(n, body, timeoutSeconds);
  std::vector<RankOutcome> out(n);
  const long hosts = positiveEnv("FERRY_TEST_HOSTS");
  if (hosts < 0) {
    for (auto& o : out)
      o.output = "FERRY_TEST_HOSTS=" + std::string(std::getenv("FERRY_TEST_HOSTS")) +
                 ": expected a number of simulated hosts >= 1";
    return out;
  }
  if (doneCounter() != nullptr) doneCounter()->store(0);
  std::fflush(stdout);
  std::fflush(stderr);
  // The rendezvous root runs in a child of its own: the parent stays single-threaded, so the
  // ranks it forks inherit no lock held by another thread (UCX's memory hooks take some).
  int idPipe[2];
  if (pipe(idPipe) != 0) {
    for (auto& o : out) o.output = "pipe failed";
    return out;
  }
  pid_t rootPid = fork();
  if (rootPid == 0) {
    close(idPipe[0]);
    auto created = UniqueId::create();
    UniqueId sent;
    if (created.isOk()) sent = *created;
    ssize_t w = write(idPipe[1], sent.bytes, sizeof(sent.bytes));
    (void)w;
    close(idPipe[1]);
    if (!created.isOk()) _exit(1);
    for (;;) pause();
  }
  close(idPipe[1]);
  UniqueId idValue;
  size_t got = 0;
  while (got < sizeof(idValue.bytes)) {
    ssize_t r = read(idPipe[0], idValue.bytes + got, sizeof(idValue.bytes) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(idPipe[0]);
  UniqueId zero;
  if (got != sizeof(idValue.bytes) || std::memcmp(idValue.bytes, zero.bytes, sizeof(zero.bytes)) == 0) {
    kill(rootPid, SIGKILL);
    waitpid(rootPid, nullptr, 0);
    for (auto& o : out) o.output = "the rendezvous root process failed to create a unique id";
    return out;
  }
  const UniqueId* id = &idValue;
  std::vector<pid_t> pids(n, -1);
  std::vector<int> fds(n, -1);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) {
      out[r].output = "pipe failed";
      continue;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[1]);
      int code = 0;
      if (hosts > 0) {  // before the first ferry call: ferry reads its environment once
        // FERRY_TEST_HOSTS_DEALT=1: ranks dealt round the hosts (rank r on host r mod H), so that
        // a host's ranks are not numbered in a row.
        const char* dealt = std::getenv("FERRY_TEST_HOSTS_DEALT");
        const long host = dealt != nullptr && std::string(dealt) == "1" ? r % hosts : r * hosts / n;
        setenv("FERRY_HOST_ID", ("test-host-" + std::to_string(host)).c_str(), 1);
      }
      {
        auto comm = Comm::create(*id, r, n);
        if (!comm.isOk()) {
          std::fprintf(stderr, "rank %d: Comm::create failed: %s\n", r, comm.status().toString().c_str());
          code = 2;
        } else {
          std::string err = body(**comm);
          if (!err.empty()) {
            std::fprintf(stderr, "rank %d: %s\n", r, err.c_str());
            code = 1;
          }
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  auto start = std::chrono::steady_clock::now();
  int open = 0;
  for (int fd : fds) open += fd >= 0;
  bool killed = false;
  while (open > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (fds[r] >= 0) {
        pfds.push_back({fds[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    poll(pfds.data(), pfds.size(), 200);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(pfds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        out[who[i]].output.append(buf, static_cast<size_t>(got));
      } else {
        close(fds[who[i]]);
        fds[who[i]] = -1;
        --open;
      }
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!killed && elapsed > timeoutSeconds) {
      for (pid_t pid : pids) {
        if (pid > 0) kill(pid, SIGKILL);
      }
      killed = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (pids[r] <= 0) continue;
    int st = 0;
    waitpid(pids[r], &st, 0);
    out[r].exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (killed) out[r].output += "\n(killed by the harness after the test timeout)";
  }
  kill(rootPid, SIGKILL);
  waitpid(rootPid, nullptr, 0);
  return out;
}

std::string summarize(const std::vector<RankOutcome>& outcomes) {
  std::string s;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (outcomes[r].exitCode != 0) {
      s += "rank " + std::to_string(r) + " exit " + std::to_string(outcomes[r].exitCode) + ": " +
           outcomes[r].output.substr(0, 2000) + "\n";
    }
  }
  return s;
}

}  // namespace ferry::test
