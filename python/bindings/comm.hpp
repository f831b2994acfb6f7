// ferry.Comm: one rank's communicator, as a Python object that can be closed.
//
// The C++ Comm is held by shared_ptr: every call takes its own reference before it releases the
// GIL, so close() from another thread never destroys a communicator under a running call (the
// last reference does, when that call returns).
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <vector>

#include "buffer.hpp"
#include "ferry/comm.hpp"

namespace ferry::bindings {

class PyComm {
 public:
  explicit PyComm(std::unique_ptr<Comm> comm);

  /// The communicator for a call of `fn`; raises ferry.InvalidUsageError once closed.
  std::shared_ptr<Comm> get(const char* fn) const;
  /// Drop this object's reference; the communicator is destroyed now unless a call is running.
  void close();
  bool closed() const { return comm_ == nullptr; }

 private:
  std::shared_ptr<Comm> comm_;
};

/// Run `op` on `comm`: now, with the GIL released, returning `result`; or with `asyncOp`, queued on
/// the progress thread, returning a ferry.Work that keeps `buffers` until it has finished.
pybind11::object runOp(const std::shared_ptr<Comm>& comm, bool asyncOp, std::vector<HostBuffer> buffers,
                       pybind11::object result, std::function<Status(Comm&)> op);

/// Define ferry.UniqueId and ferry.Comm with its lifecycle methods (create, split, close, ...).
void registerComm(pybind11::module_& m);
/// Add the collectives to ferry.Comm (collectives.cpp).
void registerCollectives(pybind11::class_<PyComm>& cls);

}  // namespace ferry::bindings
