// Receive from any source (any_source.hpp).
#include "python/c10d/any_source.hpp"

#include <algorithm>
#include <thread>

namespace ferry::torch_c10d {

std::string AnySource::key(int src, int dst) const {
  return "ferry/sent/" + std::to_string(src) + "/" + std::to_string(dst);
}

void AnySource::announceSend(int dst) { store_->add(key(rank_, dst), 1); }

void AnySource::noteReceives(const std::vector<P2pOp>& ops) {
  for (const P2pOp& op : ops) {
    if (op.kind == P2pOp::Kind::kRecv) ++received_[static_cast<size_t>(op.peer)];
  }
}

Result<int> AnySource::pickSender(Comm& comm) {
  const int size = static_cast<int>(received_.size());
  const auto start = std::chrono::steady_clock::now();
  // Polling the Store costs one round trip per peer: start fast, back off to a few milliseconds.
  auto pause = std::chrono::microseconds(50);
  constexpr auto kMaxPause = std::chrono::microseconds(5000);
  for (;;) {
    for (int i = 1; i <= size; ++i) {
      const int peer = (last_ + i + size) % size;
      if (peer == rank_) continue;
      const int64_t sent = store_->add(key(peer, rank_), 0);
      if (sent > static_cast<int64_t>(received_[static_cast<size_t>(peer)])) {
        ++received_[static_cast<size_t>(peer)];
        last_ = peer;
        return peer;
      }
    }
    FERRY_TRY(comm.error());
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout_) {
      return makeError(ErrorCode::kTimeout,
                       "recv from any source on rank %d: no rank sent to this rank within %lld ms (the process "
                       "group's timeout; expected a send from one of the %d other ranks)",
                       rank_, static_cast<long long>(timeout_.count()), size - 1);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
  }
}

}  // namespace ferry::torch_c10d
