// HostBuffer: the memory of a numpy array or a torch tensor, borrowed without copying.
//
// Two ways in, tried in this order:
// - the buffer protocol (numpy arrays, memoryview, bytearray, array.array): the exporter keeps the
//   memory valid until the Py_buffer is released, and says whether it is writable;
// - DLPack (torch tensors, anything with __dlpack__ and __dlpack_device__): the capsule's tensor is
//   taken over (renamed "used_dltensor") and its deleter called when the HostBuffer goes.
// Either way the element type must be one ferry reduces and the memory C-contiguous and on the
// host. A HostBuffer must be destroyed with the GIL held (it releases Python objects).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <string>

#include "dlpack.hpp"
#include "ferry/types.hpp"

namespace ferry::bindings {

/// Names one argument of one call for error messages: "all_gather on rank 2: argument 'recv' ...".
struct ArgRef {
  const char* fn;    ///< the Python method ("all_reduce")
  std::string name;  ///< the argument ("recv", "sends[1]")
  int rank;          ///< this rank in the communicator
  /// "all_gather on rank 2: argument 'recv' " followed by `detail`.
  std::string message(const std::string& detail) const;
};

/// Throw ferry.InvalidArgumentError with `arg.message(detail)`.
[[noreturn]] void raiseArg(const ArgRef& arg, const std::string& detail);

/// A contiguous host buffer borrowed from a Python object.
class HostBuffer {
 public:
  /// Borrow `obj` for `arg`; `writable` demands that the collective may write it. Throws
  /// ferry.InvalidArgumentError (layout, dtype, device, read-only) or TypeError (not an array).
  static HostBuffer borrow(pybind11::handle obj, const ArgRef& arg, bool writable);

  /// Move-only: the export is released once, by the last owner.
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;
  ~HostBuffer() = default;

  /// The first element (may be null when count() is 0).
  void* data() const { return data_; }
  /// Elements, all dimensions together.
  size_t count() const { return count_; }
  /// The element type, one ferry reduces.
  DataType type() const { return type_; }
  /// count() in bytes.
  size_t bytes() const { return count_ * dataTypeSize(type_); }
  /// The element `i` elements in, as a byte pointer.
  char* at(size_t i) const { return static_cast<char*>(data_) + i * dataTypeSize(type_); }
  /// The Python object the memory belongs to.
  const pybind11::object& object() const { return object_; }

 private:
  HostBuffer() = default;
  static HostBuffer fromBufferProtocol(pybind11::handle obj, const ArgRef& arg, bool writable);
  static HostBuffer fromDlpack(pybind11::handle obj, const ArgRef& arg);

  struct ReleaseView {
    void operator()(Py_buffer* view) const;
  };
  struct DeleteManaged {
    void operator()(dlpack::ManagedTensor* tensor) const;
  };

  pybind11::object object_;
  std::unique_ptr<Py_buffer, ReleaseView> view_;                   // the buffer-protocol export
  std::unique_ptr<dlpack::ManagedTensor, DeleteManaged> managed_;  // the DLPack tensor we own
  void* data_ = nullptr;
  size_t count_ = 0;
  DataType type_ = DataType::kUint8;
};

/// The names ferry accepts, for messages: "int8, uint8, ..., bfloat16".
const char* supportedTypeNames();

}  // namespace ferry::bindings
