// Buffers registered with ncclCommRegister and ncclCommWindowRegister. Host memory is registered
// with ferry::hostRegister (its pages become shared in place, so calls on it read peers' buffers
// in place, as on hostAlloc memory); device memory is only recorded (the stream-ordered path maps
// peers' buffers itself). Keeping the set lets the deregister calls reject handles they never
// gave out (or that the other call gave out) and lets the communicator release what the
// application forgot to deregister.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace ferry::nccl {

/// The registrations of one communicator. Thread-safe.
class Registrations {
 public:
  Registrations() = default;
  Registrations(const Registrations&) = delete;
  Registrations& operator=(const Registrations&) = delete;
  /// Releases the host registrations still held.
  ~Registrations();
  /// Record `buffer` of `bytes` (a window when `window`), with `hostHandle` from
  /// ferry::hostRegister (null when the buffer is not registered host memory); returns the handle.
  void* add(void* buffer, size_t bytes, bool window = false, void* hostHandle = nullptr);
  /// Forget `handle`; false when this communicator never returned it for the same kind of
  /// registration (or it was removed).
  bool remove(void* handle, bool window = false);

 private:
  struct Entry {
    void* buffer;
    size_t bytes;
    bool window;
    void* hostHandle;  ///< ferry::hostRegister's, released with the entry
  };
  std::mutex mu_;
  std::unordered_map<void*, std::unique_ptr<Entry>> entries_;  // keyed by handle
};

}  // namespace ferry::nccl
