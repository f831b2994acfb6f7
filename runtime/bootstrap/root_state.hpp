// The root's bookkeeping for one job: who registered, which round is being gathered, who is late.
//
// Separated from the server's sockets so that the rules (who may register, when a round completes,
// fails or times out) read in one place and the poll loop only moves bytes. RootState never
// blocks and owns no file descriptors; it answers through a ReplySink keyed by connection id.
//
// Vocabulary: a *rank slot* is absent (never registered), connected, or left (registered and then
// disconnected). A *round* is one allGather: it starts with the first GATHER, completes when every
// rank sent one, and fails at the earliest deadline any contributor sent or when a registered rank
// leaves while others wait. A failure is sticky: every later request gets the same error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "runtime/base/deadline.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {

/// Where RootState sends its answers: the server queues them on the connection.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  /// Queue `frame` on connection `conn` (ignored when that connection is gone).
  virtual void reply(uint64_t conn, wire::OutFrame frame) = 0;
};

/// Registration and allGather rounds of one job.
class RootState {
 public:
  RootState(const Secret& secret, ReplySink& sink) : secret_(secret), sink_(sink) {}

  /// A HELLO arrived on connection `conn` from `peer`. Returns the rank now registered, or -1 when
  /// it was refused (an ERROR is queued and logged; the caller closes once it is sent).
  int hello(uint64_t conn, const std::string& peer, const wire::Hello& hello);
  /// Registered `rank` sent its contribution to a round.
  void gather(int rank, wire::GatherRequest request);
  /// Registered `rank` closed its connection (or was dropped).
  void disconnected(int rank);
  /// Fail the pending round when its deadline has passed.
  void tick();
  /// When tick() next has something to do; time_point::max() when nothing is pending.
  Clock::time_point nextDeadline() const;
  /// Every rank registered and has left again, or the job failed and no rank is connected: the
  /// root has nothing left to do.
  bool finished() const;

 private:
  enum class SlotState : uint8_t { kAbsent, kConnected, kLeft };
  struct Slot {
    SlotState state = SlotState::kAbsent;
    uint64_t conn = 0;
    std::string peer;
    bool arrived = false;  // contributed to the pending round
    std::vector<uint8_t> data;
  };

  Status checkHello(const std::string& peer, const wire::Hello& hello) const;
  void completeRound();
  void failRound(Status why, int alsoTell = -1);
  std::string timeoutMessage() const;

  Secret secret_;
  ReplySink& sink_;
  int size_ = 0;  // 0 until the first rank registers
  int firstRank_ = -1;
  std::vector<Slot> slots_;
  int connected_ = 0;
  int left_ = 0;
  uint64_t round_ = 0;
  int arrived_ = 0;
  size_t roundBytes_ = 0;
  Clock::time_point roundStart_{};
  Clock::time_point roundDeadline_ = Clock::time_point::max();
  Status failure_;
};

/// "rank 3", "ranks 2, 3", "ranks 0-5, 7": a rank list for messages, runs of three or more folded.
std::string describeRanks(const std::vector<int>& ranks);

}  // namespace ferry::bootstrap
