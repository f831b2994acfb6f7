// The CUDA subset ferry's kernels are written in, and a host emulation of it.
//
// Why this file exists: CI has no GPU, yet the kernels must run there. Every .cu file of ferry is
// plain CUDA restricted to the subset below. Under nvcc this header only adds a few helpers; under a
// host C++ compiler it defines the subset itself, so the same source compiles as C++ and each
// "thread" of a launch runs on a real host thread (small sizes: a few blocks of a few threads).
//
// The subset (docs/CUDA.md has the full list and the reasons):
//   - one-dimensional launches: threadIdx.x, blockIdx.x, blockDim.x, gridDim.x (y and z are 0 / 1);
//   - __global__, __device__, __host__, __forceinline__, __restrict__, __launch_bounds__,
//     __grid_constant__;
//   - the global timer (ferry::simt::globalTimerNs(), %globaltimer) and __trap()
//     (ferry::simt::trapLaunch(): every thread of the launch stops; launch() returns 719);
//   - __syncthreads() (all threads of the block, no divergence around it);
//   - __threadfence_block(), __threadfence(), __threadfence_system();
//   - atomicAdd, atomicExch, atomicCAS, atomicMax on int, unsigned, unsigned long long;
//   - volatile loads and stores of aligned 1-, 2-, 4-, 8- and 16-byte words (8-byte ones are single
//     copy atomic on both sides; 16-byte ones only per 8-byte half);
//   - uint2 and uint4 (aligned vector types), __float_as_uint / __uint_as_float;
//   - printf.
// Not in the subset: __shared__ variables, warp intrinsics (__shfl*, __ballot, __syncwarp) and any
// assumption that threads of a warp run in lock step, cooperative groups, textures, CUDA's half,
// bfloat16 and fp8 types and intrinsics (kernels/cuda/dtypes.cuh converts with integer operations),
// dynamic parallelism. Busy waits call ferry::simt::pollPause() between polls, which yields the host
// thread in emulation (two cores run hundreds of emulated threads) and costs nothing on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)

#define FERRY_SIMT_EMULATED 0

namespace ferry::simt {
/// Between two polls of a flag. Nothing on a GPU: a poll is a cached L2 read.
__device__ __forceinline__ void pollPause() {}
/// Nanoseconds of the GPU's global timer (the same clock in every block of the device).
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/// Ends the whole grid (the launch fails with cudaErrorLaunchFailure and the context is lost).
__device__ __forceinline__ void trapLaunch() { __trap(); }
}  // namespace ferry::simt

#else  // host emulation

#define FERRY_SIMT_EMULATED 1

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// The launch coordinates of the calling emulated thread.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

namespace ferry::simt {

/// Thrown through a trapped launch's emulated threads; launch() catches it.
struct Trapped {};

/// What the threads of one launch share: whether a thread trapped, and the block barriers.
struct LaunchState {
  std::atomic<bool> trapped{false};
};

/// A block barrier that a trap breaks: every waiting thread then leaves by throwing Trapped, as
/// every thread of a GPU grid stops at __trap(). Arrivals are one atomic add; waiters sleep on the
/// generation word (futex), so hundreds of emulated threads per block wake without a lock. The
/// sequentially consistent operations make it a full memory barrier for the threads of the block,
/// as __syncthreads is.
class BlockBarrier {
 public:
  BlockBarrier(unsigned n, LaunchState* launch) : n_(n), launch_(launch) {}
  void arriveAndWait() {
    const uint64_t gen = generation_.load();
    if ((gen & kBroken) != 0) throw Trapped{};
    if (arrived_.fetch_add(1) + 1 == n_) {
      arrived_.store(0);
      generation_.fetch_add(1);
      generation_.notify_all();
      return;
    }
    for (;;) {
      generation_.wait(gen);
      const uint64_t now = generation_.load();
      if ((now & kBroken) != 0) throw Trapped{};
      if (now != gen) return;
    }
  }
  /// Wakes the waiting threads, which leave by throwing (launch->trapped is set).
  void breakAll() {
    generation_.fetch_or(kBroken);
    generation_.notify_all();
  }

 private:
  static constexpr uint64_t kBroken = 1ull << 63;
  const unsigned n_;
  std::atomic<unsigned> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  LaunchState* launch_;
};

/// The calling thread's block barrier, every block barrier of its launch, and the launch's state
/// (set by launch()).
inline thread_local BlockBarrier* tlsBlockBarrier = nullptr;
inline thread_local std::vector<std::unique_ptr<BlockBarrier> >* tlsLaunchBarriers = nullptr;
inline thread_local LaunchState* tlsLaunch = nullptr;

/// Yields the host thread; a thread of a trapped launch leaves it here.
inline void pollPause() {
  if (tlsLaunch != nullptr && tlsLaunch->trapped.load(std::memory_order_relaxed)) throw Trapped{};
  sched_yield();
}
/// The emulation's %globaltimer: the host's steady clock.
inline uint64_t globalTimerNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
/// __trap(): the whole launch stops; launch() then returns 719 (cudaErrorLaunchFailure).
[[noreturn]] inline void trapLaunch() {
  tlsLaunch->trapped.store(true);
  for (auto& b : *tlsLaunchBarriers) b->breakAll();
  throw Trapped{};
}
}  // namespace ferry::simt

