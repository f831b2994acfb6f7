// PLACEHOLDER, to be deleted by the integrator: stands in for the kernels' side of
// collectives/cuda/device.hpp until the CUDA kernels (branch `kern`) are merged. runtime/meson.build
// compiles it only when collectives/cuda defines neither ferry_coll_cuda_lib nor
// ferry_coll_cuda_emu_dep. Every launch fails with cudaErrorNotSupported (801), so the kernel path
// reports a clear error instead of doing nothing.
#include "collectives/cuda/device.hpp"

namespace ferry::coll::gpu {

struct DevComm {
  int rank;
  int nRanks;
};

size_t rankResourceBytes(const DevConfig&) { return 4096; }
void buildDevComm(const DevConfig& config, int rank, const std::vector<void*>&, DevComm* out) {
  out->rank = rank;
  out->nRanks = config.nRanks;
}
size_t devCommBytes() { return sizeof(DevComm); }
int maxThreadsPerBlock() { return 512; }
int launchWorkList(const DevComm*, const DevWorkList&, int, int, void*) { return 801; }
int residentBlocksPerSm(int) { return 1; }

}  // namespace ferry::coll::gpu
