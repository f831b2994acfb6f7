// The c10d backend's argument checks: torch tensors and options to ferry's buffers, types and ops.
//
// Every check throws a c10::Error (Python: RuntimeError, or ValueError for a bad value) whose
// message names the call, the argument, this rank and what was expected, as ferry's own errors do.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/types.hpp"
#include "python/c10d/compat.hpp"

namespace ferry::torch_c10d {

/// A call's identity for messages: "allreduce on rank 3".
struct CallSite {
  const char* fn;
  int rank;
};

/// A tensor as ferry sees it: its first byte, its element count and its type.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kUint8;
};

/// `tensor` (named `what` in messages) must be dense, contiguous, on the CPU (or on a GPU when
/// the backend is built with CUDA) and of a type ferry carries. bool travels as uint8.
Buffer checkTensor(const CallSite& at, const std::string& what, const at::Tensor& tensor);

/// Each of `tensors` (named what[i]) as checkTensor, all of `expected`'s type and, when
/// `sameCount`, of its element count. Fails on an empty list.
std::vector<Buffer> checkTensors(const CallSite& at, const std::string& what, const std::vector<at::Tensor>& tensors,
                                 const at::Tensor& expected, bool sameCount);

/// A list argument that must hold exactly `n` entries (one tensor per process: this backend drives
/// one device per rank).
void checkListSize(const CallSite& at, const std::string& what, size_t size, size_t n, const char* why);

/// The ferry reduction for torch's `op` on tensors of `type`. bool: sum and max are logical or,
/// product and min logical and (as NCCL's backend does). BAND, BOR and BXOR are ferry's bitwise ops,
/// refused on floating-point tensors; PREMUL_SUM is refused.
RedOp toRedOp(const CallSite& at, const c10d::ReduceOp& op, at::ScalarType type);

/// A root rank from torch's options, checked against the group size.
int checkRoot(const CallSite& at, int64_t root, int size);

/// A peer rank for send/recv.
int checkPeer(const CallSite& at, const char* what, int peer, int size);

}  // namespace ferry::torch_c10d
