// Everything in the c10d backend that depends on torch's version, in one place.
//
// torch 1.13 (Debian 12's) takes a third-party backend as a subclass of c10d::ProcessGroup built by
// a Python factory (store, rank, size, timeout). torch 2.x split that class in two: the backend
// derives from c10d::Backend and torch wraps it in a ProcessGroup of its own. The collectives'
// signatures and option structs are the same in both, so only the base class and its constructor
// differ; python/ferry/torch_backend.py holds the Python half of the difference.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if FERRY_TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace ferry::torch_c10d {

#if FERRY_TORCH_VERSION_MAJOR >= 2
/// The class a third-party backend derives from.
using BackendBase = ::c10d::Backend;
#else
using BackendBase = ::c10d::ProcessGroup;
#endif

}  // namespace ferry::torch_c10d
