// The `ferry._ferry` extension module: ferry's C++ API for Python (issue 8, docs/PYTHON.md).
// Communicators and collectives on numpy arrays and torch tensors, without copies; ferry's errors
// as exceptions. Everything here is a client of the public headers only.
#include <pybind11/pybind11.h>

#include "comm.hpp"
#include "errors.hpp"
#include "ferry/types.hpp"
#include "host_array.hpp"
#include "work.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_ferry, m) {
  m.doc() = "ferry's Python bindings: communicators and collectives on numpy arrays and torch tensors";
  m.attr("__version__") = "0.1.0";

  py::enum_<ferry::RedOp>(m, "RedOp", "Reduction operations; the collectives also take their names as strings.")
      .value("SUM", ferry::RedOp::kSum)
      .value("PROD", ferry::RedOp::kProd)
      .value("MAX", ferry::RedOp::kMax)
      .value("MIN", ferry::RedOp::kMin)
      .value("AVG", ferry::RedOp::kAvg, "sum divided by the number of ranks (integers truncate toward zero)")
      .value("BAND", ferry::RedOp::kBand, "bitwise and (integer types only)")
      .value("BOR", ferry::RedOp::kBor, "bitwise or (integer types only)")
      .value("BXOR", ferry::RedOp::kBxor, "bitwise exclusive or (integer types only)");

  ferry::bindings::registerErrors(m);
  ferry::bindings::registerWork(m);
  ferry::bindings::registerComm(m);
  ferry::bindings::registerHostArrays(m);
}
