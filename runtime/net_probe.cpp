#include "runtime/net_probe.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

namespace ferry {
namespace {

constexpr int kRoundTrips = 6;
constexpr int kTransfers = 3;
constexpr size_t kTransferBytes = size_t{2} << 20;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One exchange: `first` sends `out` bytes and waits for `back` bytes; the other receives, then answers.
Status exchange(Comm& comm, bool first, int peer, std::vector<uint8_t>& big, size_t out, std::vector<uint8_t>& small) {
  if (first) {
    FERRY_TRY(comm.send(big.data(), out, DataType::kUint8, peer));
    return comm.recv(small.data(), small.size(), DataType::kUint8, peer);
  }
  FERRY_TRY(comm.recv(big.data(), out, DataType::kUint8, peer));
  return comm.send(small.data(), small.size(), DataType::kUint8, peer);
}

}  // namespace

Result<NetLevel> probeNetwork(Comm& comm, int a, int b) {
  double v[2] = {0, 0};
  const int me = comm.rank();
  if (me == a || me == b) {
    const int peer = me == a ? b : a;
    std::vector<uint8_t> small(8), big(kTransferBytes);
    double rtt = std::numeric_limits<double>::infinity(), transfer = rtt;
    for (int i = 0; i < kRoundTrips; ++i) {
      const double t0 = now();
      FERRY_TRY(exchange(comm, me == a, peer, small, small.size(), small));
      rtt = std::min(rtt, now() - t0);
    }
    for (int i = 0; i < kTransfers; ++i) {
      const double t0 = now();
      FERRY_TRY(exchange(comm, me == a, peer, big, big.size(), small));
      transfer = std::min(transfer, now() - t0);
    }
    // A transfer and its answer: alpha + bytes * beta + alpha.
    v[0] = rtt / 2;
    v[1] = std::max(transfer - rtt, transfer * 0.01) / static_cast<double>(kTransferBytes);
  }
  FERRY_TRY(comm.broadcast(v, v, 2, DataType::kFloat64, a));
  NetLevel net;
  net.alpha = v[0];
  net.beta = v[1];
  net.measured = v[1] > 0;
  return net;
}

}  // namespace ferry
