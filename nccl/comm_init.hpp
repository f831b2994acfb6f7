// Creating communicators for the C API: unique ids (NCCL_COMM_ID included), joining on this thread
// or in the background, reading ncclConfig_t, and the one-time report of the NCCL_* environment.
#pragma once

#include "ferry/comm.hpp"
#include "ferry/nccl.h"

namespace ferry::nccl {

/// One rank's pending join: the handle it fills and what Comm::create needs.
struct InitRequest {
  ncclComm_t handle = nullptr;
  UniqueId id;
  int rank = 0;
  int size = 1;
};

/// The id ncclGetUniqueId returns. With NCCL_COMM_ID (or FERRY_ADDR) set it describes that
/// address and FERRY_SECRET's secret, the same on every rank, and starts nothing; otherwise a new
/// rendezvous root starts in this process.
Result<UniqueId> makeUniqueId();

/// Join on this thread: Comm::create, then store the result in the handle. Rank 0 of an id made
/// from NCCL_COMM_ID first starts the rendezvous root there. Deletes a handle destroyed meanwhile.
Status runInit(const InitRequest& request);
/// runInit on a new background thread.
void launchInit(const InitRequest& request);

/// config->blocking (`fallback` when config is NULL or leaves it undefined). Rejects a config that
/// NCCL_CONFIG_INITIALIZER did not initialize and out-of-range values of the fields ferry checks;
/// reads only the fields the caller's layout (config->size) holds, so older headers' configs work.
Result<bool> readBlocking(const char* fn, const ncclConfig_t* config, bool fallback);

/// Once per process: the VERSION log line, and one INFO line naming the NCCL_* variables set in
/// the environment that ferry does not honour (those it honours are NCCL aliases in knobs.def).
void reportEnvironment();

}  // namespace ferry::nccl
