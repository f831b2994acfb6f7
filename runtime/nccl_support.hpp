// What the NCCL C API (nccl/) uses of ferry beyond the public API (include/ferry), in one place: the
// only non-public header that nccl/ includes (test/build/check_layers.py enforces it). Each include
// names what nccl/ takes from it; whatever else nccl/ needs goes public or joins this list.
#pragma once

#include "base/call_check.hpp"          // checkCall: the argument checks every front end shares
#include "base/config.hpp"              // config(), configStatus(), knobInfos(): NCCL_* knobs and their report
#include "base/log.hpp"                 // FERRY_INFO / FERRY_WARN / FERRY_TRACE
#include "kernels/host/fp8.hpp"         // fp8 <-> float: scaling ncclRedOpCreatePreMulSum inputs
#include "kernels/host/half.hpp"        // half, bfloat16 <-> float: the same for 16-bit types
#include "runtime/bootstrap/store.hpp"  // StoreServer, decodeUniqueId: NCCL_COMM_ID's rendezvous root
#include "runtime/cuda/cuda_api.hpp"    // deviceCount, currentDevice, deviceAlloc/Free, pointerKind
