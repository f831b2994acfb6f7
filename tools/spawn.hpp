// Spawning supervised children: each in its own process group, tied to its parent's life.
//
// A launcher (ferryrun) needs its ranks to be signalled as groups, to die when the launcher dies, to
// start with the signal state the launcher was started with rather than the one it set up for its
// own signalfd, and to have a failed exec reported to the launcher, not just an exit code 127. This
// file holds the fork/exec half of that, so that ferryrun.cpp is left with the supervision policy.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

namespace ferry::tools {

/// What a supervisor changed in its own process and every child gets back before exec.
struct InheritedState {
  sigset_t mask{};                 ///< the signal mask before `blocked` was added
  struct sigaction pipeAction {};  ///< SIGPIPE's disposition before it was ignored
  struct sigaction chldAction {};  ///< SIGCHLD's disposition before it was reset to default
  rlimit fileLimit{};              ///< the fd limit before it was raised
  bool restoreFileLimit = false;   ///< true when the fd limit was raised
  pid_t parent = 0;                ///< the supervisor's pid
};

/// Prepares the calling process to supervise children and records what children get back: opens
/// fds 0-2 on /dev/null where closed (so no pipe lands there), blocks `blocked` (for a signalfd),
/// sets SIGCHLD to its default (an inherited SIG_IGN would reap children behind our back), ignores
/// SIGPIPE (a closed stdout must give EPIPE, not kill the supervisor) and raises the soft limit on
/// open files to `fdsNeeded` when it is lower and the hard limit allows.
InheritedState superviseChildren(const sigset_t& blocked, rlim_t fdsNeeded);

/// How to start one child.
struct SpawnRequest {
  char* const* argv = nullptr;                ///< program and arguments, null-terminated; argv[0] is looked up in PATH
  char* const* envp = nullptr;                ///< the child's whole environment, null-terminated
  int stdinFd = -1;                           ///< becomes the child's fd 0; -1 keeps ours
  int stdoutFd = -1;                          ///< becomes the child's fd 1; -1 keeps ours
  int stderrFd = -1;                          ///< becomes the child's fd 2; -1 keeps ours
  const InheritedState* inherited = nullptr;  ///< state to restore; required
  int cpu = -1;                               ///< >= 0: the child runs on this CPU only (sched_setaffinity)
};

/// The outcome of spawnInOwnGroup().
struct Spawned {
  pid_t pid = -1;           ///< the running child, -1 when it did not start
  int error = 0;            ///< errno when it did not start
  bool execFailed = false;  ///< the error is exec's (the child was reaped), not fork's or pipe's
};

/// Forks a child that leads a new process group (kill(-pid, sig) reaches it and everything it
/// starts), gets SIGTERM if the supervisor dies (PR_SET_PDEATHSIG), restores `inherited`, takes the
/// requested fds and execs. Returns once the exec has succeeded or failed. The request's fds stay
/// open in the caller; every fd the caller wants kept from the child must be close-on-exec.
Spawned spawnInOwnGroup(const SpawnRequest& request);

}  // namespace ferry::tools
