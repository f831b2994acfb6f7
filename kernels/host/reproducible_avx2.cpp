// The reproducible mode's float32 row sum (repro_rows.hpp) for AVX2: compiled with -mavx2 and
// called only after the dispatcher (reproducible.cpp) checked the CPU.
#include "kernels/host/repro_rows.hpp"

namespace ferry::kernels {

void reproFloat32SumRowsAvx2(const ReproLanes& l, const void* const* rows, int nrows, size_t count, float* out) {
  float32SumRows(l, rows, nrows, count, out);
}

}  // namespace ferry::kernels
