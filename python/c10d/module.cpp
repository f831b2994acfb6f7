// The `ferry._c10d` extension module (in progress).
#include <pybind11/pybind11.h>

PYBIND11_MODULE(_c10d, m) { m.doc() = "ferry's PyTorch backend (not built yet)"; }
