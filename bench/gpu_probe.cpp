// ferry-gpu-probe: the preflight of bench/gpu_check.sh. Says whether this machine can run ferry's
// collective kernel before anything else runs: the driver and runtime versions, the GPU, and what
// the device reports for the kernel (registers, stack, largest block, resident blocks at the block
// size the runtime launches), next to ptxas's figures from the build for that architecture.
//   exit 0: the kernel launches; 1: it cannot (the figures say why); 3: no CUDA device (the reason).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "collectives/cuda/device.hpp"
#include "collectives/cuda/kernel_figures.hpp"

using namespace ferry::gpu;

int main() {
  int driver = 0, runtime = 0, devices = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t e = cudaGetDeviceCount(&devices);
  std::printf("probe driver=%d runtime=%d devices=%d\n", driver, runtime, e == cudaSuccess ? devices : 0);
  if (e != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: %s\n", e == cudaSuccess ? "the driver shows none" : cudaGetErrorString(e));
    return 3;
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  const std::string arch = "sm_" + std::to_string(p.major * 10 + p.minor);
  std::printf("probe device=0 name=\"%s\" arch=%s sms=%d regs_per_block=%d\n", p.name, arch.c_str(),
              p.multiProcessorCount, p.regsPerBlock);
  int regs = 0, maxThreads = 0;
  size_t local = 0;
  const int rc = kernelAttributes(&regs, &local, &maxThreads);
  if (rc != 0) {
    std::printf("FAIL collectiveKernel: cudaFuncGetAttributes: %s (is the binary built for %s?)\n",
                cudaGetErrorString(static_cast<cudaError_t>(rc)), arch.c_str());
    return 1;
  }
  const int threads = maxThreadsPerBlock(), resident = residentBlocksPerSm(threads);
  std::printf(
      "probe kernel=collectiveKernel registers=%d stack=%zu max_threads=%d launched_threads=%d "
      "resident_blocks=%d\n",
      regs, local, maxThreads, threads, resident);
  for (const KernelFigures& f : kKernelFigures) {
    if (arch == f.arch && std::string(f.kernel).find("collectiveKernel") != std::string::npos) {
      std::printf("probe ptxas %s: registers=%d stack=%d bounds=%d (build figures; the device loaded %s)\n", f.arch,
                  f.registers, f.stackBytes, f.maxThreads, regs == f.registers ? "the same" : "different code");
    }
  }
  if (maxThreads < threads || resident < kMinBlocksPerSm) {
    std::printf(
        "FAIL collectiveKernel cannot launch with %d threads per block on %s: the device allows %d, and "
        "holds %d blocks per multiprocessor (%d registers x %d threads)\n",
        threads, p.name, maxThreads, resident, regs, threads);
    return 1;
  }
  std::printf("ok collectiveKernel launches: %d threads per block, %d blocks per multiprocessor\n", threads, resident);
  return 0;
}