inline void __syncthreads() { ferry::simt::tlsBlockBarrier->arriveAndWait(); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { sched_yield(); }

template <typename T>
inline T atomicAdd(T* address, T value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
inline T atomicExch(T* address, T value) {
  return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);
}
template <typename T>
inline T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value, whether or not it was swapped
}
template <typename T>
inline T atomicMax(T* address, T value) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (old < value && !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
inline float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
inline unsigned long long __double_as_longlong(double d) { return __builtin_bit_cast(unsigned long long, d); }
inline double __longlong_as_double(unsigned long long u) { return __builtin_bit_cast(double, u); }

namespace ferry::simt {

/// The host threads that run emulated GPU threads, kept between launches: creating and joining a
/// thread per emulated thread cost more than the kernels themselves (system time, mostly).
/// runAll() gives each job a thread of its own that runs nothing else meanwhile, so every job of a
/// launch runs at once, as before, and concurrent launches from several host threads never share.
class LaunchPool {
 public:
  static LaunchPool& get() {
    static std::once_flag once;
    std::call_once(once, [] {
      // A forked child has none of its parent's threads: it starts a pool of its own (the
      // parent's stays reachable from it, untouched: its mutex may have been held at the fork).
      pthread_atfork(nullptr, nullptr, [] {
        LaunchPool* pool = new LaunchPool;
        pool->parent_ = current();
        current() = pool;
      });
      current() = new LaunchPool;
    });
    return *current();
  }

  /// Runs every job on a thread of its own, all at once; returns when all have returned.
  void runAll(std::vector<std::function<void()> >& jobs) {
    std::vector<Worker*> workers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!idle_.empty() && workers.size() < jobs.size()) {
        workers.push_back(idle_.back());
        idle_.pop_back();
      }
    }
    while (workers.size() < jobs.size()) workers.push_back(newWorker());
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::lock_guard<std::mutex> lock(workers[i]->mutex);
      workers[i]->job = std::move(jobs[i]);
      workers[i]->busy = true;
      workers[i]->cv.notify_all();
    }
    for (Worker* w : workers) {
      std::unique_lock<std::mutex> lock(w->mutex);
      w->cv.wait(lock, [w] { return !w->busy; });
    }
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.insert(idle_.end(), workers.begin(), workers.end());
  }

 private:
  struct Worker {
    std::mutex mutex;
    std::condition_variable cv;
    std::function<void()> job;
    bool busy = false;
  };

  static LaunchPool*& current() {
    static LaunchPool* p = nullptr;
    return p;
  }

  Worker* newWorker() {
    Worker* w;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      w = all_.emplace_back(std::make_unique<Worker>()).get();
    }
    // Workers live as long as the process: they wait for their next job, holding no resources.
    std::thread([w] {
      std::unique_lock<std::mutex> lock(w->mutex);
      for (;;) {
        w->cv.wait(lock, [w] { return w->busy; });
        std::function<void()> job = std::move(w->job);
        lock.unlock();
        job();
        job = nullptr;
        lock.lock();
        w->busy = false;
        w->cv.notify_all();
      }
    }).detach();
    return w;
  }

  std::mutex mutex_;
  std::vector<Worker*> idle_;
  std::vector<std::unique_ptr<Worker> > all_;
  LaunchPool* parent_ = nullptr;
};

/// cudaErrorLaunchFailure: what a launch that trapped returns.
inline constexpr int kLaunchFailure = 719;

/// Run kernel(args...) as a grid of grid.x blocks of block.x threads, each on a host thread of its
/// own, and return when all have finished (a launch followed by a stream synchronize): 0, or
/// kLaunchFailure when a thread trapped. Blocks run at once, so kernels whose blocks wait on each
/// other (or on other ranks' kernels launched from other host threads) make progress as they would
/// on a GPU that holds them all.
template <typename Kernel, typename... Args>
int launch(dim3 grid, dim3 block, Kernel kernel, Args... args) {
  const unsigned nBlocks = grid.x, nThreads = block.x;
  LaunchState state;
  std::vector<std::unique_ptr<BlockBarrier> > barriers;
  for (unsigned b = 0; b < nBlocks; ++b) barriers.push_back(std::make_unique<BlockBarrier>(nThreads, &state));
  std::vector<std::function<void()> > jobs;
  jobs.reserve(static_cast<size_t>(nBlocks) * nThreads);
  for (unsigned b = 0; b < nBlocks; ++b) {
    for (unsigned t = 0; t < nThreads; ++t) {
      jobs.emplace_back([=, &barriers, &state] {
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        blockDim = dim3(nThreads);
        gridDim = dim3(nBlocks);
        tlsBlockBarrier = barriers[b].get();
        tlsLaunchBarriers = &barriers;
        tlsLaunch = &state;
        try {
          kernel(args...);
        } catch (const Trapped&) {
        }
        tlsBlockBarrier = nullptr;
        tlsLaunchBarriers = nullptr;
        tlsLaunch = nullptr;
      });
    }
  }
  LaunchPool::get().runAll(jobs);
  return state.trapped.load() ? kLaunchFailure : 0;
}

}  // namespace ferry::simt

#endif  // __CUDACC__

namespace ferry::simt {

/// Single-copy-atomic loads and stores of flags and LL words. Volatile on both sides: on a GPU a
/// volatile access goes to the coherence point (L2 / peer memory) every time; under emulation it is
/// one aligned x86 load or store. Ordering against other data is the caller's job (fences).
template <typename T>
__device__ __forceinline__ T loadVolatile(const T* p) {
  return *reinterpret_cast<const volatile T*>(p);
}
template <typename T>
__device__ __forceinline__ void storeVolatile(T* p, T v) {
  *reinterpret_cast<volatile T*>(p) = v;
}

}  // namespace ferry::simt
