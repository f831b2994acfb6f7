// Launch fit: whether a kernel with ptxas's figures (registers, stack, shared memory) can launch
// with a given block size on an architecture, and how many of its blocks one multiprocessor holds.
//
// The GPU answers this with cudaOccupancyMaxActiveBlocksPerMultiprocessor at run time; CI has no
// GPU, so the build runs ptxas over the kernels' PTX for every architecture of -Dcuda-arch=all
// (launch_fit.py writes the figures into kernel_figures.hpp) and these rules, the occupancy
// calculator's for compute capability 8.x to 10.x, turn them into the same answers:
//   - registers are allocated per warp in units of 256; a block fails to launch when its warps'
//     registers (rounded up to the 4 sub-partitions) exceed the 65,536 a block may have, or when
//     a thread needs more than 255;
//   - blocks per multiprocessor = the smallest of: the warps the register file holds (each of the
//     4 sub-partitions holds 16,384 registers) / warps per block, the threads per multiprocessor /
//     threads per block, the block limit, and shared memory (static + 1 KiB reserved per block,
//     128-byte units) / the multiprocessor's shared memory.
// The emulation refuses the launches these rules refuse (kernels.cu), and test_launch_fit checks
// every kernel of every architecture against the block size the runtime launches.
#pragma once

#include <cstdint>
#include <cstring>

namespace ferry::gpu {

/// ptxas's figures for one kernel entry on one architecture (ptxas -v).
struct KernelFigures {
  const char* arch;    ///< "sm_90"
  const char* kernel;  ///< demangled name without arguments, e.g. "ferry::gpu::collectiveKernel"
  int registers;       ///< per thread
  int stackBytes;      ///< per thread (local memory frame, cumulative over calls)
  int spillStoreBytes;
  int spillLoadBytes;
  int sharedBytes;  ///< static shared memory per block
  int maxThreads;   ///< __launch_bounds__ (.maxntid), 0 when the kernel has none
};

/// The per-architecture limits the rules use.
struct ArchLimits {
  int sm;  ///< 80, 90, 100
  int regsPerSm = 65536;
  int regsPerBlock = 65536;
  int maxRegsPerThread = 255;
  int maxThreadsPerBlock = 1024;
  int maxThreadsPerSm = 2048;
  int maxBlocksPerSm = 32;
  int sharedPerSm = 0;  ///< bytes usable by blocks (carveout at its maximum)
  int reservedSharedPerBlock = 1024;
};

/// Limits of the architectures ferry builds for (-Dcuda-arch=all); sm 0 for any other.
constexpr ArchLimits archLimits(int sm) {
  ArchLimits l{};
  l.sm = sm;
  switch (sm) {
    case 80: l.sharedPerSm = 167936; break;  // A100: 164 KiB
    case 90:
    case 100: l.sharedPerSm = 233472; break;  // H100/H200, B200: 228 KiB
    default: l.sm = 0; break;
  }
  return l;
}

/// 80 for "sm_80", "sm_90a" -> 90; 0 when unparsable.
inline int archNumber(const char* arch) {
  if (arch == nullptr || std::strncmp(arch, "sm_", 3) != 0) return 0;
  int v = 0;
  for (const char* p = arch + 3; *p >= '0' && *p <= '9'; ++p) v = v * 10 + (*p - '0');
  return v;
}

namespace fit_detail {
constexpr int roundUp(int x, int unit) { return (x + unit - 1) / unit * unit; }
constexpr int kWarp = 32, kRegUnit = 256, kSubPartitions = 4, kSharedUnit = 128;
}  // namespace fit_detail

/// Why a block of nThreads threads of kernel `f` cannot launch on `l`, or nullptr when it can.
constexpr const char* launchRefusal(const KernelFigures& f, const ArchLimits& l, int nThreads) {
  using namespace fit_detail;
  if (nThreads < 1 || nThreads > l.maxThreadsPerBlock) return "block size out of range";
  if (f.maxThreads > 0 && nThreads > f.maxThreads) return "block larger than the kernel's __launch_bounds__";
  if (f.registers > l.maxRegsPerThread) return "more registers per thread than the architecture allows";
  const int warps = (nThreads + kWarp - 1) / kWarp;
  const int warpRegs = roundUp(f.registers * kWarp, kRegUnit);
  if (warpRegs * roundUp(warps, kSubPartitions) > l.regsPerBlock) return "registers x threads exceed the register file";
  if (f.sharedBytes + l.reservedSharedPerBlock > l.sharedPerSm) return "shared memory exceeds the multiprocessor's";
  return nullptr;
}

/// Blocks of nThreads threads of `f` one multiprocessor of `l` holds at once (0: cannot launch).
constexpr int residentBlocks(const KernelFigures& f, const ArchLimits& l, int nThreads) {
  using namespace fit_detail;
  if (l.sm == 0 || launchRefusal(f, l, nThreads) != nullptr) return 0;
  const int warps = (nThreads + kWarp - 1) / kWarp;
  int blocks = l.maxBlocksPerSm;
  const int byThreads = l.maxThreadsPerSm / (warps * kWarp);
  blocks = byThreads < blocks ? byThreads : blocks;
  const int warpRegs = roundUp(f.registers * kWarp, kRegUnit);
  if (warpRegs > 0) {
    const int byRegs = (l.regsPerSm / kSubPartitions / warpRegs) * kSubPartitions / warps;
    blocks = byRegs < blocks ? byRegs : blocks;
  }
  const int shared = roundUp(f.sharedBytes + l.reservedSharedPerBlock, kSharedUnit);
  const int byShared = l.sharedPerSm / shared;
  return byShared < blocks ? byShared : blocks;
}

/// Whether the launch fits on the figures' own architecture (unknown architecture: yes, nothing to check).
inline bool launchFits(const KernelFigures& f, int nThreads) {
  return f.registers == 0 || archLimits(archNumber(f.arch)).sm == 0 ||
         launchRefusal(f, archLimits(archNumber(f.arch)), nThreads) == nullptr;
}
/// residentBlocks on the figures' own architecture; 1 << 20 when the build has no figures.
inline int residentBlocks(const KernelFigures& f, int nThreads) {
  if (f.registers == 0) return 1 << 20;
  return residentBlocks(f, archLimits(archNumber(f.arch)), nThreads);
}

/// Per-thread stack frame the kernels may use: a frame is local memory, touched on every access
/// of what sits there (pointer arrays of the reduce steps, the p2p streams of a round).
inline constexpr int kStackBudgetBytes = 1024;

}  // namespace ferry::gpu
