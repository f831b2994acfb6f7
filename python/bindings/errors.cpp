#include "errors.hpp"

#include <array>

namespace ferry::bindings {
namespace py = pybind11;
namespace {

// The exception classes, by ErrorCode value; set once by registerErrors and kept for the life of
// the process (the module holds them too, so they are never freed while in use).
std::array<PyObject*, 11> gClassOf{};
PyObject* gBase = nullptr;

PyObject* classFor(ErrorCode code) {
  auto i = static_cast<size_t>(code);
  if (i < gClassOf.size() && gClassOf[i] != nullptr) return gClassOf[i];
  return gBase;
}

// Create ferry.NAME deriving from `bases` and add it to `m`.
PyObject* defineClass(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  std::string qualified = std::string("ferry.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // steals nothing: add_object increments the reference
  return cls;                           // our own reference is never released
}

}  // namespace

void raise(Status status) { throw StatusError(std::move(status)); }

void raiseInvalid(const std::string& message) { raise(Status(ErrorCode::kInvalidArgument, message)); }

py::object exceptionFor(const Status& status) {
  py::object exc = py::reinterpret_borrow<py::object>(classFor(status.code()))(status.message());
  exc.attr("code") = py::cast(status.code());
  return exc;
}

void registerErrors(py::module_& m) {
  py::enum_<ErrorCode>(m, "ErrorCode", "What went wrong (ferry's ErrorCode); the `.code` of a ferry.Error.")
      .value("OK", ErrorCode::kOk)
      .value("UNHANDLED_CUDA_ERROR", ErrorCode::kUnhandledCudaError)
      .value("SYSTEM_ERROR", ErrorCode::kSystemError)
      .value("INTERNAL_ERROR", ErrorCode::kInternalError)
      .value("INVALID_ARGUMENT", ErrorCode::kInvalidArgument)
      .value("INVALID_USAGE", ErrorCode::kInvalidUsage)
      .value("REMOTE_ERROR", ErrorCode::kRemoteError)
      .value("IN_PROGRESS", ErrorCode::kInProgress)
      .value("TIMEOUT", ErrorCode::kTimeout)
      .value("MISMATCH", ErrorCode::kMismatch)
      .value("ABORTED", ErrorCode::kAborted)
      .def_property_readonly(
          "description", [](ErrorCode c) { return errorCodeName(c); },
          "ferry's short name of the code (\"invalid argument\").");

  py::handle builtins = py::module_::import("builtins");
  gBase = defineClass(m, "Error", py::make_tuple(builtins.attr("RuntimeError")),
                      "Base of every error ferry raises; `.code` is a ferry.ErrorCode.");
  py::handle base(gBase);
  auto sub = [&](const char* name, ErrorCode code, py::tuple bases, const char* doc) {
    gClassOf[static_cast<size_t>(code)] = defineClass(m, name, std::move(bases), doc);
  };
  sub("InvalidArgumentError", ErrorCode::kInvalidArgument, py::make_tuple(base, builtins.attr("ValueError")),
      "An argument ferry cannot accept (wrong size, dtype, layout, rank, ...); also a ValueError.");
  sub("InvalidUsageError", ErrorCode::kInvalidUsage, py::make_tuple(base),
      "A valid value used at the wrong time or in the wrong way (for example a closed communicator).");
  sub("TimeoutError", ErrorCode::kTimeout, py::make_tuple(base, builtins.attr("TimeoutError")),
      "A wait passed its deadline (FERRY_TIMEOUT); also the builtin TimeoutError.");
  sub("RemoteError", ErrorCode::kRemoteError, py::make_tuple(base),
      "A peer failed: it died, aborted or reported an error.");
  sub("MismatchError", ErrorCode::kMismatch, py::make_tuple(base),
      "Ranks called different collectives or passed different arguments.");
  sub("AbortedError", ErrorCode::kAborted, py::make_tuple(base),
      "The communicator was aborted (Comm.abort() here or on a peer) or destroyed.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = exceptionFor(e.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
}

}  // namespace ferry::bindings
