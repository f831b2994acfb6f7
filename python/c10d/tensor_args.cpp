// The c10d backend's argument checks (tensor_args.hpp).
#include "python/c10d/tensor_args.hpp"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/tensor_dtypes.h>

#include <exception>

namespace ferry::torch_c10d {

namespace {

constexpr const char* kTypeList =
    "torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, "
    "torch.float32, torch.float64, torch.complex32, torch.complex64 or torch.complex128";

// How one element of a torch type travels: as `per` elements of `type`, after widening to `widen`
// when that is defined (an int16 reduced arithmetically).
struct Carry {
  bool ok = false;
  DataType type = DataType::kUint8;
  size_t per = 1;
  at::ScalarType widen = at::ScalarType::Undefined;
};

Carry carry(DataType type, size_t per = 1) { return {true, type, per, at::ScalarType::Undefined}; }

// The ferry type of a torch type whose elements ferry has as they are.
bool directType(at::ScalarType t, DataType* out) {
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

// A complex type's real half.
bool realType(at::ScalarType t, DataType* out) {
  switch (t) {
    case at::kComplexHalf: *out = DataType::kFloat16; return true;
    case at::kComplexFloat: *out = DataType::kFloat32; return true;
    case at::kComplexDouble: *out = DataType::kFloat64; return true;
    default: return false;
  }
}

bool isBitwise(c10d::ReduceOp::RedOpType op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

// How `t` travels when moved (red == nullptr) or reduced by `red` (already checked by toReduction).
Carry carryFor(at::ScalarType t, const Reduction* red) {
  DataType d = DataType::kUint8;
  if (directType(t, &d)) return carry(d);
  if (realType(t, &d)) return carry(d, 2);
  if (t != at::kShort) return {};
  if (red == nullptr || isBitwise(red->torchOp)) return carry(DataType::kUint8, 2);
  return {true, DataType::kInt32, 1, at::kInt};
}

std::string prefix(const CallSite& at) {
  return std::string("ferry: ") + at.fn + " on rank " + std::to_string(at.rank) + ": ";
}

// The staging copy of `t` that the operation reads: conjugation and negation resolved, PREMUL_SUM's
// factor applied, widened, contiguous.
at::Tensor stageIn(const at::Tensor& t, const Reduction* red, at::ScalarType widen) {
  at::Tensor x = t.resolve_conj().resolve_neg();
  if (red != nullptr && red->factor.defined()) x = at::mul(x, red->factor);
  if (widen != at::ScalarType::Undefined) x = x.to(widen);
  return x.contiguous();
}

}  // namespace

std::string dtypeName(at::ScalarType type) { return "torch." + torch::utils::getDtypeNames(type).first; }

const char* reduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

Buffer checkTensor(const CallSite& at, const std::string& what, const at::Tensor& t, Access access,
                   const Reduction* red) {
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
  const Carry c = carryFor(t.scalar_type(), red);
  TORCH_CHECK_VALUE(c.ok, prefix(at), what, " has dtype ", dtypeName(t.scalar_type()), " (expected ", kTypeList, ")");
  const bool stage = !t.is_contiguous() || t.is_conj() || t.is_neg() || c.widen != at::ScalarType::Undefined ||
                     (red != nullptr && red->factor.defined() && access != Access::kWrite);
  Buffer b;
  b.tensor = t;
  b.type = c.type;
  b.per = c.per;
  b.count = static_cast<size_t>(t.numel()) * c.per;
  if (!stage) {
    b.data = t.data_ptr();
    return b;
  }
  TORCH_CHECK_VALUE(!t.is_cuda(), prefix(at), what, " (sizes ", t.sizes(), ", strides ", t.strides(), ", dtype ",
                    dtypeName(t.scalar_type()),
                    ") would travel through a staging copy, which CUDA tensors do not support yet; pass a "
                    "contiguous tensor of a type ferry has");
  if (access != Access::kRead) {
    // The copy back writes every element once: a tensor whose elements share memory cannot take it.
    TORCH_CHECK_VALUE(at::has_internal_overlap(t) != at::MemOverlap::Yes, prefix(at), what, " (sizes ", t.sizes(),
                      ", strides ", t.strides(), ") is written but several of its elements share memory",
                      " (expected a tensor without overlap, e.g. not an expand())");
  }
  at::NoGradGuard noGrad;
  if (access == Access::kWrite) {
    const at::ScalarType type = c.widen != at::ScalarType::Undefined ? c.widen : t.scalar_type();
    b.staging = at::empty(t.sizes(), t.options().dtype(type).memory_format(at::MemoryFormat::Contiguous));
  } else {
    b.staging = stageIn(t, red, c.widen);
  }
  b.data = b.staging.data_ptr();
  b.writeBack = access != Access::kRead;
  return b;
}

std::vector<Buffer> checkTensors(const CallSite& at, const std::string& what, const std::vector<at::Tensor>& ts,
                                 const at::Tensor& expected, bool sameCount, Access access, const Reduction* red) {
  TORCH_CHECK_VALUE(!ts.empty(), prefix(at), what, " is an empty list");
  std::vector<Buffer> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string name = what + "[" + std::to_string(i) + "]";
    TORCH_CHECK_VALUE(!ts[i].defined() || ts[i].scalar_type() == expected.scalar_type(), prefix(at), name,
                      " has dtype ", dtypeName(ts[i].scalar_type()), " (expected ", dtypeName(expected.scalar_type()),
                      ", as the other tensors)");
    out.push_back(checkTensor(at, name, ts[i], access, red));
    TORCH_CHECK_VALUE(ts[i].device() == expected.device(), prefix(at), name, " is on ", ts[i].device(), " (expected ",
                      expected.device(), ", as the other tensors)");
    TORCH_CHECK_VALUE(!sameCount || ts[i].numel() == expected.numel(), prefix(at), name, " has ", ts[i].numel(),
                      " elements (expected ", expected.numel(), ")");
  }
  return out;
}

Status writeBack(const std::vector<Buffer>& bufs) {
  try {
    at::NoGradGuard noGrad;
    for (const Buffer& b : bufs) {
      if (b.writeBack) b.tensor.copy_(b.staging);
    }
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternalError, std::string("copying a staged output back failed: ") + e.what());
  }
  return Status::ok();
}

void checkListSize(const CallSite& at, const std::string& what, size_t size, size_t n, const char* why) {
  TORCH_CHECK_VALUE(size == n, prefix(at), what, " holds ", size, " entries (expected ", n, ": ", why, ")");
}

Reduction toReduction(const CallSite& at, const c10d::ReduceOp& op, const std::string& what, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), prefix(at), what, " is an undefined tensor");
  const at::ScalarType type = t.scalar_type();
  const c10d::ReduceOp::RedOpType kind = op.op_;
  const char* name = reduceOpName(kind);
  const bool isBool = type == at::kBool;
  const bool isComplex = at::isComplexType(type);
  const bool isFloat = at::isFloatingType(type) || isComplex;
  Reduction r;
  r.torchOp = kind;
  switch (kind) {
    case c10d::ReduceOp::SUM: r.op = isBool ? RedOp::kMax : RedOp::kSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? RedOp::kMin : RedOp::kProd; break;
    case c10d::ReduceOp::MIN: r.op = RedOp::kMin; break;
    case c10d::ReduceOp::MAX: r.op = RedOp::kMax; break;
    case c10d::ReduceOp::AVG: r.op = RedOp::kAvg; break;
    case c10d::ReduceOp::BAND: r.op = RedOp::kBand; break;
    case c10d::ReduceOp::BOR: r.op = RedOp::kBor; break;
    case c10d::ReduceOp::BXOR: r.op = RedOp::kBxor; break;
    case c10d::ReduceOp::PREMUL_SUM: r.op = RedOp::kSum; break;
    default:
      TORCH_CHECK_VALUE(false, prefix(at), "reduce op ", static_cast<int>(kind), " (", name, ") on ", what,
                        " is not supported (expected SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR or PREMUL_SUM)");
  }
  TORCH_CHECK_VALUE(!(isBool && (kind == c10d::ReduceOp::AVG || kind == c10d::ReduceOp::PREMUL_SUM)), prefix(at), "op ",
                    name, " is not defined on ", what, " of dtype torch.bool (expected SUM, PRODUCT, MIN, MAX, ",
                    "BAND, BOR or BXOR)");
  TORCH_CHECK_VALUE(!isComplex || kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG ||
                        kind == c10d::ReduceOp::PREMUL_SUM,
                    prefix(at), "op ", name, " is not defined on ", what, " of dtype ", dtypeName(type),
                    " (complex tensors reduce with SUM, AVG or PREMUL_SUM only)");
  TORCH_CHECK_VALUE(!isBitwise(kind) || !isFloat, prefix(at), "op ", name, " needs an integer or bool tensor; ", what,
                    " has dtype ", dtypeName(type),
                    " (expected torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32 or torch.int64)");
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    const auto* sup = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK_VALUE(sup != nullptr, prefix(at), "op PREMUL_SUM on ", what,
                      " has no factor (make it with torch.distributed._make_nccl_premul_sum)");
    at::NoGradGuard noGrad;
    if (sup->tensor_factors.empty()) {
      r.factor = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(at::kDouble));
    } else {
      TORCH_CHECK_VALUE(sup->tensor_factors.size() == 1, prefix(at), "op PREMUL_SUM on ", what, " has ",
                        sup->tensor_factors.size(), " factors (expected 1: one tensor per process)");
      const at::Tensor& f = sup->tensor_factors[0];
      TORCH_CHECK_VALUE(f.numel() == 1, prefix(at), "op PREMUL_SUM's factor for ", what, " has ", f.numel(),
                        " elements (expected 1)");
      r.factor = f.reshape({});
    }
    r.factor = r.factor.to(t.device(), type);
  }
  // ferry's rule for its own ops on the type the tensor travels as, checked here too so that the
  // error is raised at once on the caller's thread rather than when the queued work runs.
  const Carry c = carryFor(type, &r);
  TORCH_CHECK_VALUE(c.ok, prefix(at), what, " has dtype ", dtypeName(type), " (expected ", kTypeList, ")");
  TORCH_CHECK_VALUE(redOpDefinedFor(r.op, c.type), prefix(at), "op ", name, " is not defined on ", what, " of dtype ",
                    dtypeName(type));
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
