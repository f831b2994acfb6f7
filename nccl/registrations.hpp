// Buffers registered with ncclCommRegister. Host memory needs no registration, so a handle only
// records the buffer; keeping the set lets ncclCommDeregister reject handles it never gave out and
// lets the communicator free what the application forgot to deregister.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace ferry::nccl {

/// The registrations of one communicator. Thread-safe.
class Registrations {
 public:
  /// Record `buffer` of `bytes`; returns the handle.
  void* add(void* buffer, size_t bytes);
  /// Forget `handle`; false when this communicator never returned it (or it was removed).
  bool remove(void* handle);

 private:
  struct Entry {
    void* buffer;
    size_t bytes;
  };
  std::mutex mu_;
  std::unordered_map<void*, std::unique_ptr<Entry>> entries_;  // keyed by handle
};

}  // namespace ferry::nccl
