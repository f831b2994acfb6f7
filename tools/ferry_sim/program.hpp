// A rank's part of one collective as ferry-sim replays it: the sends, receives, waits and
// reductions the algorithm made, in the order it made them.
//
// Vocabulary: a request is one posted send or receive, numbered per rank in posting order; a wait
// names the request whose completion the rank blocked on; a reduction or copy occupies the rank
// for its bytes at the modelled rate. Program order is the only other dependency: a rank runs its
// ops one after another and blocks only at waits and computations.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::sim {

/// One recorded step of a rank.
struct Op {
  enum class Kind : uint8_t { kSend, kRecv, kWait, kReduce, kCopy };
  Kind kind;
  int32_t peer = -1;   ///< send, receive: the other rank (a real rank number, 0..n-1)
  uint32_t req = 0;    ///< send, receive: the request it creates; wait: the request awaited
  uint64_t bytes = 0;  ///< send, receive: message bytes; reduce, copy: output bytes
};

/// One rank's ops and how many requests they create.
struct Program {
  std::vector<Op> ops;
  uint32_t requests = 0;
};

}  // namespace ferry::sim
