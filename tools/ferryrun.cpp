// ferryrun: start N ranks of a program on this host, the way mpirun or torchrun would.
//
// Each rank is forked and exec'd (spawn.hpp) with FERRY_RANK, FERRY_WORLD_SIZE, FERRY_LOCAL_RANK,
// FERRY_LOCAL_SIZE, FERRY_ADDR (a free loopback port, unless the caller set one) and FERRY_SECRET
// (128 random bits, unless set), which is all detectLaunch() and the bootstrap need (rank_env.hpp),
// and with torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT,
// so that torch.distributed's env:// works unchanged under it.
// This file holds the command line and the supervision policy.
//
// Several hosts. A job spread over hosts runs one ferryrun per host, each with the job's size
// (--world-size W) and the global rank of its first rank (--first-rank K): its N ranks are K..K+N-1,
// with local ranks 0..N-1. Every host must agree on where rank 0 listens and on the secret, so then
// FERRY_ADDR and FERRY_SECRET come from the caller's environment and ferryrun makes up neither.
// Everything below speaks of global ranks (output prefixes, reports); only the CPU binding and the
// local-rank variables count from this host's first rank. test/cluster/cluster.sh starts jobs so.
//
// Output. A rank's stdout and stderr are pipes that LineRelay copies to ours one whole line at a
// time, prefixed with "[rank] ", the global rank (line_relay.hpp). When our stdout or stderr is a
// closed pipe (ferryrun ... | head), the ranks' pipes to it are closed too, so a rank that keeps
// writing gets SIGPIPE, exactly as it would without ferryrun in between.
//
// Signals. Every rank leads its own process group. Ctrl-C therefore reaches ferryrun only (the
// terminal signals the foreground group, which is ferryrun's), and ferryrun forwards SIGINT,
// SIGTERM, SIGHUP and SIGQUIT once to every rank's group: each rank and its children see the signal
// exactly once. Had the ranks stayed in our group they would get Ctrl-C twice, from the terminal and
// from us. Signalling whole groups also reaches what a rank started (sh -c 'sleep 60'). A second
// signal kills all ranks with SIGKILL. If ferryrun itself dies, PR_SET_PDEATHSIG sends each rank
// SIGTERM. Ranks in background groups must not read the terminal (they would stop on SIGTTIN), so
// stdin is /dev/null, except that rank 0 inherits a stdin that is a pipe or a file.
//
// Failure. The first rank to exit non-zero or to die of a signal is reported on one line; the
// others get --report-seconds (FERRY_REPORT_SECONDS, default 3) to exit by themselves (ferry ranks
// notice a dead peer and say so), then SIGTERM, then SIGKILL kGraceSeconds later, and ferryrun
// exits with that rank's code (128 + N for signal N), 124 after --timeout, 2 for bad usage, 126/127
// when the program cannot be executed, and 1 when ferryrun itself fails. Ranks that exit while
// being stopped are not reported.
// With --keep-going (elastic jobs, whose survivors shrink their communicator and go on) a rank that
// dies is reported and the others keep running; ferryrun then exits 0 when every rank that exited
// by itself exited 0 and at least one did, else with the first failure's code.
// The loop sleeps in poll() on the pipes and a signalfd (SIGCHLD included): no busy waiting.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/deadline.hpp"
#include "tools/binding.hpp"
#include "tools/line_relay.hpp"
#include "tools/rank_env.hpp"
#include "tools/spawn.hpp"

extern char** environ;

