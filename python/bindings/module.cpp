// The `ferry._ferry` extension module (issue 8). Placeholder until the bindings land: the package
// imports, and says what it lacks.
#include <pybind11/pybind11.h>

PYBIND11_MODULE(_ferry, m) {
  m.doc() = "ferry's Python bindings (not built yet)";
  m.attr("__version__") = "0.1.0";
}
