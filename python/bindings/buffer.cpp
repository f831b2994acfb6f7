#include "buffer.hpp"

#include <optional>
#include <string>

#include "errors.hpp"

namespace ferry::bindings {
namespace py = pybind11;
namespace {

// "numpy.ndarray", "torch.Tensor": how messages name the kind of object passed.
std::string typeName(py::handle obj) {
  py::handle type = py::type::handle_of(obj);
  std::string module = py::str(type.attr("__module__"));
  std::string name = py::str(type.attr("__qualname__"));
  return module == "builtins" ? name : module + "." + name;
}

// The supported types by name; everything else is reported by name and refused.
std::optional<DataType> typeFromName(const std::string& name) {
  static const struct {
    const char* name;
    DataType type;
  } kTypes[] = {{"int8", DataType::kInt8},        {"uint8", DataType::kUint8},     {"int32", DataType::kInt32},
                {"uint32", DataType::kUint32},    {"int64", DataType::kInt64},     {"uint64", DataType::kUint64},
                {"float16", DataType::kFloat16},  {"float32", DataType::kFloat32}, {"float64", DataType::kFloat64},
                {"bfloat16", DataType::kBfloat16}};
  for (const auto& t : kTypes) {
    if (name == t.name) return t.type;
  }
  return std::nullopt;
}

// The numpy-style name of a struct-module format ("<i" of 4 bytes is "int32"), or a description of
// why it has none ("big-endian int32", "format 'T{...}'").
std::string nameOfFormat(const char* format, Py_ssize_t itemsize) {
  std::string f = format != nullptr ? format : "B";
  std::string bits = std::to_string(8 * itemsize);
  bool bigEndian = false;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!')) {
    bigEndian = f[0] == '>' || f[0] == '!';
    f.erase(0, 1);
  }
  std::string name;
  if (f.size() == 2 && f[0] == 'Z') return "complex" + bits;  // "Zf", "Zd": complex pairs
  if (f.size() != 1) return "format '" + std::string(format) + "'";
  switch (f[0]) {
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n': name = "int" + bits; break;
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N': name = "uint" + bits; break;
    case 'e':
    case 'f':
    case 'd':
    case 'g': name = "float" + bits; break;
    case '?': name = "bool"; break;
    default: return "format '" + std::string(format) + "'";
  }
  // One-byte types have no byte order.
  if (bigEndian && itemsize > 1) return "big-endian " + name;
  return name;
}

// The name of a DLPack element type ("bfloat16", "int16", "float32x4").
std::string nameOfDlType(const dlpack::DataType& t) {
  std::string bits = std::to_string(t.bits);
  std::string name;
  switch (t.code) {
    case dlpack::kDLInt: name = "int" + bits; break;
    case dlpack::kDLUInt: name = "uint" + bits; break;
    case dlpack::kDLFloat: name = "float" + bits; break;
    case dlpack::kDLBfloat: name = "bfloat" + bits; break;
    case dlpack::kDLComplex: name = "complex" + bits; break;
    case dlpack::kDLBool: name = "bool"; break;
    default: name = "DLPack type code " + std::to_string(t.code) + " of " + bits + " bits"; break;
  }
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

// "cuda:1" and friends, for the message refusing device memory.
std::string nameOfDevice(int type, int id) {
  std::string n = std::to_string(id);
  switch (type) {
    case dlpack::kDLCUDA: return "cuda:" + n;
    case dlpack::kDLROCM: return "rocm:" + n;
    case dlpack::kDLCUDAManaged: return "CUDA managed memory (device " + n + ")";
    case dlpack::kDLOpenCL: return "opencl:" + n;
    case dlpack::kDLVulkan: return "vulkan:" + n;
    case dlpack::kDLMetal: return "metal:" + n;
    case dlpack::kDLOneAPI: return "oneapi:" + n;
    default: return "DLPack device type " + std::to_string(type) + " (id " + n + ")";
  }
}

bool isHostDevice(int type) {
  return type == dlpack::kDLCPU || type == dlpack::kDLCUDAHost || type == dlpack::kDLROCMHost;
}

[[noreturn]] void raiseUnsupportedType(const ArgRef& arg, const std::string& name) {
  raiseArg(arg, "has dtype " + name + ", which ferry does not support (expected one of " +
                    std::string(supportedTypeNames()) + ")");
}

[[noreturn]] void raiseNotHost(const ArgRef& arg, int type, int id) {
  raiseArg(arg, "is on " + nameOfDevice(type, id) +
                    "; ferry's Python bindings work on host memory only (expected a CPU array or tensor: copy it "
                    "with .cpu(), or reduce CUDA tensors through torch.distributed with backend=\"ferry\", which "
                    "needs ferry and torch built with CUDA)");
}

}  // namespace

std::string ArgRef::message(const std::string& detail) const {
  return std::string(fn) + " on rank " + std::to_string(rank) + ": argument '" + name + "' " + detail;
}

void raiseArg(const ArgRef& arg, const std::string& detail) { raiseInvalid(arg.message(detail)); }

const char* supportedTypeNames() {
  return "int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64";
}

void HostBuffer::ReleaseView::operator()(Py_buffer* view) const {
  PyBuffer_Release(view);
  delete view;
}

void HostBuffer::DeleteManaged::operator()(dlpack::ManagedTensor* tensor) const {
  if (tensor->deleter != nullptr) tensor->deleter(tensor);
}

HostBuffer HostBuffer::borrow(py::handle obj, const ArgRef& arg, bool writable) {
  if (obj.is_none()) raiseArg(arg, "is None; expected a numpy array or a torch tensor");
  if (PyObject_CheckBuffer(obj.ptr()) != 0) return fromBufferProtocol(obj, arg, writable);
  if (py::hasattr(obj, "__dlpack__")) return fromDlpack(obj, arg);  // DLPack 0.x has no read-only flag
  throw py::type_error(arg.message("is a " + typeName(obj) +
                                   "; expected a numpy array, a torch tensor, or another object with the buffer "
                                   "protocol or __dlpack__"));
}

HostBuffer HostBuffer::fromBufferProtocol(py::handle obj, const ArgRef& arg, bool writable) {
  HostBuffer b;
  b.object_ = py::reinterpret_borrow<py::object>(obj);
  auto* view = new Py_buffer{};
  // Ask for strides and the format whatever the layout, so that a non-contiguous or read-only
  // array is described precisely below instead of failing inside the exporter.
  if (PyObject_GetBuffer(obj.ptr(), view, PyBUF_RECORDS_RO) != 0) {
    delete view;
    throw py::error_already_set();
  }
  b.view_.reset(view);
  std::string name = nameOfFormat(view->format, view->itemsize);
  auto type = typeFromName(name);
  if (!type || static_cast<Py_ssize_t>(dataTypeSize(*type)) != view->itemsize) raiseUnsupportedType(arg, name);
  if (PyBuffer_IsContiguous(view, 'C') == 0) {
    std::string strides;
    for (int d = 0; d < view->ndim; ++d) strides += (d ? ", " : "") + std::to_string(view->strides[d]);
    raiseArg(arg, "is not C-contiguous (byte strides (" + strides +
                      ")); expected a contiguous array (numpy.ascontiguousarray(a) or tensor.contiguous() makes one, "
                      "but then the result lands in the copy)");
  }
  if (writable && view->readonly != 0) {
    raiseArg(arg,
             "is read-only (for numpy, flags.writeable is False) but this call writes its result there; "
             "expected a writable array");
  }
  b.type_ = *type;
  b.data_ = view->buf;
  b.count_ = static_cast<size_t>(view->len / view->itemsize);
  return b;
}

HostBuffer HostBuffer::fromDlpack(py::handle obj, const ArgRef& arg) {
  // Refuse device memory before exporting anything.
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    int type = py::int_(dev[0]);
    int id = py::int_(dev[1]);
    if (!isHostDevice(type)) raiseNotHost(arg, type, id);
  }
  // DLPack 0.x cannot say "bool", so torch exports it as uint8: refuse it by its own name.
  if (py::hasattr(obj, "dtype")) {
    std::string dtype = py::str(obj.attr("dtype"));
    if (dtype == "torch.bool" || dtype == "bool") raiseUnsupportedType(arg, "bool");
  }
  // torch refuses to export a tensor that requires grad. Collectives are not differentiable (as in
  // torch.distributed), so borrow the detached tensor: it shares the same memory.
  py::object source = py::reinterpret_borrow<py::object>(obj);
  if (py::hasattr(obj, "requires_grad") && py::hasattr(obj, "detach") && obj.attr("requires_grad").cast<bool>()) {
    source = obj.attr("detach")();
  }
  py::object capsule;
  try {
    capsule = source.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    raiseArg(arg, std::string("could not be exported with __dlpack__(): ") + e.what());
  }
  if (PyCapsule_IsValid(capsule.ptr(), dlpack::kCapsuleName) == 0) {
    raiseArg(arg, "gave a __dlpack__() result that is not an unused \"dltensor\" capsule");
  }
  auto* tensor = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  if (tensor == nullptr) throw py::error_already_set();
  // Take ownership: from the rename on, the capsule's destructor leaves the tensor to us.
  if (PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName) != 0) throw py::error_already_set();
  HostBuffer b;
  b.managed_.reset(tensor);
  b.object_ = py::reinterpret_borrow<py::object>(obj);

  const dlpack::Tensor& t = tensor->dlTensor;
  if (!isHostDevice(t.device.deviceType)) raiseNotHost(arg, t.device.deviceType, t.device.deviceId);
  std::string name = nameOfDlType(t.dtype);
  auto type = t.dtype.lanes == 1 ? typeFromName(name) : std::nullopt;
  if (!type || t.dtype.bits != 8 * dataTypeSize(*type)) raiseUnsupportedType(arg, name);
  // Row-major contiguity, ignoring the strides of extent-1 dimensions (they are arbitrary).
  size_t count = 1;
  bool contiguous = true;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] < 0) raiseArg(arg, "has a negative extent in its DLPack shape");
    if (t.strides != nullptr && t.shape[d] != 1 && t.strides[d] != static_cast<int64_t>(count)) contiguous = false;
    count *= static_cast<size_t>(t.shape[d]);
  }
  if (!contiguous && count > 0) {
    std::string strides;
    for (int d = 0; d < t.ndim; ++d) strides += (d ? ", " : "") + std::to_string(t.strides[d]);
    raiseArg(arg, "is not contiguous (element strides (" + strides +
                      ")); expected a contiguous tensor (tensor.contiguous() makes one, but then the result lands in "
                      "the copy)");
  }
  b.type_ = *type;
  b.count_ = count;
  b.data_ = static_cast<char*>(t.data) + t.byteOffset;
  return b;
}

}  // namespace ferry::bindings
