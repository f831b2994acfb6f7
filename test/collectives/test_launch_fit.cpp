// Launch fit without a GPU: every kernel entry, on every architecture of -Dcuda-arch=all, must
// launch with the block size the runtime gives it, hold the blocks the co-residency check plans
// with, and keep its stack frame within budget, by ptxas's own figures (kernel_figures.json, made
// by collectives/cuda/launch_fit.py update). The figures must be those of the kernels as they are:
// the build hashes the PTX the sources give now and this test compares it with the figures' hash.
// The occupancy rules themselves are checked against values of NVIDIA's occupancy calculator.
#include <catch2/catch.hpp>

#include "test/common/catch_runner.hpp"

#include <set>
#include <string>

#include "collectives/cuda/dev_comm.hpp"
#include "collectives/cuda/kernel_figures.hpp"
#include "kernels/cuda/reduce_copy_kernel.hpp"

using namespace ferry::gpu;

namespace {

/// The block size the runtime launches kernel `name` with.
int launchedThreads(const std::string& name) {
  if (name.find("collectiveKernel") != std::string::npos) return maxThreadsPerBlock();
  if (name.find("reduceCopyKernel") != std::string::npos) return ferry::gpu::kMaxReduceCopyThreads;
  return 0;
}

KernelFigures fig(const char* arch, int regs, int shared = 0) { return {arch, "k", regs, 0, 0, 0, shared, 0}; }

}  // namespace

TEST_CASE("launch fit: the occupancy rules give the calculator's values", "[launch-fit]") {
  const ArchLimits h100 = archLimits(90);
  // 209 registers x 512 threads: 107,008 > 65,536 registers per block (the kernel as it was).
  CHECK(launchRefusal(fig("sm_90", 209), h100, 512) != nullptr);
  CHECK(residentBlocks(fig("sm_90", 209), h100, 512) == 0);
  CHECK(residentBlocks(fig("sm_90", 209), h100, 256) == 1);
  CHECK(residentBlocks(fig("sm_90", 128), h100, 512) == 1);
  CHECK(residentBlocks(fig("sm_90", 64), h100, 512) == 2);
  CHECK(residentBlocks(fig("sm_90", 32), h100, 256) == 8);
  CHECK(residentBlocks(fig("sm_90", 16), h100, 32) == 32);   // the block limit
  CHECK(residentBlocks(fig("sm_90", 40), h100, 128) == 12);  // 40 regs -> 1280 per warp: 12 warps per sub-partition
  CHECK(launchRefusal(fig("sm_90", 255), h100, 256) == nullptr);
  CHECK(launchRefusal(fig("sm_90", 256), h100, 32) != nullptr);
  CHECK(residentBlocks(fig("sm_80", 32, 100 * 1024), archLimits(80), 128) == 1);  // shared memory bound
  CHECK(residentBlocks(fig("sm_90", 32, 100 * 1024), h100, 128) == 2);
  CHECK(archLimits(75).sm == 0);
}

TEST_CASE("launch fit: every kernel launches at the runtime's block size on every architecture", "[launch-fit]") {
  INFO("figures: ptxas " << kFiguresToolkit << ", PTX hash " << kFiguresPtxHash << "; now " << kCurrentPtxHash);
  std::set<std::string> archesSeen, kernelsSeen;
  for (const KernelFigures& f : kKernelFigures) {
    archesSeen.insert(f.arch);
    kernelsSeen.insert(f.kernel);
    const int threads = launchedThreads(f.kernel);
    const ArchLimits l = archLimits(archNumber(f.arch));
    INFO(f.kernel << " on " << f.arch << ": " << f.registers << " registers, " << f.stackBytes << "-byte stack, "
                  << f.spillStoreBytes << "/" << f.spillLoadBytes << " bytes spilled, " << f.sharedBytes
                  << " bytes shared, __launch_bounds__ " << f.maxThreads << "; launched with " << threads
                  << " threads");
    REQUIRE(threads > 0);  // a kernel the runtime does not know how it launches
    REQUIRE(l.sm != 0);
    const char* why = launchRefusal(f, l, threads);
    INFO("refused: " << (why ? why : "no"));
    CHECK(why == nullptr);
    // The co-residency check (runtime/cuda/device_context.cpp) plans with kMinBlocksPerSm.
    CHECK(residentBlocks(f, l, threads) >= kMinBlocksPerSm);
    // __launch_bounds__ is the block size the runtime launches: ptxas planned registers for it.
    CHECK(f.maxThreads == threads);
    CHECK(f.stackBytes <= kStackBudgetBytes);
  }
  if (FERRY_BUILT_WITH_NVCC) {
    CHECK(archesSeen == std::set<std::string>{"sm_80", "sm_90", "sm_100"});
    CHECK(kernelsSeen.count("ferry::gpu::collectiveKernel") == 1);
  }
}

TEST_CASE("launch fit: the figures are those of the kernels as built", "[launch-fit]") {
  if (std::string(kCurrentPtxHash) == "none") {
    WARN("built without nvcc: the figures' freshness is checked where nvcc is");
    return;
  }
  INFO("the kernels changed since kernel_figures.json was made (ptxas " << kFiguresToolkit
                                                                        << "): run `python3 collectives/cuda/"
                                                                           "launch_fit.py update`, commit the JSON");
  CHECK(std::string(kCurrentPtxHash) == kFiguresPtxHash);
}

TEST_CASE("launch fit: the emulation launches and refuses as the GPU would", "[launch-fit]") {
  CHECK(maxThreadsPerBlock() == kBlockThreads);
  const int expected = kEmulatedFigures.registers == 0 ? (1 << 20) : residentBlocks(kEmulatedFigures, kBlockThreads);
  CHECK(residentBlocksPerSm(kBlockThreads) == expected);
  if (kEmulatedFigures.registers == 0) return;
  CHECK(residentBlocksPerSm(kBlockThreads) >= kMinBlocksPerSm);
  // Above the block size: refused before anything runs (cudaErrorInvalidConfiguration).
  DevComm comm;
  DevWorkList list;
  CHECK(launchWorkList(&comm, list, 1, 2 * kBlockThreads, nullptr) == 9);
}