namespace {

using ferry::tools::LineRelay;
using ferry::tools::writeAll;

constexpr int kMaxRanks = 4096;         // started by one ferryrun
constexpr int kMaxWorldSize = 1 << 24;  // in the whole job, over every host
constexpr double kGraceSeconds = 2.0;   // SIGTERM to SIGKILL
constexpr double kReportSeconds = 3.0;  // default: a rank failed, others may still report their errors
constexpr char kReportVariable[] = "FERRY_REPORT_SECONDS";
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

constexpr char kUsage[] =
    "usage: ferryrun [-n N | --np N] [--world-size W --first-rank K] [--timeout SECONDS]\n"
    "                [--report-seconds S] [--bind-to auto|core|none] [--no-prefix] [--] PROGRAM [ARGS...]\n"
    "Start N ranks of PROGRAM on this host with FERRY_RANK, FERRY_WORLD_SIZE, FERRY_LOCAL_RANK,\n"
    "FERRY_LOCAL_SIZE, FERRY_ADDR and FERRY_SECRET set, and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1) and MASTER_PORT (a free port) for torch.distributed's env://\n"
    "(MASTER_ADDR and MASTER_PORT unless set; over several hosts, set them as FERRY_ADDR), and prefix\n"
    "their output lines with \"[rank] \".\n"
    "  -n, --np N          ranks to start here, 1 to 4096 (default 1)\n"
    "  --world-size W      the job has W ranks in all, over several hosts (one ferryrun each); the\n"
    "                      ranks started here are K..K+N-1 (FERRY_RANK), with FERRY_LOCAL_RANK 0..N-1\n"
    "                      and FERRY_LOCAL_SIZE N. Every host's ferryrun needs the same FERRY_ADDR\n"
    "                      (host:port where rank 0 listens) and FERRY_SECRET in its environment\n"
    "  --first-rank K      with --world-size: the global rank of the first rank started here\n"
    "                      (default 0); K+N must not exceed W\n"
    "  --timeout SECONDS   stop all ranks after SECONDS and exit 124\n"
    "  --report-seconds S  after a rank fails, the others get S seconds to exit by themselves and\n"
    "                      report what they saw before they are stopped (default: $FERRY_REPORT_SECONDS,\n"
    "                      else 3; 0 stops them at once)\n"
    "  --bind-to WHAT      core: rank r runs on the r-th core of ferryrun's CPUs (distinct physical\n"
    "                      cores first); none: wherever the scheduler puts it; auto (default): core\n"
    "                      when there are at least N CPUs, else none\n"
    "  --no-prefix         ranks write straight to stdout and stderr (lines may interleave)\n"
    "  --keep-going        a rank that dies does not stop the others (elastic jobs: the survivors\n"
    "                      shrink their communicator); exit 0 when every rank that exited by\n"
    "                      itself exited 0\n"
    "  -h, --help          show this help\n"
    "Exit status: 0 when every rank exits 0, else the code of the first rank that failed\n"
    "(128+N for signal N), 124 on timeout, 2 for bad usage, 126/127 when PROGRAM cannot run.\n";

// One "ferryrun: ..." line on stderr, written like the ranks' lines (whole, unbuffered).
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof(buf), "ferryrun: ");
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  n = std::min<int>(n, sizeof(buf) - 2);
  buf[n++] = '\n';
  writeAll(2, buf, static_cast<size_t>(n));
}

[[noreturn]] void usageError(const std::string& message) {
  say("%s", message.c_str());
  const char* synopsisEnd = std::strchr(kUsage, '\n') + 1;
  writeAll(2, kUsage, static_cast<size_t>(synopsisEnd - kUsage));
  say("run 'ferryrun --help' for more");
  std::exit(2);
}

[[noreturn]] void systemFailure(const char* what) {
  say("%s: %s", what, std::strerror(errno));
  std::exit(1);
}

struct Options {
  int ranks = 1;                          // started here
  int worldSize = 0;                      // --world-size, 0 when not given (the job is the ranks started here)
  int firstRank = -1;                     // --first-rank, -1 when not given
  double timeout = 0;                     // seconds, 0: none
  double reportSeconds = kReportSeconds;  // --report-seconds, or FERRY_REPORT_SECONDS
  bool prefix = true;
  bool keepGoing = false;  // --keep-going
  ferry::tools::BindPolicy bind = ferry::tools::BindPolicy::kAuto;
  std::vector<char*> argv;  // the program and its arguments, null-terminated
};

