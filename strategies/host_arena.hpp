// HostArena: a separate, page-locked (pinned-style) block of host memory, for state a strategy
// offloads out of its working memory (FSDP's optimizer state, as ZeRO-Offload keeps it in CPU RAM).
//
// On a GPU build the working memory is the device's and the arena is what cudaHostAlloc would
// give: host pages the copy engine can reach without staging. On the host build both are host
// memory, so the arena is what makes the split visible: it is its own mapping, locked when the
// process may lock memory (mlock; RLIMIT_MEMLOCK may refuse, which is reported, not an error), and
// its bytes are reported apart from the rank's model state.
#pragma once

#include <cstddef>

namespace ferry::train {

/// One zero-filled anonymous mapping of `floats` floats, unmapped on destruction.
class HostArena {
 public:
  explicit HostArena(size_t floats);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  float* data() { return data_; }
  size_t bytes() const { return bytes_; }
  /// Whether mlock succeeded (the pages stay resident).
  bool locked() const { return locked_; }

 private:
  float* data_ = nullptr;
  size_t bytes_ = 0;
  bool locked_ = false;
};

}  // namespace ferry::train
