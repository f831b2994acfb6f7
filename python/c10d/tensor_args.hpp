// The c10d backend's argument checks: torch tensors and options to ferry's buffers, types and ops.
//
// Every check throws a c10::Error (Python: RuntimeError, or ValueError for a bad value) whose
// message names the call, the argument (with its index in a list), this rank and what was
// expected, using torch's names for types and ops (torch.int16, BXOR), as ferry's own errors do.
//
// How a tensor travels (tensor_args.cpp has the table):
// - as itself when it is contiguous and ferry has its type (bool as uint8);
// - through its bytes or its real view where ferry has no such type but the call only moves data
//   or the op is exact that way: int16 as pairs of uint8 (data movement, BAND/BOR/BXOR), complex as
//   pairs of its real type (data movement, SUM, AVG, PREMUL_SUM);
// - through a contiguous staging tensor otherwise: a non-contiguous tensor (or a conjugate or
//   negative view), an int16 tensor reduced arithmetically (widened to int32, which wraps modulo
//   2^16 exactly as int16 arithmetic does once narrowed back), or a PREMUL_SUM input (scaled by the
//   factor first). A staged output is copied back into the caller's tensor once the operation ran.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "ferry/types.hpp"
#include "python/c10d/compat.hpp"

namespace ferry::torch_c10d {

/// A call's identity for messages: "allreduce on rank 3".
struct CallSite {
  const char* fn;
  int rank;
};

/// How a call uses a tensor: what must be staged in before, and copied back after.
enum class Access {
  kRead,       ///< an input only
  kWrite,      ///< an output only: its old contents are not read
  kReadWrite,  ///< in place
};

/// torch's reduce op resolved for one tensor type: ferry's op on the type the tensor travels as,
/// and PREMUL_SUM's factor.
struct Reduction {
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;
  RedOp op = RedOp::kSum;
  at::Tensor factor;  ///< PREMUL_SUM only: a 0-dim tensor of the reduced tensor's type and device
};

/// A tensor as ferry sees it: its first byte, its element count and its type, as it travels.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kUint8;
  size_t per = 1;          ///< elements of `type` per element of the tensor (2 for complex and int16 as bytes)
  at::Tensor tensor;       ///< the caller's tensor (kept alive until the operation ran)
  at::Tensor staging;      ///< defined when `data` points into a contiguous copy of `tensor`
  bool writeBack = false;  ///< copy `staging` into `tensor` once the operation ran
};

/// `tensor` (named `what` in messages) must be strided, on the CPU (or on a GPU when the backend is
/// built with CUDA) and of a type torch.distributed carries. With `red`, it is reduced by that op
/// (its type must be the one `red` was resolved for); without, its elements are only moved.
Buffer checkTensor(const CallSite& at, const std::string& what, const at::Tensor& tensor,
                   Access access = Access::kReadWrite, const Reduction* red = nullptr);

/// Each of `tensors` (named what[i]) as checkTensor, all of `expected`'s type and device and, when
/// `sameCount`, of its element count. Fails on an empty list.
std::vector<Buffer> checkTensors(const CallSite& at, const std::string& what, const std::vector<at::Tensor>& tensors,
                                 const at::Tensor& expected, bool sameCount, Access access = Access::kReadWrite,
                                 const Reduction* red = nullptr);

/// Copy each staged output of `bufs` back into its tensor (after the operation ran).
Status writeBack(const std::vector<Buffer>& bufs);

/// A list argument that must hold exactly `n` entries (one tensor per process: this backend drives
/// one device per rank).
void checkListSize(const CallSite& at, const std::string& what, size_t size, size_t n, const char* why);

/// torch's `op` for `tensor` (named `what`). bool: SUM and MAX are logical or, PRODUCT and MIN
/// logical and (as NCCL's backend does). BAND, BOR and BXOR are ferry's bitwise ops, on integer
/// and bool tensors only. PREMUL_SUM scales each input by its factor (cast to the tensor's type, as
/// NCCL's PreMulSum takes it) and sums. Complex tensors reduce with SUM, AVG and PREMUL_SUM only.
Reduction toReduction(const CallSite& at, const c10d::ReduceOp& op, const std::string& what, const at::Tensor& tensor);

/// torch's name of a type ("torch.int16") and of a reduce op ("BXOR").
std::string dtypeName(at::ScalarType type);
const char* reduceOpName(c10d::ReduceOp::RedOpType op);

/// A root rank from torch's options, checked against the group size.
int checkRoot(const CallSite& at, int64_t root, int size);

/// A peer rank for send/recv.
int checkPeer(const CallSite& at, const char* what, int peer, int size);

}  // namespace ferry::torch_c10d
