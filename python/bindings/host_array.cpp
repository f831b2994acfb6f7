#include "host_array.hpp"

#include <pybind11/numpy.h>

#include <string>
#include <vector>

#include "errors.hpp"
#include "ferry/memory.hpp"

namespace ferry::bindings {
namespace py = pybind11;
namespace {

// The capsule's destructor: runs when the last array (or view) over the memory is collected.
void freeHostMemory(void* ptr) { (void)hostFree(ptr); }

// A C-contiguous array of `shape` and `dtype` over fresh hostAlloc memory (zero-filled). The
// array's base is a capsule that owns the allocation: numpy keeps the base alive as long as any
// view of the array exists, so the memory is freed exactly when the last of them goes.
py::array hostArray(const py::object& shape, const py::object& dtype) {
  py::dtype type = py::dtype::from_args(dtype);
  std::vector<py::ssize_t> dims;
  if (py::isinstance<py::int_>(shape)) {
    dims.push_back(shape.cast<py::ssize_t>());
  } else {
    for (py::handle d : shape) dims.push_back(d.cast<py::ssize_t>());
  }
  size_t bytes = static_cast<size_t>(type.itemsize());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      raiseInvalid("ferry.empty: argument 'shape' has " + std::to_string(dims[i]) + " in dimension " +
                   std::to_string(i) + "; expected sizes >= 0");
    }
    bytes *= static_cast<size_t>(dims[i]);
  }
  void* ptr = unwrap(hostAlloc(bytes));
  py::capsule owner(ptr, &freeHostMemory);
  return py::array(type, dims, {}, ptr, owner);
}

}  // namespace

void registerHostArrays(py::module_& m) {
  m.def("empty", &hostArray, py::arg("shape"), py::arg("dtype") = py::str("float32"),
        "A C-contiguous numpy array of `shape` and `dtype` in shared memory from ferry::hostAlloc: the\n"
        "other ranks of this host read it in place in collectives. Freed when the array and every view\n"
        "of it are collected. Its elements start at zero (as hostAlloc's pages do), but use ferry.zeros\n"
        "where that matters. Raises ferry.Error when the system refuses the memory.");
  m.def("zeros", &hostArray, py::arg("shape"), py::arg("dtype") = py::str("float32"),
        "ferry.empty, whose elements are zero.");
}

}  // namespace ferry::bindings
