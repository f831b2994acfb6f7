#include "work.hpp"

#include "errors.hpp"

namespace ferry::bindings {
namespace py = pybind11;

PyWork::PyWork(std::shared_ptr<Work> work, std::vector<HostBuffer> buffers, py::object result)
    : work_(std::move(work)), buffers_(std::move(buffers)), result_(std::move(result)) {}

PyWork::~PyWork() {
  if (work_ && !work_->done()) {
    // Every queued operation carries a deadline (FERRY_TIMEOUT), so this returns.
    py::gil_scoped_release unlocked;
    (void)work_->wait();
  }
}

py::object PyWork::wait() {
  Status st;
  {
    py::gil_scoped_release unlocked;
    st = work_->wait();
  }
  buffers_.clear();  // finished: give the arrays back to their owners now
  check(st);
  return result_;
}

bool PyWork::isCompleted() const { return work_->done(); }

void registerWork(py::module_& m) {
  py::class_<PyWork>(m, "Work",
                     "An operation started with async_op=True. It runs on the communicator's progress thread, "
                     "after the operations queued before it, and keeps its arrays alive until it has finished.")
      .def("wait", &PyWork::wait,
           "Block until the operation has finished. Raises its ferry.Error; otherwise returns what the blocking "
           "call returns (the output array).")
      .def("is_completed", &PyWork::isCompleted, "True once the operation has finished, successfully or not.")
      .def("__repr__", [](const PyWork& w) {
        return std::string("<ferry.Work ") + (w.isCompleted() ? "completed" : "pending") + ">";
      });
}

}  // namespace ferry::bindings
