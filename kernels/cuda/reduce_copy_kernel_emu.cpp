// The emulated build of reduce_copy_kernel.cu: the same source compiled as host C++ (simt.hpp
// supplies the CUDA subset), so CI without a GPU runs the device code.
#include "kernels/cuda/reduce_copy_kernel.cu"
