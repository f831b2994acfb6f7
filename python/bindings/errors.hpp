// ferry's Status as Python exceptions. Every ferry error reaches Python as an instance of
// ferry.Error (a RuntimeError) or of the subclass that matches its code, carrying ferry's message
// and `.code`, a ferry.ErrorCode:
//   InvalidArgumentError  invalid argument  (also a ValueError)
//   InvalidUsageError     invalid usage     (a closed communicator, a call at the wrong time)
//   TimeoutError          timeout           (also the builtin TimeoutError)
//   RemoteError           remote error      (a peer died, aborted or failed)
//   MismatchError         collective mismatch
//   AbortedError          aborted
// Other codes (system, internal, CUDA errors) raise ferry.Error itself.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "ferry/status.hpp"

namespace ferry::bindings {

/// A non-ok Status on its way out of a binding; the registered translator raises it in Python.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

/// Throw `status` (which must be an error) as a StatusError.
[[noreturn]] void raise(Status status);

/// Throw unless `status` is ok.
inline void check(const Status& status) {
  if (!status.isOk()) raise(status);
}

/// The value of `result`, or throw its error.
template <typename T>
T unwrap(Result<T>&& result) {
  if (!result.isOk()) raise(result.status());
  return std::move(result).value();
}

/// Throw an invalid-argument error with `message`.
[[noreturn]] void raiseInvalid(const std::string& message);

/// The Python exception instance for an error `status`, not raised (Comm.error() returns it).
pybind11::object exceptionFor(const Status& status);

/// Define ferry.ErrorCode and the exception classes in `m`, and translate StatusError.
void registerErrors(pybind11::module_& m);

}  // namespace ferry::bindings
