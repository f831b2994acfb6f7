// The collective kernels compiled as host C++ under the SIMT emulation (kernels/cuda/simt.hpp):
// the same source as the GPU build, run on host threads by tests and by machines without CUDA.
#include "collectives/cuda/kernels.cu"
