// Spawning supervised children: see spawn.hpp for why each step is there.
#include "tools/spawn.hpp"

#include <sched.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ferry::tools {

InheritedState superviseChildren(const sigset_t& blocked, rlim_t fdsNeeded) {
  InheritedState state;
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);  // takes the lowest free fd: this one
  }
  sigprocmask(SIG_BLOCK, &blocked, &state.mask);
  struct sigaction dfl {
  }, ign{};
  dfl.sa_handler = SIG_DFL;
  ign.sa_handler = SIG_IGN;
  sigaction(SIGCHLD, &dfl, &state.chldAction);
  sigaction(SIGPIPE, &ign, &state.pipeAction);
  if (getrlimit(RLIMIT_NOFILE, &state.fileLimit) == 0 && state.fileLimit.rlim_cur < fdsNeeded) {
    rlimit raised = state.fileLimit;
    raised.rlim_cur = std::min(fdsNeeded, raised.rlim_max);
    state.restoreFileLimit = setrlimit(RLIMIT_NOFILE, &raised) == 0;
  }
  state.parent = getpid();
  return state;
}

Spawned spawnInOwnGroup(const SpawnRequest& request) {
  Spawned result;
  // The exec pipe closes on a successful exec, or brings back the errno of a failed one.
  int execPipe[2];
  if (pipe2(execPipe, O_CLOEXEC) != 0) {
    result.error = errno;
    return result;
  }
  const InheritedState& inherited = *request.inherited;
  pid_t pid = fork();
  if (pid == 0) {
    // Between fork and exec only system calls: everything else was prepared by the caller.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != inherited.parent) _exit(1);  // the parent died before PDEATHSIG was armed
    const int fds[3] = {request.stdinFd, request.stdoutFd, request.stderrFd};
    for (int target = 0; target < 3; ++target) {
      if (fds[target] >= 0) dup2(fds[target], target);  // dup2 clears close-on-exec
    }
    sigaction(SIGPIPE, &inherited.pipeAction, nullptr);
    sigaction(SIGCHLD, &inherited.chldAction, nullptr);
    sigprocmask(SIG_SETMASK, &inherited.mask, nullptr);
    if (inherited.restoreFileLimit) setrlimit(RLIMIT_NOFILE, &inherited.fileLimit);
    if (request.cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(request.cpu, &one);
      sched_setaffinity(0, sizeof(one), &one);  // best effort: an unbound rank still runs
    }
    execvpe(request.argv[0], request.argv, request.envp);
    int err = errno;
    ssize_t ignored = write(execPipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  int forkErrno = errno;
  close(execPipe[1]);
  if (pid < 0) {
    close(execPipe[0]);
    result.error = forkErrno;
    return result;
  }
  int err = 0;
  ssize_t n;
  while ((n = read(execPipe[0], &err, sizeof(err))) < 0 && errno == EINTR) {
  }
  close(execPipe[0]);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    waitpid(pid, nullptr, 0);
    result.error = err;
    result.execFailed = true;
    return result;
  }
  result.pid = pid;
  return result;
}

}  // namespace ferry::tools
