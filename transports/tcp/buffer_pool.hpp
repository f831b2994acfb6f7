// Memory for messages that arrive before their receive is posted, kept for reuse: the TCP
// transport would otherwise map fresh pages for every such message and take a page fault on each
// of them while it reads the socket (more time than the copy out of it costs).
//
// Bound: the pool holds at most `keepBytes` of freed buffers, the least recently returned dropped
// first, so a run of assorted sizes cannot fill it with buffers that no later message fits.
// Buffers of kGrain bytes and more are mapped with mmap and unmapped when dropped: what the pool
// lets go returns to the system at once (freed to malloc, large blocks raise its mmap threshold
// and then stay in its heap). Smaller messages take malloc's memory, exactly sized and not pooled:
// malloc's bins recycle them without new page faults.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>

namespace ferry::transport::tcp {

/// Freed message buffers kept for reuse, at most `keepBytes` of them.
class BufferPool {
 public:
  /// Buffers below this many bytes come from malloc and are not pooled; larger ones are mapped
  /// in multiples of it.
  static constexpr size_t kGrain = 64 * 1024;

  /// `keepBytes`: how much freed memory the pool holds on to at most.
  explicit BufferPool(size_t keepBytes) : keepBytes_(keepBytes) {}
  ~BufferPool() {
    for (const Kept& k : free_) unmap(k.p, k.capacity);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  /// At least `bytes` (> 0; null when the system has no memory left); `*capacity` says how much.
  uint8_t* take(size_t bytes, size_t* capacity) {
    if (bytes < kGrain) {
      *capacity = bytes;
      return static_cast<uint8_t*>(std::malloc(bytes));
    }
    // The smallest kept buffer that fits and wastes at most about half of itself.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->capacity >= bytes && it->capacity <= 2 * bytes + kGrain &&
          (best == free_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != free_.end()) {
      *capacity = best->capacity;
      uint8_t* p = best->p;
      kept_ -= best->capacity;
      free_.erase(best);
      return p;
    }
    *capacity = (bytes + kGrain - 1) / kGrain * kGrain;
    void* p = ::mmap(nullptr, *capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }

  /// Return what take() gave.
  void give(uint8_t* p, size_t capacity) {
    if (p == nullptr) return;
    if (capacity < kGrain) {
      std::free(p);
      return;
    }
    if (capacity > keepBytes_) {
      unmap(p, capacity);
      return;
    }
    free_.push_back({p, capacity});
    kept_ += capacity;
    while (kept_ > keepBytes_) {  // the oldest go: the sizes in use now are the ones returned last
      kept_ -= free_.front().capacity;
      unmap(free_.front().p, free_.front().capacity);
      free_.pop_front();
    }
  }

  /// Bytes of freed buffers held now (at most keepBytes).
  size_t keptBytes() const { return kept_; }

 private:
  struct Kept {
    uint8_t* p;
    size_t capacity;
  };
  static void unmap(uint8_t* p, size_t capacity) { ::munmap(p, capacity); }

  const size_t keepBytes_;
  size_t kept_ = 0;
  std::deque<Kept> free_;  // oldest first
};

/// A buffer from a pool, given back when it goes.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  ~PooledBuffer() { reset(); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

  /// Take `bytes` (> 0) from `pool`; false when there is no memory.
  bool take(BufferPool* pool, size_t bytes) {
    reset();
    pool_ = pool;
    data_ = pool->take(bytes, &capacity_);
    return data_ != nullptr;
  }
  void reset() {
    if (pool_ != nullptr) pool_->give(data_, capacity_);
    pool_ = nullptr;
    data_ = nullptr;
    capacity_ = 0;
  }
  uint8_t* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  BufferPool* pool_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ferry::transport::tcp
