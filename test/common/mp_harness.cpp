#include "test/common/mp_harness.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace ferry::test {

std::vector<RankOutcome> runRanks(int n, const RankBody& body, double timeoutSeconds) {
  std::vector<RankOutcome> out(n);
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
