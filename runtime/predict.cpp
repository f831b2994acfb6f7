// Comm::predictSeconds: the tuner's price of a call, without running it (ncclGroupSimulateEnd).
#include "ferry/comm.hpp"
#include "runtime/comm_impl.hpp"

namespace ferry {

double Comm::predictSeconds(CallKind kind, size_t bytes) const {
  // Every communicator gets a tuner at init; a missing one means nothing is known about the cost.
  if (!impl_->tuner || bytes == 0) return 0.0;
  return impl_->tuner->predict(kind, bytes);
}

}  // namespace ferry