// --world-size and --first-rank must describe a range of ranks inside the job, and the hosts must
// share a rendezvous: each error names the flag and the value it expected.
void checkRankRange(Options& o) {
  if (o.worldSize == 0) {
    if (o.firstRank >= 0) {
      usageError("--first-rank needs --world-size: the number of ranks of the whole job, on every host");
    }
    return;
  }
  if (o.firstRank < 0) o.firstRank = 0;
  const std::string n = std::to_string(o.ranks), w = std::to_string(o.worldSize);
  if (o.ranks > o.worldSize) {
    usageError("-n " + n + " starts more ranks than --world-size " + w + ": expected -n at most " + w);
  }
  if (o.firstRank + o.ranks > o.worldSize) {
    usageError("--first-rank " + std::to_string(o.firstRank) + " with -n " + n + " would start ranks up to " +
               std::to_string(o.firstRank + o.ranks - 1) + ", beyond --world-size " + w +
               ": expected --first-rank at most " + std::to_string(o.worldSize - o.ranks));
  }
  ferry::Status shared = ferry::tools::requireSharedRendezvous();
  if (!shared.isOk()) usageError(shared.message());
}

// Longest --timeout or --report-seconds (3 years), inside what a Deadline holds (1e9 s; it never
// expires past that, which would turn a huge value into no limit at all).
constexpr double kMaxSeconds = 1e8;

// A number of seconds in [0, kMaxSeconds] (positive with `positive`), or nullopt.
std::optional<double> parseSeconds(const std::string& value, bool positive) {
  char* end = nullptr;
  errno = 0;
  double t = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(t) || t < 0 || (positive && t == 0) ||
      t > kMaxSeconds) {
    return std::nullopt;
  }
  return t;
}

Options parseArgs(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv(kReportVariable); env != nullptr && *env != '\0') {
    auto t = parseSeconds(env, false);
    if (!t) {
      usageError(std::string("invalid value '") + env + "' for " + kReportVariable +
                 ": expected a number of seconds >= 0 and <= 1e8");
    }
    o.reportSeconds = *t;
  }
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program starts here
    if (arg == "-h" || arg == "--help") {
      writeAll(1, kUsage, sizeof(kUsage) - 1);
      std::exit(0);
    }
    if (arg == "--no-prefix") {
      o.prefix = false;
      continue;
    }
    if (arg == "--keep-going") {
      o.keepGoing = true;
      continue;
    }
    // Options with a value: "-n 4", "-n4", "--np 4", "--np=4", "--timeout 5", "--timeout=5".
    std::string flag = arg, value;
    bool inline_ = false;
    if (arg.rfind("-n", 0) == 0 && arg.size() > 2 && arg[1] != '-') {
      flag = "-n", value = arg.substr(2), inline_ = true;
    } else if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq), value = arg.substr(eq + 1), inline_ = true;
    }
    if (flag != "-n" && flag != "--np" && flag != "--timeout" && flag != "--report-seconds" && flag != "--bind-to" &&
        flag != "--world-size" && flag != "--first-rank") {
      usageError("unknown option '" + arg + "'");
    }
    if (!inline_) {
      if (i + 1 >= argc) usageError(flag + " needs a value");
      value = argv[++i];
    }
    char* end = nullptr;
    errno = 0;
    if (flag == "--bind-to") {
      if (!ferry::tools::parseBindPolicy(value, &o.bind)) {
        usageError("invalid value '" + value + "' for --bind-to: expected auto, core or none");
      }
    } else if (flag == "--timeout") {
      auto t = parseSeconds(value, true);
      if (!t) usageError("invalid value '" + value + "' for --timeout: expected a number of seconds > 0 and <= 1e8");
      o.timeout = *t;
    } else if (flag == "--report-seconds") {
      auto t = parseSeconds(value, false);
      if (!t) {
        usageError("invalid value '" + value + "' for --report-seconds: expected a number of seconds >= 0 and <= 1e8");
      }
      o.reportSeconds = *t;
    } else if (flag == "--world-size" || flag == "--first-rank") {
      const bool world = flag == "--world-size";
      const long lo = world ? 1 : 0, hi = world ? kMaxWorldSize : kMaxWorldSize - 1;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
        usageError("invalid value '" + value + "' for " + flag + ": expected an integer from " + std::to_string(lo) +
                   " to " + std::to_string(hi));
      }
      (world ? o.worldSize : o.firstRank) = static_cast<int>(n);
    } else {
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || n < 1 || n > kMaxRanks) {
        usageError("invalid value '" + value + "' for " + flag + ": expected an integer from 1 to " +
                   std::to_string(kMaxRanks));
      }
      o.ranks = static_cast<int>(n);
    }
  }
  if (i >= argc) usageError("missing the program to run");
  checkRankRange(o);
  o.argv.assign(argv + i, argv + argc);
  o.argv.push_back(nullptr);
  return o;
}

