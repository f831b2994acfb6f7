// ferry.empty / ferry.zeros: numpy arrays whose memory comes from ferry::hostAlloc, shared memory
// the other ranks of this host map, so collectives on them read peers' buffers in place.
#pragma once

#include <pybind11/pybind11.h>

namespace ferry::bindings {

/// Define ferry.empty and ferry.zeros in `m` (numpy is imported on their first call, not before).
void registerHostArrays(pybind11::module_& m);

}  // namespace ferry::bindings
