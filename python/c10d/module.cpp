// The `ferry._c10d` extension module: ProcessGroupFerry for torch.distributed (registered by
// python/ferry/torch_backend.py).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "python/c10d/backend.hpp"
#include "python/c10d/shared_allocator.hpp"

namespace py = pybind11;
using ferry::torch_c10d::BackendBase;
using ferry::torch_c10d::ProcessGroupFerry;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "ferry's torch.distributed backend (import ferry.torch_backend to register it)";
  // The base class is torch's: its Python type must exist before ours derives from it.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupFerry, BackendBase, c10::intrusive_ptr<ProcessGroupFerry>>(m, "ProcessGroupFerry")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupFerry>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Join the group: rank 0 publishes ferry's rendezvous id in `store`, every rank connects.")
      .def_property_readonly(
          "comm_id", [](ProcessGroupFerry& pg) { return pg.comm().id(); },
          "The ferry communicator's 64-bit id (as in ferry's logs).")
      .def_property(
          "reproducible", [](ProcessGroupFerry& pg) { return pg.comm().reproducible(); },
          [](ProcessGroupFerry& pg, bool on) { pg.comm().setReproducible(on); },
          "The reproducible mode of sums and averages (FERRY_REPRODUCIBLE sets the default): set it on every "
          "rank before the collectives it should apply to, with no work in flight.");
  m.attr("torch_version") = FERRY_TORCH_VERSION;
  ferry::torch_c10d::registerSharedAllocator(m);
}