struct Rank {
  int global = 0;  // rank in the whole job
  pid_t pid = -1;
  bool running = false;
  LineRelay out, err;  // closed with --no-prefix
};

class Job {
 public:
  explicit Job(Options options) : o_(std::move(options)), ranks_(static_cast<size_t>(o_.ranks)) {
    range_.localSize = o_.ranks;
    range_.worldSize = o_.worldSize > 0 ? o_.worldSize : o_.ranks;
    range_.firstRank = o_.worldSize > 0 ? o_.firstRank : 0;
    range_.sharedRendezvous = o_.worldSize > 0;
    for (int r = 0; r < o_.ranks; ++r) ranks_[static_cast<size_t>(r)].global = range_.firstRank + r;
  }
  int run();

 private:
  enum class State { kRunning, kDraining, kStopping, kKilled };

  void prepare();
  bool startRank(int r);
  void loop();
  void reap();
  void onExit(Rank& rank, int status);
  void onSignal(int sig);
  void signalRanks(int sig);
  void stopAll(int sig);
  int runningCount() const;

  Options o_;
  ferry::tools::RankRange range_;
  std::vector<Rank> ranks_;       // by local rank
  std::vector<std::string> env_;  // the environment without the per-rank variables
  ferry::tools::InheritedState inherited_;
  int signalFd_ = -1;
  int devNull_ = -1;
  State state_ = State::kRunning;
  bool forwarded_ = false;
  int exitCode_ = 0;
  int firstDeath_ = 0;  // --keep-going: 128 + the signal of the first rank killed
  int cleanExits_ = 0;  // ranks that exited 0
  ferry::Deadline timeoutAt_, killAt_;
  std::vector<int> cpus_;  // the CPU of each rank (--bind-to), or empty
};

void Job::prepare() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  inherited_ = ferry::tools::superviseChildren(set, static_cast<rlim_t>(o_.ranks) * 2 + 64);
  signalFd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signalFd_ < 0) systemFailure("signalfd failed");
  devNull_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devNull_ < 0) systemFailure("cannot open /dev/null");

  auto env = ferry::tools::sharedRankEnv(environ, range_);
  if (!env.isOk()) {
    if (env.status().code() == ferry::ErrorCode::kInvalidUsage) usageError(env.status().message());
    say("%s", env.status().message().c_str());
    std::exit(1);
  }
  env_ = std::move(*env);

  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    cpus_ = ferry::tools::bindingFor(o_.bind, o_.ranks, ferry::tools::cpusByCore(allowed));
  } else if (o_.bind == ferry::tools::BindPolicy::kCore) {
    say("--bind-to core: cannot read this process's CPUs (%s); the ranks run unbound", std::strerror(errno));
  }
}

