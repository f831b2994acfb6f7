// Receive from any source (torch's recvAnysource) over ferry's point-to-point calls, which always
// name the peer.
//
// Every send of this backend is announced in the group's Store before it is posted: the counter
// "ferry/sent/<src>/<dst>" counts the sends rank src made to rank dst. Each rank also counts, on its
// progress thread, the host receives it posted from each peer (in queue order). A receive from any
// source runs on the progress thread like every call: it polls the counters of the messages sent
// to this rank until some peer has sent more than this rank has received from it, then receives
// from that peer (the lowest such rank after the one picked last, so that no sender starves).
// Transfers between two ranks pair in the order they were made, so that receive takes the oldest
// unmatched message of that peer, as a receive naming it would.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/comm.hpp"

namespace ferry::torch_c10d {

class AnySource {
 public:
  AnySource(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout)
      : store_(std::move(store)), rank_(rank), received_(static_cast<size_t>(size), 0), timeout_(timeout) {}

  /// Count a send of this rank to `dst` (the caller's thread, before the send is posted).
  void announceSend(int dst);
  /// Count the host receives of `ops` (the progress thread, before they are posted).
  void noteReceives(const std::vector<P2pOp>& ops);
  /// The peer whose oldest unmatched message this rank receives next, counted as received; waits
  /// (backing off) until one has sent, up to the group's timeout or until `comm` fails. Progress
  /// thread only.
  Result<int> pickSender(Comm& comm);

 private:
  std::string key(int src, int dst) const;

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  std::vector<uint64_t> received_;  // per peer; progress thread only
  int last_ = -1;                   // the peer picked last
  std::chrono::milliseconds timeout_;
};

}  // namespace ferry::torch_c10d
