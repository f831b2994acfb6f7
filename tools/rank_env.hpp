// The environment ferryrun hands its ranks: the counterpart of detectLaunch() for a local job.
//
// detectLaunch() reads FERRY_RANK, FERRY_WORLD_SIZE, FERRY_LOCAL_RANK and FERRY_LOCAL_SIZE, and the
// bootstrap FERRY_ADDR and FERRY_SECRET. For a job on one host every rank gets the same values but
// its rank, so the shared part is built once here and each rank appends its own two variables.
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "runtime/base/config.hpp"

namespace ferry::tools {

/// "127.0.0.1:<port>" with a port the kernel just handed out (bound to port 0, read back, closed).
/// Another process could take the port before rank 0 listens on it; on one host that is rare and
/// fails loudly in the bootstrap.
Result<std::string> freeLoopbackAddr();

/// 32 hex digits from getrandom(): the 128-bit job secret in the form FERRY_SECRET takes.
Result<std::string> randomSecret();

/// The environment all `ranks` ranks share: `environ` without any FERRY_RANK, FERRY_WORLD_SIZE,
/// FERRY_LOCAL_RANK, FERRY_LOCAL_SIZE, FERRY_ADDR or FERRY_SECRET, then FERRY_WORLD_SIZE and
/// FERRY_LOCAL_SIZE set to `ranks`, and FERRY_ADDR and FERRY_SECRET from `lookup` when set and not
/// empty, else a free loopback address and a random secret.
Result<std::vector<std::string>> sharedRankEnv(char* const* environ, int ranks,
                                               const EnvLookup& lookup = readEnv);

/// The two variables only rank `rank` gets: FERRY_RANK and FERRY_LOCAL_RANK (one host: the same).
std::vector<std::string> ownRankEnv(int rank);

}  // namespace ferry::tools
