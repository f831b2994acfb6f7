// Runs a test body on N real processes joined into one communicator.
//
// The parent creates a unique id (its rendezvous root runs on a thread of the parent), forks N
// children, and each child creates Comm(id, rank, N), runs the body and exits with its status.
// The parent never touches UCX, so the children start clean. A child's stdout and stderr go to
// one pipe per rank that the parent collects, so tests can assert on error messages.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ferry/comm.hpp"

namespace ferry::test {

struct RankOutcome {
  int exitCode = -1;  ///< 0 on success; 128+signal when killed
  std::string output;
};

/// What a rank's body reports: empty on success, else a description of what went wrong.
using RankBody = std::function<std::string(Comm& comm)>;

/// Fork `n` ranks, run `body` on each, collect outcomes. Kills everything after `timeoutSeconds`.
std::vector<RankOutcome> runRanks(int n, const RankBody& body, double timeoutSeconds = 240);

/// One line per failed rank, for test diagnostics.
std::string summarize(const std::vector<RankOutcome>& outcomes);

}  // namespace ferry::test
