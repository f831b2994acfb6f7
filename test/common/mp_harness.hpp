// Runs a test body on N real processes joined into one communicator.
//
// Fork mode (the default). The parent creates a unique id (its rendezvous root runs in a child of
// its own), forks N children, and each child creates Comm(id, rank, N), runs the body and exits
// with its status. The parent never touches UCX, so the children start clean. A child's stdout and
// stderr go to one pipe per rank that the parent collects, so tests can assert on error messages.
// FERRY_TEST_HOSTS=H (H >= 1) spreads the children over H simulated hosts: child r sets
// FERRY_HOST_ID=test-host-<r*H/n> before its first ferry call (ferry reads its environment once),
// so a run of 3 ranks on 2 hosts has hosts of 2 and 1 ranks; with FERRY_TEST_HOSTS_DEALT=1 child r
// is on host r mod H instead (hosts whose ranks are not numbered in a row). CI uses it where network namespaces
// (test/cluster/cluster.sh) cannot be made.
//
// Launched mode. When a launcher started this process as one rank of a job (FERRY_RANK and
// FERRY_WORLD_SIZE set: ferryrun, cluster.sh), runRanks does not fork: the process joins the job
// once with Comm::fromEnv(), keeps that communicator for every later runRanks call, and runs the
// body on its own rank only. Its own outcome is real; the other ranks' entries say exit code 0,
// "(runs in another process)", since their processes report for themselves. A call for a world
// size other than the job's runs nothing and reports every rank as skipped (exit code 0), so a test
// that loops over world sizes runs the one the job has.
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
/// In launched mode: run `body` on this process's rank of the job (see above); after
/// `timeoutSeconds` the process reports the timeout and exits with code 124.
std::vector<RankOutcome> runRanks(int n, const RankBody& body, double timeoutSeconds = 240);

/// The job's world size when a launcher started this process (FERRY_RANK and FERRY_WORLD_SIZE
/// set, FERRY_WORLD_SIZE >= 1), else 0: fork mode.
int launchedWorldSize();

/// For a rank that must stay alive, outside any call, while others finish: markDone() counts this
/// rank as finished in memory the run's processes share (not through the communicator), and
/// waitForDone(k, s) returns once k ranks of the run have marked, or after s seconds (false). In
/// launched mode the job's processes share no memory: markDone() does nothing and waitForDone()
/// waits the full s seconds.
void markDone();
bool waitForDone(int count, double seconds);

/// One line per failed rank, for test diagnostics.
std::string summarize(const std::vector<RankOutcome>& outcomes);

}  // namespace ferry::test
