// The reproducible mode's float32 row sum (repro_rows.hpp) for AVX-512: compiled with the AVX-512
// flags and called only after the dispatcher (reproducible.cpp) checked the CPU.
#include "kernels/host/repro_rows.hpp"

namespace ferry::kernels {

void reproFloat32SumRowsAvx512(const ReproLanes& l, const void* const* rows, int nrows, size_t count, float* out) {
  float32SumRows(l, rows, nrows, count, out);
}

}  // namespace ferry::kernels
