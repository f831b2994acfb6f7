// Launch environments: where a rank learns its rank, world size and local rank.
#pragma once

#include <string>

#include "ferry/status.hpp"
#include "base/config.hpp"

namespace ferry {

/// What the environment says about this process's place in the job.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int localRank = 0;     ///< rank among the ranks of this host (0 when the launcher does not say)
  int localSize = -1;    ///< ranks on this host, -1 when the launcher does not say
  std::string source;    ///< "ferry", "torchrun", "openmpi", "pmi", "slurm"
  std::string rootAddr;  ///< "host:port" of the rendezvous root, empty when the environment has none
};

/// Detect from the environment, in order: FERRY_RANK/FERRY_WORLD_SIZE, torchrun (RANK/WORLD_SIZE/
/// LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_*), PMI (PMI_RANK/PMI_SIZE), Slurm (SLURM_PROCID/
/// SLURM_NTASKS/SLURM_LOCALID). The root address comes from FERRY_ADDR (or NCCL_COMM_ID), else
/// MASTER_ADDR:MASTER_PORT. Errors name the variable, its value and what was expected.
Result<LaunchInfo> detectLaunch(const EnvLookup& lookup = readEnv);

}  // namespace ferry
