// Runs a test body on N real processes joined by one transport that the ranks bootstrap themselves.
//
// The parent never creates a transport (so the children start clean): it makes a private temporary
// directory and a communicator id, then forks N ranks. Each rank creates the transport under test,
// publishes its localAddress() as a file in that directory, waits (with a deadline) for every other
// rank's file, connects, passes a barrier over the transport, calls sealed() and runs the body. A
// rank's stdout and stderr go to a pipe the parent collects. Every wait takes a deadline: a body
// that would hang fails instead, and the parent kills whatever outlives the run's timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.hpp"
#include "transports/transport.hpp"

namespace ferry::test {

/// The transports this program can be instantiated over: "ucx" (with UCX's peer error handling),
/// "ucx-local" (UCX as the runtime sets it up when every rank is on one host) and "shm".
const std::vector<std::string>& transportNames();

/// What a probe process learned about a transport: whether it can be created here at all, and its
/// capabilities (so capability skips are decided before any rank is forked).
struct TransportProbe {
  bool available = false;
  std::string why;  ///< !available: the creation error
  transport::Capabilities caps;
  std::string name;  ///< what Transport::name() reports
};
TransportProbe probeTransport(const std::string& name);

/// A rank's view of the run.
class RankContext {
 public:
  RankContext(int rank, int size, std::unique_ptr<transport::Transport>* owner, std::string dir)
      : rank_(rank), size_(size), owner_(owner), dir_(std::move(dir)) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  transport::Transport& transport() { return **owner_; }
  /// Destroy the transport now (for checks of teardown itself); nothing else may use it afterwards.
  void destroyTransport() {
    owner_->reset();
    finalBarrierOff_ = true;
  }

  /// Progress until no request in [reqs, reqs+count) is pending; "" or a description of the wait
  /// that ran out of time (`what` names it).
  std::string waitAll(transport::Request* reqs, size_t count, double seconds, const std::string& what);
  std::string wait(transport::Request& req, double seconds, const std::string& what) {
    return waitAll(&req, 1, seconds, what);
  }
  /// Progress for about `seconds` (to show that nothing completes that should not).
  void spin(double seconds);
  /// Says `name` happened, outside the transport (a file in the run's directory): for the ranks
  /// of a body that closes or breaks the transport on purpose.
  void mark(const std::string& name);
  /// Progress until some rank has marked `name`, or for at most `seconds`; true if it was marked.
  bool spinUntilMarked(const std::string& name, double seconds);
  /// Every rank reaches this point before any leaves it; a zero-byte exchange on a reserved tag.
  std::string barrier(double seconds = 20);
  /// The body closed the transport or lost a peer on purpose: the harness adds no final barrier.
  void skipFinalBarrier() { finalBarrierOff_ = true; }
  bool finalBarrierOff() const { return finalBarrierOff_; }

 private:
  int rank_;
  int size_;
  std::unique_ptr<transport::Transport>* owner_;
  std::string dir_;
  bool finalBarrierOff_ = false;
};

/// The tag the harness reserves for its barrier; bodies never use it.
inline constexpr uint64_t kBarrierTag = transport::kTagMask;

/// Returned by a body (as a prefix) to say the check does not apply here: the rank exits 77.
inline constexpr const char* kSkipPrefix = "SKIP: ";

/// A rank body: "" on success, kSkipPrefix + reason to skip, else what went wrong.
using TransportBody = std::function<std::string(RankContext&)>;

struct RankOutcome {
  int exitCode = -1;  ///< 0 success, 77 skipped, 1 body failed, 2 bootstrap failed, 128+signal killed
  std::string output;
};

/// Fork `n` ranks over transport `name`, run `body` on each, collect outcomes. Whatever is still
/// running after `timeoutSeconds` is killed.
std::vector<RankOutcome> runTransportRanks(const std::string& name, int n, const TransportBody& body,
                                           double timeoutSeconds = 40);

/// One line per rank whose exit code is not in `expected` (0 unless told), for diagnostics.
std::string summarize(const std::vector<RankOutcome>& outcomes, const std::vector<int>& expected = {});

}  // namespace ferry::test