// Forks and execs local rank r. False when the program cannot be executed (reported here).
bool Job::startRank(int r) {
  Rank& rank = ranks_[static_cast<size_t>(r)];
  std::vector<std::string> own = ferry::tools::ownRankEnv(range_, r);
  std::vector<char*> envp;
  for (auto* list : {&env_, &own}) {
    for (auto& e : *list) envp.push_back(e.data());
  }
  envp.push_back(nullptr);

  int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
  if (o_.prefix && (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0)) {
    systemFailure("cannot create the output pipes");
  }
  ferry::tools::SpawnRequest request;
  request.argv = o_.argv.data();
  request.envp = envp.data();
  request.stdinFd = (rank.global == 0 && !isatty(0)) ? -1 : devNull_;
  request.stdoutFd = outPipe[1];
  request.stderrFd = errPipe[1];
  request.inherited = &inherited_;
  if (!cpus_.empty()) request.cpu = cpus_[static_cast<size_t>(r)];
  ferry::tools::Spawned spawned = ferry::tools::spawnInOwnGroup(request);
  if (o_.prefix) {
    close(outPipe[1]);
    close(errPipe[1]);
    std::string prefix = "[" + std::to_string(rank.global) + "] ";
    rank.out = LineRelay(outPipe[0], 1, prefix);
    rank.err = LineRelay(errPipe[0], 2, prefix);
  }
  if (spawned.pid < 0 && !spawned.execFailed) {
    errno = spawned.error;
    systemFailure("cannot start a rank");
  }
  if (spawned.execFailed) {
    rank.out.close();
    rank.err.close();
    say("cannot run '%s': %s", o_.argv[0], std::strerror(spawned.error));
    exitCode_ = (spawned.error == ENOENT) ? 127 : 126;
    return false;
  }
  rank.pid = spawned.pid;
  rank.running = true;
  return true;
}

int Job::runningCount() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.running ? 1 : 0;
  return n;
}

// Signals every running rank's process group; a rank that left its group (setsid) directly.
void Job::signalRanks(int sig) {
  for (Rank& r : ranks_) {
    if (r.running && kill(-r.pid, sig) != 0) kill(r.pid, sig);
  }
}

void Job::stopAll(int sig) {
  signalRanks(sig);
  if (sig == SIGKILL) {
    state_ = State::kKilled;
  } else {
    state_ = State::kStopping;
    killAt_ = ferry::Deadline::after(kGraceSeconds);
  }
}

void Job::onExit(Rank& rank, int status) {
  rank.running = false;
  // What the rank wrote before it died comes before our report of its death.
  rank.out.drain();
  rank.err.drain();
  bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (!failed) ++cleanExits_;
  if (!failed || state_ != State::kRunning) return;
  if (o_.keepGoing) {
    int others = runningCount();
    if (WIFEXITED(status)) {
      if (exitCode_ == 0) exitCode_ = WEXITSTATUS(status);
      say("rank %d (pid %d) exited with code %d; %d other rank%s keep%s running (--keep-going)", rank.global, rank.pid,
          WEXITSTATUS(status), others, others == 1 ? "" : "s", others == 1 ? "s" : "");
    } else {
      if (firstDeath_ == 0) firstDeath_ = 128 + WTERMSIG(status);
      say("rank %d (pid %d) was killed by signal %d (%s); %d other rank%s keep%s running (--keep-going)", rank.global,
          rank.pid, WTERMSIG(status), strsignal(WTERMSIG(status)), others, others == 1 ? "" : "s",
          others == 1 ? "s" : "");
    }
    return;
  }
  // The survivors of a collective usually notice the failure themselves within moments and exit
  // with an error that says what happened; give them --report-seconds before SIGTERM.
  const int rankIndex = rank.global;
  int others = runningCount();
  std::string stopping = others == 0   ? ""
                         : others == 1 ? "; stopping the other rank"
                                       : "; stopping the other " + std::to_string(others) + " ranks";
  if (WIFEXITED(status)) {
    exitCode_ = WEXITSTATUS(status);
    say("rank %d (pid %d) exited with code %d%s", rankIndex, rank.pid, exitCode_, stopping.c_str());
  } else {
    int sig = WTERMSIG(status);
    exitCode_ = 128 + sig;
    say("rank %d (pid %d) was killed by signal %d (%s%s)%s", rankIndex, rank.pid, sig, strsignal(sig),
        WCOREDUMP(status) ? ", core dumped" : "", stopping.c_str());
  }
  state_ = State::kDraining;
  // 0 stops the others at once: Deadline::after(0) would never expire.
  killAt_ = ferry::Deadline::after(std::max(o_.reportSeconds, 1e-6));
}

