// HostArena: mmap, then mlock when allowed.
#include "strategies/host_arena.hpp"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>

namespace ferry::train {

HostArena::HostArena(size_t floats) : bytes_(floats * sizeof(float)) {
  if (bytes_ == 0) return;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "ferry::train::HostArena: mmap of %zu bytes failed\n", bytes_);
    std::abort();
  }
  data_ = static_cast<float*>(p);  // anonymous pages are zero-filled
  locked_ = mlock(p, bytes_) == 0;
}

HostArena::~HostArena() {
  if (!data_) return;
  if (locked_) munlock(data_, bytes_);
  munmap(data_, bytes_);
}

}  // namespace ferry::train
