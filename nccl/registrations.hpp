// Buffers registered with ncclCommRegister and ncclCommWindowRegister. Host memory needs no
// registration (collectives on ferry::hostAlloc memory read peers' buffers in place whether or not
// they are registered), so a handle only records the buffer; keeping the set lets the deregister
// calls reject handles they never gave out (or that the other call gave out) and lets the
// communicator free what the application forgot to deregister.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace ferry::nccl {

/// The registrations of one communicator. Thread-safe.
class Registrations {
 public:
  /// Record `buffer` of `bytes` (a window when `window`); returns the handle.
  void* add(void* buffer, size_t bytes, bool window = false);
  /// Forget `handle`; false when this communicator never returned it for the same kind of
  /// registration (or it was removed).
  bool remove(void* handle, bool window = false);

 private:
  struct Entry {
    void* buffer;
    size_t bytes;
    bool window;
  };
  std::mutex mu_;
  std::unordered_map<void*, std::unique_ptr<Entry>> entries_;  // keyed by handle
};

}  // namespace ferry::nccl
