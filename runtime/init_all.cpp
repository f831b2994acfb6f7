// Comm::initAll: several ranks of one communicator in this process (ncclCommInitAll).
//
// Each rank joins through the ordinary Comm::create on its own thread, since every rank blocks in
// the rendezvous until all have arrived; the rendezvous root is started here (UniqueId::create,
// on loopback unless FERRY_SOCKET_IFNAME says otherwise). If any rank fails, every communicator
// created is destroyed and the first failure, by rank, is returned.
#include <thread>

#include "ferry/comm.hpp"
#include "runtime/cuda/cuda_api.hpp"

namespace ferry {

Result<std::vector<std::unique_ptr<Comm>>> Comm::initAll(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  if (n < 1)
    return makeError(ErrorCode::kInvalidArgument, "Comm::initAll: devices is empty (expected one entry per rank)");
  for (int i = 0; i < n; ++i) {
    if (devices[i] < -1) {
      return makeError(ErrorCode::kInvalidArgument,
                       "Comm::initAll: devices[%d] = %d is invalid (expected a CUDA device >= 0, or -1 for a host-only "
                       "rank)",
                       i, devices[i]);
    }
    // Refused before any rank joins (Comm::create checks again): one rank failing alone would
    // leave the others waiting for it in the rendezvous until the deadline.
    FERRY_TRY(gpu::checkDeviceRequest("Comm::initAll", i, devices[i]));
  }
  auto id = UniqueId::create();
  FERRY_TRY(id);
  std::vector<Result<std::unique_ptr<Comm>>> made;
  made.reserve(n);
  for (int i = 0; i < n; ++i) made.emplace_back(Status(ErrorCode::kInternalError, "not run"));
  {
    std::vector<std::jthread> threads;
    for (int i = 1; i < n; ++i) threads.emplace_back([&, i] { made[i] = Comm::create(*id, i, n, devices[i]); });
    made[0] = Comm::create(*id, 0, n, devices[0]);
  }
  std::vector<std::unique_ptr<Comm>> comms;
  for (int i = 0; i < n; ++i) {
    if (!made[i].isOk()) return made[i].status();  // the others are destroyed with `made`
    comms.push_back(std::move(*made[i]));
  }
  return comms;
}

}  // namespace ferry
