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
//
// The world size is rank 0's: given when the root was started by rank 0 itself (from its launch
// configuration), else taken from rank 0's own registration. Until rank 0 has registered, the
// registrations of other ranks are *parked* (kept, unanswered) and judged in arrival order once the
// size is known, so the first arrival cannot impose its size and make rank 0 be refused.
// RootState only ever sees authenticated claims; the handshake itself is ServerSession's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "base/deadline.hpp"
#include "runtime/bootstrap/wire.hpp"

namespace ferry::bootstrap {

/// Where RootState sends its answers: the server queues them on the connection.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  /// Queue `frame` on connection `conn` (ignored when that connection is gone).
  virtual void reply(uint64_t conn, wire::OutFrame frame) = 0;
  /// Connection `conn` is now registered as `rank` (possibly long after its AUTH, when parked).
  virtual void admit(uint64_t conn, int rank) = 0;
  /// Connection `conn` was refused: its ERROR is queued; close it once that is sent.
  virtual void refuse(uint64_t conn) = 0;
};

/// Registration and allGather rounds of one job.
class RootState {
 public:
  /// The job of `secret`; `worldSize` is rank 0's configured size, or 0 to take it from rank 0's AUTH.
  RootState(const Secret& secret, int worldSize, ReplySink& sink)
      : secret_(secret), size_(worldSize > 0 ? worldSize : 0), sink_(sink) {
    if (size_ > 0) slots_.assign(static_cast<size_t>(size_), Slot{});
  }

  /// The job secret, for the handshake's proofs.
  const Secret& secret() const { return secret_; }
  /// Where answers go (the handshake's CHALLENGE too).
  ReplySink& sink() { return sink_; }
  /// Connection `conn` from `peer` proved the secret and claims `claim`; `welcome` is the OK to
  /// send when it is registered. Registers it (sink.admit), parks it until rank 0 has set the world
  /// size, or refuses it (an ERROR is queued and logged, then sink.refuse).
  void hello(uint64_t conn, const std::string& peer, const Claim& claim, wire::OutFrame welcome);
  /// Refuse connection `conn` from `peer` before it made a valid claim (logged at WARN).
  void refuse(uint64_t conn, const std::string& peer, const Status& why);
  /// A connection that never registered is gone: forget its parked claim, if any.
  void forget(uint64_t conn);
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

  // An authenticated claim waiting for rank 0 to fix the world size.
  struct Parked {
    uint64_t conn;
    std::string peer;
    Claim claim;
    wire::OutFrame welcome;
  };

  Status checkClaim(const std::string& peer, const Claim& claim) const;
  void admit(uint64_t conn, const std::string& peer, const Claim& claim, wire::OutFrame welcome);
  void completeRound();
  void failRound(Status why, int alsoTell = -1);
  std::string timeoutMessage() const;

  Secret secret_;
  int size_ = 0;  // 0 until rank 0 registers (when the root was not told)
  ReplySink& sink_;
  std::vector<Slot> slots_;
  std::vector<Parked> parked_;
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
