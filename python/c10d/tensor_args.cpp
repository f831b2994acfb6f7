// The c10d backend's argument checks (tensor_args.hpp).
#include "python/c10d/tensor_args.hpp"

#include <c10/util/Exception.h>

namespace ferry::torch_c10d {

namespace {

// The ferry type carrying torch's scalar type, or false when ferry has none.
bool mapType(at::ScalarType t, DataType* out) {
  switch (t) {
    case at::kChar: *out = DataType::kInt8; return true;
    case at::kByte: *out = DataType::kUint8; return true;
    case at::kBool: *out = DataType::kUint8; return true;  // one byte, 0 or 1
    case at::kInt: *out = DataType::kInt32; return true;
    case at::kLong: *out = DataType::kInt64; return true;
    case at::kHalf: *out = DataType::kFloat16; return true;
    case at::kFloat: *out = DataType::kFloat32; return true;
    case at::kDouble: *out = DataType::kFloat64; return true;
    case at::kBFloat16: *out = DataType::kBfloat16; return true;
    default: return false;
  }
}

std::string prefix(const CallSite& at) {
  return std::string("ferry: ") + at.fn + " on rank " + std::to_string(at.rank) + ": ";
}

}  // namespace

Buffer checkTensor(const CallSite& at, const std::string& what, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), prefix(at), what, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.layout() == c10::kStrided, prefix(at), what, " has layout ", t.layout(),
                    " (expected a dense, strided tensor)");
#if FERRY_TORCH_CUDA
  TORCH_CHECK_VALUE(t.device().is_cpu() || t.device().is_cuda(), prefix(at), what, " is on ", t.device(),
                    " (expected a CPU or CUDA tensor)");
#else
  TORCH_CHECK_VALUE(t.device().is_cpu(), prefix(at), what, " is on ", t.device(),
                    " (expected a CPU tensor: this ferry or torch was built without CUDA)");
#endif
  TORCH_CHECK_VALUE(t.is_contiguous(), prefix(at), what, " is not contiguous (sizes ", t.sizes(), ", strides ",
                    t.strides(), "); pass tensor.contiguous()");
  Buffer b;
  TORCH_CHECK_VALUE(mapType(t.scalar_type(), &b.type), prefix(at), what, " has type ", t.scalar_type(),
                    " (expected one of int8, uint8, bool, int32, int64, float16, bfloat16, float32, float64)");
  b.data = t.data_ptr();
  b.count = static_cast<size_t>(t.numel());
  return b;
}

std::vector<Buffer> checkTensors(const CallSite& at, const std::string& what, const std::vector<at::Tensor>& ts,
                                 const at::Tensor& expected, bool sameCount) {
  TORCH_CHECK_VALUE(!ts.empty(), prefix(at), what, " is an empty list");
  std::vector<Buffer> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string name = what + "[" + std::to_string(i) + "]";
    out.push_back(checkTensor(at, name, ts[i]));
    TORCH_CHECK_VALUE(ts[i].scalar_type() == expected.scalar_type(), prefix(at), name, " has type ",
                      ts[i].scalar_type(), " (expected ", expected.scalar_type(), ", as the other tensors)");
    TORCH_CHECK_VALUE(ts[i].device() == expected.device(), prefix(at), name, " is on ", ts[i].device(), " (expected ",
                      expected.device(), ", as the other tensors)");
    TORCH_CHECK_VALUE(!sameCount || ts[i].numel() == expected.numel(), prefix(at), name, " has ", ts[i].numel(),
                      " elements (expected ", expected.numel(), ")");
  }
  return out;
}

void checkListSize(const CallSite& at, const std::string& what, size_t size, size_t n, const char* why) {
  TORCH_CHECK_VALUE(size == n, prefix(at), what, " holds ", size, " entries (expected ", n, ": ", why, ")");
}

RedOp toRedOp(const CallSite& at, const c10d::ReduceOp& op, at::ScalarType type) {
  const bool isBool = type == at::kBool;
  RedOp r = RedOp::kSum;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? RedOp::kMax : RedOp::kSum;
    case c10d::ReduceOp::PRODUCT: return isBool ? RedOp::kMin : RedOp::kProd;
    case c10d::ReduceOp::MIN: return RedOp::kMin;
    case c10d::ReduceOp::MAX: return RedOp::kMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(!isBool, prefix(at), "ReduceOp.AVG is not defined on bool tensors");
      return RedOp::kAvg;
    case c10d::ReduceOp::BAND: r = RedOp::kBand; break;
    case c10d::ReduceOp::BOR: r = RedOp::kBor; break;
    case c10d::ReduceOp::BXOR: r = RedOp::kBxor; break;
    default:
      TORCH_CHECK_VALUE(false, prefix(at), "reduce op ", static_cast<int>(op.op_),
                        " is not supported (expected SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR or BXOR)");
  }
  // ferry's rule for the integer-only ops (types.hpp), applied here too so that the error is raised
  // at once on the caller's thread rather than when the queued work runs. bool travels as uint8.
  DataType t = DataType::kUint8;
  TORCH_CHECK_VALUE(!mapType(type, &t) || redOpDefinedFor(r, t), prefix(at), "op ", redOpName(r),
                    " needs an integer type (", integerTypeList(), ", or bool), got ", type);
  return r;
}

int checkRoot(const CallSite& at, int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, prefix(at), "root rank ", root, " is invalid (expected 0 <= root < ",
                    size, ")");
  return static_cast<int>(root);
}

int checkPeer(const CallSite& at, const char* what, int peer, int size) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, prefix(at), what, " ", peer, " is invalid (expected 0 <= ", what, " < ",
                    size, ")");
  TORCH_CHECK_VALUE(peer != at.rank, prefix(at), what, " is this rank (", peer, "); a rank cannot send to itself");
  return peer;
}

}  // namespace ferry::torch_c10d
