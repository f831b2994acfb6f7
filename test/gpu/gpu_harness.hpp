// What the GPU test programs share: CUDA errors that end the program naming the step, stream waits
// with a deadline (a hang names its case instead of timing out blind), and jobs of several processes
// made of copies of the running program.
#pragma once

#include <cuda_runtime.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ferry/comm.hpp"

extern char** environ;

namespace gputest {

/// Exit status of a test that cannot run here (meson reports SKIP).
inline constexpr int kSkip = 77;

/// End the program, naming `what`, unless `e` is cudaSuccess.
inline void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("FAIL: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    std::fflush(stdout);
    std::_Exit(1);
  }
}

/// Wait for `s`; after 20 s, report a hang of `what` and end the program.
inline void waitStream(cudaStream_t s, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cudaCheck(e, ("stream of " + what).c_str());
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("FAIL (hang): %s did not complete within 20 s\n", what.c_str());
      std::fflush(stdout);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// Start `n` copies of program `self` as the ranks of one job (rendezvous hosted here), each with the
/// arguments `childMode RANK N ID-IN-HEX`, and wait for them: 0 when every one exits with 0.
inline int runRanks(const char* self, const char* childMode, int n) {
  auto id = ferry::UniqueId::create();
  if (!id.isOk()) return std::printf("FAIL: %s\n", id.status().message().c_str()), 1;
  const std::string hex = id->toHex(), size = std::to_string(n);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const std::string rank = std::to_string(r);
    const char* argv[] = {self, childMode, rank.c_str(), size.c_str(), hex.c_str(), nullptr};
    pid_t pid;
    if (posix_spawn(&pid, self, nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      return std::printf("FAIL: cannot start rank %d\n", r), 1;
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (size_t r = 0; r < pids.size(); ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::printf("FAIL: process rank %zu ended with status %d\n", r, st);
      rc = 1;
    }
  }
  return rc;
}

}  // namespace gputest
