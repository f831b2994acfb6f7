// Memory for messages that arrive before their receive is posted, kept for reuse: the TCP
// transport would otherwise map fresh pages for every such message and take a page fault on each
// of them while it reads the socket (more time than the copy out of it costs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>

namespace ferry::transport::tcp {

class BufferPool {
 public:
  /// `keepBytes`: how much freed memory the pool holds on to at most.
  explicit BufferPool(size_t keepBytes) : keepBytes_(keepBytes) {}
  ~BufferPool() {
    for (auto& [cap, p] : free_) std::free(p);
  }
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  /// At least `bytes` (null when the system has no memory left); `*capacity` says how much.
  uint8_t* take(size_t bytes, size_t* capacity) {
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes + kGrain) {
      *capacity = it->first;
      uint8_t* p = it->second;
      kept_ -= it->first;
      free_.erase(it);
      return p;
    }
    *capacity = (bytes + kGrain - 1) / kGrain * kGrain;
    return static_cast<uint8_t*>(std::malloc(*capacity));
  }

  /// Return what take() gave.
  void give(uint8_t* p, size_t capacity) {
    if (p == nullptr) return;
    if (kept_ + capacity > keepBytes_) {
      // Make room by dropping the smallest buffers; one larger than the whole budget is freed.
      while (!free_.empty() && kept_ + capacity > keepBytes_) {
        kept_ -= free_.begin()->first;
        std::free(free_.begin()->second);
        free_.erase(free_.begin());
      }
      if (capacity > keepBytes_) {
        std::free(p);
        return;
      }
    }
    free_.emplace(capacity, p);
    kept_ += capacity;
  }

 private:
  static constexpr size_t kGrain = 64 * 1024;
  const size_t keepBytes_;
  size_t kept_ = 0;
  std::multimap<size_t, uint8_t*> free_;  // by capacity
};

/// A buffer from a pool, given back when it goes.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  ~PooledBuffer() { reset(); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

  /// Take `bytes` from `pool`; false when there is no memory.
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
