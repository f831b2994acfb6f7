// ferry.Work: an operation queued on the communicator's progress thread (async_op=True). It owns
// the borrowed buffers until the operation has finished, so the arrays cannot be freed under it.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "buffer.hpp"
#include "ferry/work.hpp"

namespace ferry::bindings {

class PyWork {
 public:
  /// `result` is what wait() returns: the object the blocking call would have returned.
  PyWork(std::shared_ptr<Work> work, std::vector<HostBuffer> buffers, pybind11::object result);
  /// Waits (without the GIL) for an operation still running: its buffers must outlive it.
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  /// Block until done; raise the operation's error, else return the result.
  pybind11::object wait();
  /// True once the operation has finished, successfully or not.
  bool isCompleted() const;

 private:
  std::shared_ptr<Work> work_;
  std::vector<HostBuffer> buffers_;
  pybind11::object result_;
};

/// Define ferry.Work in `m`.
void registerWork(pybind11::module_& m);

}  // namespace ferry::bindings
