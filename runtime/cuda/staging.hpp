// Pinned host buffers for the staged path, one pair per stream.
//
// A staged call copies its device input into the stream's input buffer, runs the host collective
// from there into the output buffer, and copies the output back, all in stream order; calls on one
// stream therefore reuse one pair safely. A call that needs more than the pair holds grows it, which
// first waits for the stream (the old pair may still be read) and keeps the old pair alive until the
// communicator is destroyed (a captured graph may still refer to it). Growth is impossible while the
// stream is being captured: that call fails, naming the size to run once outside capture or to set
// FERRY_GPU_STAGING_BYTES to.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/cuda_api.hpp"

namespace ferry::gpu {

class StagingPool {
 public:
  /// `initialBytes`: each new pair starts this large (FERRY_GPU_STAGING_BYTES).
  StagingPool(Where where, size_t initialBytes) : where_(where), initialBytes_(initialBytes) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Pair {
    uint8_t* in = nullptr;
    uint8_t* out = nullptr;
    size_t bytes = 0;  ///< of each buffer
  };
  /// The pair of `stream`, at least `bytes` long each.
  Result<Pair> get(Stream stream, size_t bytes);

  /// Keep `record` until destruction (host-function arguments a captured graph refers to).
  void keep(std::shared_ptr<void> record);

 private:
  Where where_;
  size_t initialBytes_;
  std::mutex mu_;
  std::map<Stream, Pair> pairs_;
  std::vector<void*> pinned_;  ///< every buffer ever allocated, freed at destruction
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace ferry::gpu
