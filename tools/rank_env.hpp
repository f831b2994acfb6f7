// The environment ferryrun hands its ranks: the counterpart of detectLaunch() for one host's share
// of a job.
//
// detectLaunch() reads FERRY_RANK, FERRY_WORLD_SIZE, FERRY_LOCAL_RANK and FERRY_LOCAL_SIZE, and the
// bootstrap FERRY_ADDR and FERRY_SECRET. Every rank a ferryrun starts gets the same values but its
// rank and local rank, so the shared part is built once here and each rank appends its own two
// variables. A job on one host makes up its own rendezvous address and secret; a job spread over
// several hosts (one ferryrun per host, each told --world-size and --first-rank) cannot, because
// every host must agree on them, so they come from the caller's environment.
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "base/config.hpp"

namespace ferry::tools {

/// The ranks one ferryrun starts and their place in the whole job: global ranks
/// firstRank .. firstRank + localSize - 1 of worldSize.
struct RankRange {
  int worldSize = 1;
  int firstRank = 0;
  int localSize = 1;
  /// The job spans other launchers (--world-size): FERRY_ADDR and FERRY_SECRET must be given.
  bool sharedRendezvous = false;
};

/// "127.0.0.1:<port>" with a port the kernel just handed out (bound to port 0, read back, closed).
/// Another process could take the port before rank 0 listens on it; on one host that is rare and
/// fails loudly in the bootstrap.
Result<std::string> freeLoopbackAddr();

/// 32 hex digits from getrandom(): the 128-bit job secret in the form FERRY_SECRET takes.
Result<std::string> randomSecret();

/// Ok when `lookup` has a non-empty FERRY_ADDR and FERRY_SECRET, else kInvalidUsage naming the
/// first missing variable and what it must hold (the same value for every host's ferryrun).
Status requireSharedRendezvous(const EnvLookup& lookup = readEnv);

/// The environment all ranks of `range` share: `environ` without any FERRY_RANK, FERRY_WORLD_SIZE,
/// FERRY_LOCAL_RANK, FERRY_LOCAL_SIZE, FERRY_ADDR or FERRY_SECRET (nor torchrun's RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE), then FERRY_WORLD_SIZE and FERRY_LOCAL_SIZE (and WORLD_SIZE,
/// LOCAL_WORLD_SIZE) from `range`, and FERRY_ADDR and FERRY_SECRET from `lookup` when set and not
/// empty, else (one host only: requireSharedRendezvous()'s error when range.sharedRendezvous)
/// a free loopback address and a random secret; then torch's MASTER_ADDR and MASTER_PORT
/// (addTorchRendezvous).
Result<std::vector<std::string>> sharedRankEnv(char* const* environ, const RankRange& range,
                                               const EnvLookup& lookup = readEnv);

/// torch's env:// rendezvous for one host's job, appended to `env` (FERRY_ADDR already in it):
/// MASTER_ADDR=127.0.0.1 and MASTER_PORT a free port other than FERRY_ADDR's, each unless `lookup`
/// has it (inherited values stay). A job spread over hosts gets none: its caller sets both.
Status addTorchRendezvous(std::vector<std::string>& env, const RankRange& range, const EnvLookup& lookup = readEnv);

/// The variables only the `localRank`-th rank of `range` gets: FERRY_RANK (its global rank,
/// range.firstRank + localRank) and FERRY_LOCAL_RANK, and torchrun's RANK and LOCAL_RANK alike.
std::vector<std::string> ownRankEnv(const RankRange& range, int localRank);

}  // namespace ferry::tools