void Job::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (Rank& r : ranks_) {
      if (r.running && r.pid == pid) onExit(r, status);
    }
  }
}

void Job::onSignal(int sig) {
  int n = runningCount();
  if (state_ == State::kRunning && !forwarded_) {
    forwarded_ = true;
    say("forwarding SIG%s to %d rank%s (send it again to kill them)", sigabbrev_np(sig), n, n == 1 ? "" : "s");
    signalRanks(sig);
    return;
  }
  if (state_ == State::kKilled) return;
  say("received SIG%s again; killing %d rank%s", sigabbrev_np(sig), n, n == 1 ? "" : "s");
  if (state_ == State::kRunning) exitCode_ = 128 + sig;
  stopAll(SIGKILL);
}

void Job::loop() {
  std::vector<pollfd> fds;
  std::vector<LineRelay*> owners;
  while (runningCount() > 0) {
    fds.assign(1, pollfd{signalFd_, POLLIN, 0});
    owners.assign(1, nullptr);
    for (Rank& r : ranks_) {
      for (LineRelay* relay : {&r.out, &r.err}) {
        if (ferry::tools::destBroken(relay->dest())) relay->close();  // its writers get SIGPIPE
        if (relay->fd() < 0) continue;
        fds.push_back(pollfd{relay->fd(), POLLIN, 0});
        owners.push_back(relay);
      }
    }
    int waitMs = -1;
    if (state_ == State::kRunning && o_.timeout > 0) waitMs = timeoutAt_.remainingMs();
    if (state_ == State::kStopping || state_ == State::kDraining) waitMs = killAt_.remainingMs();
    if (poll(fds.data(), fds.size(), waitMs) < 0 && errno != EINTR) systemFailure("poll failed");
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) owners[i]->readOnce();
    }
    if (fds[0].revents != 0) {
      signalfd_siginfo info;
      while (read(signalFd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        if (info.ssi_signo == SIGCHLD) {
          reap();
        } else {
          onSignal(static_cast<int>(info.ssi_signo));
        }
      }
      reap();  // SIGCHLDs coalesce: reap whatever exited
    }
    if (state_ == State::kRunning && o_.timeout > 0 && timeoutAt_.expired()) {
      int n = runningCount();
      say("timed out after %g s; stopping %d running rank%s", o_.timeout, n, n == 1 ? "" : "s");
      exitCode_ = 124;
      stopAll(SIGTERM);
    }
    if (state_ == State::kDraining && killAt_.expired() && runningCount() > 0) stopAll(SIGTERM);
    if (state_ == State::kStopping && killAt_.expired() && runningCount() > 0) {
      std::string late;
      for (const Rank& r : ranks_) {
        if (r.running) late += (late.empty() ? "" : ", ") + std::to_string(r.global);
      }
      say("rank%s %s did not stop within %g s of SIGTERM; sending SIGKILL",
          late.find(',') == std::string::npos ? "" : "s", late.c_str(), kGraceSeconds);
      stopAll(SIGKILL);
    }
  }
  // Every rank is gone: relay what is left in the pipes, then close them even if a rank's
  // orphaned children still hold them open.
  for (Rank& r : ranks_) {
    r.out.finish();
    r.err.finish();
  }
}

int Job::run() {
  prepare();
  timeoutAt_ = ferry::Deadline::after(o_.timeout);
  for (int r = 0; r < o_.ranks; ++r) {
    if (!startRank(r)) {
      stopAll(SIGTERM);  // the ranks started so far
      break;
    }
  }
  loop();
  // --keep-going: deaths are what the job survives, unless nobody survived them.
  if (o_.keepGoing && exitCode_ == 0 && cleanExits_ == 0) exitCode_ = firstDeath_;
  return exitCode_;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parseArgs(argc, argv);
  Job job(std::move(options));
  return job.run();
}
