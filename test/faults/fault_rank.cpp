// One rank of a fault-injection job (test/faults/test_faults.sh): joins from the environment
// (ferryrun, cluster.sh), runs a loop of verified all-reduces, and reports how it ended on one line.
//
//   ferryrun -n 4 fault-rank [--count N] [--calls N] [--kill-rank R --kill-after S]
//                            [--straggler R (--slowdown F | --delay S)] [--absent R] [--hold S]
//                            [--tag WORD]
//
// Faults it injects itself (a link going down and packet loss are made from outside):
//   --kill-rank R --kill-after S  rank R SIGKILLs itself S seconds after its first call returned,
//                                 from another thread, so almost surely in the middle of a call;
//   --straggler R --slowdown F    rank R times its first three calls (every rank runs them at full
//                                 speed), then sleeps F - 1 times their mean before each later call:
//                                 it runs F times slower than the others would;
//   --straggler R --delay S       as above, sleeping S seconds before each call after the third;
//   --absent R                    rank R exits at once without joining: it never arrives at init.
// --hold S keeps the communicator S seconds after an error before exiting (default 0: at once).
// --tag WORD is ignored: a test passes a word of its own to find its processes with pgrep -f.
//
// Output (stdout, one line per event, every time as seconds since the epoch, which all network
// namespaces of the machine share, so a test can subtract the time it injected a fault):
//   rank R: pid P starts at T                    before anything else (R from FERRY_RANK)
//   rank R: stays away at T                      the --absent rank, which then exits
//   rank R: joined at T                          init is done
//   rank R: running at T                         the first call returned
//   rank R: straggling at T                      the straggler's first sleep starts
//   rank R: killing itself at T                  just before raise(SIGKILL)
//   rank R: ok N calls in X.XX s at T            every call succeeded and was verified
//   rank R: error after X.XX s at T in call K: MESSAGE
//                                                a call (K >= 1) or init (K = 0) failed; X counts
//                                                from the start of init
// Exit status: 0 when the run ended with an ok or an error line (the test judges the line, and a
// launcher must not cut the other ranks short because one of them reported an error), 1 when a
// result was wrong, 2 for bad usage.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  size_t count = 4u << 20;  // float32 elements per call: 16 MiB
  int calls = 20;
  int killRank = -1;
  double killAfter = 1.0;
  int straggler = -1;
  double slowdown = 0;  // F: sleep (F - 1) x the measured call time
  double delay = 0;     // or S seconds before each call
  int absent = -1;
  double hold = 0;  // seconds to keep the communicator after an error before exiting
};

// Calls every rank runs at full speed before a straggler starts sleeping (they time its calls).
constexpr int kWarmupCalls = 3;

double epochNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void say(int rank, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void say(int rank, const char* fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  // One write per line: ranks' lines never interleave, and the line is out before a SIGKILL.
  std::printf("rank %d: %s\n", rank, line);
  std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--count") o.count = std::strtoull(v, nullptr, 10);
    else if (a == "--calls") o.calls = std::atoi(v);
    else if (a == "--kill-rank") o.killRank = std::atoi(v);
    else if (a == "--kill-after") o.killAfter = std::atof(v);
    else if (a == "--straggler") o.straggler = std::atoi(v);
    else if (a == "--slowdown") o.slowdown = std::atof(v);
    else if (a == "--delay") o.delay = std::atof(v);
    else if (a == "--absent") o.absent = std::atoi(v);
    else if (a == "--hold") o.hold = std::atof(v);
    else if (a == "--tag") continue;  // ignored: marks the processes of one test for pgrep
    else return false;
  }
  return o.count > 0 && o.calls > 0;
}

// Rank r's input of call k: (r + 1) * m with m = (i + k) % 5 + 1, small integers, so the float sum
// n(n+1)/2 * m is exact.
void fill(std::vector<float>& buf, int rank, int call) {
  for (size_t i = 0; i < buf.size(); ++i)
    buf[i] = static_cast<float>((rank + 1) * static_cast<int>((i + call) % 5 + 1));
}

// The index of the first wrong element, or -1.
long long firstWrong(const std::vector<float>& buf, int size, int call) {
  const int tri = size * (size + 1) / 2;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != static_cast<float>(tri * static_cast<int>((i + call) % 5 + 1))) return static_cast<long long>(i);
  }
  return -1;
}

void holdThenExit(const Options& o, int code) {
  if (o.hold > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.hold));
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: fault-rank [--count N] [--calls N] [--kill-rank R --kill-after S] "
                 "[--straggler R (--slowdown F | --delay S)] [--absent R] [--hold S]\n");
    return 2;
  }
  const char* rankVar = std::getenv("FERRY_RANK");
  const int envRank = rankVar != nullptr ? std::atoi(rankVar) : -1;
  // First of all, so that a test can look for this process's shared-memory segments afterwards.
  say(envRank, "pid %d starts at %.3f", static_cast<int>(getpid()), epochNow());
  if (envRank == o.absent) {
    say(envRank, "stays away at %.3f", epochNow());
    return 0;
  }

  const auto t0 = Clock::now();
  auto joined = ferry::Comm::fromEnv();
  if (!joined.isOk()) {
    say(envRank, "error after %.2f s at %.3f in call 0: %s", since(t0), epochNow(), joined.status().toString().c_str());
    return 0;
  }
  ferry::Comm& c = **joined;
  const int rank = c.rank();
  say(rank, "joined at %.3f", epochNow());

  std::vector<float> in(o.count), out(o.count);
  double warmupSeconds = 0;
  const bool straggles = rank == o.straggler && (o.slowdown > 1 || o.delay > 0);
  const auto loopStart = Clock::now();
  for (int k = 1; k <= o.calls; ++k) {
    if (straggles && k > kWarmupCalls) {
      double sleep = o.delay > 0 ? o.delay : (o.slowdown - 1) * warmupSeconds / kWarmupCalls;
      if (k == kWarmupCalls + 1) say(rank, "straggling at %.3f: %.3f s before each call", epochNow(), sleep);
      std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
    }
    fill(in, rank, k);
    const auto callStart = Clock::now();
    ferry::Status s = c.allReduce(in.data(), out.data(), o.count, ferry::DataType::kFloat32, ferry::RedOp::kSum);
    if (!s.isOk()) {
      say(rank, "error after %.2f s at %.3f in call %d: %s", since(t0), epochNow(), k, s.toString().c_str());
      holdThenExit(o, 0);
    }
    if (k <= kWarmupCalls) warmupSeconds += since(callStart);
    long long wrong = firstWrong(out, c.size(), k);
    if (wrong >= 0) {
      say(rank, "WRONG result of call %d: element %lld is %g", k, wrong, static_cast<double>(out[wrong]));
      return 1;
    }
    if (k == 1) {
      say(rank, "running at %.3f", epochNow());
      if (rank == o.killRank) {
        std::thread([after = o.killAfter, rank] {
          std::this_thread::sleep_for(std::chrono::duration<double>(after));
          say(rank, "killing itself at %.3f", epochNow());
          raise(SIGKILL);
        }).detach();
      }
    }
  }
  say(rank, "ok %d calls in %.2f s at %.3f", o.calls, since(loopStart), epochNow());
  return 0;
}
