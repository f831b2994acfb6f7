// The runtime's side of every wait: abort requests, peers' liveness and errors other ranks report.
//
// Collectives call poll() every few milliseconds while they wait (coll::WaitHooks). It
//   - returns kAborted once abort() was called (from any thread);
//   - checks, at most every FERRY_PEER_CHECK_MS, that the peer being waited for still runs when it
//     is on this host (same host id and pid namespace), so a SIGKILLed rank is noticed even where
//     the transport cannot see it (shared memory has no connection to break);
//   - tests the control receive, posted for the communicator's life, through which a rank that
//     failed tells the others why (report());
//   - answers status queries: a rank whose call timed out asks every other where its own call
//     stands (whoIsBehind()), and the ranks blocked in ferry answer from their call trace. A rank
//     that does not answer is not inside ferry at all (busy elsewhere, stopped or gone).
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "runtime/peer_info.hpp"

namespace ferry {

class Watchdog final : public coll::WaitHooks {
 public:
  Watchdog(transport::Transport* transport, int rank, std::vector<PeerInfo> peers, double checkSeconds);
  ~Watchdog() override;

  /// Post the control and status receives. Call once all endpoints exist.
  Status start();
  /// Where this communicator's calls stand, for answering status queries (set before start()).
  void setTrace(uint64_t commId, int size, const coll::CallTrace* trace) {
    commId_ = commId;
    size_ = size;
    trace_ = trace;
  }
  /// After call #seq timed out here: ask every other rank where it stands, wait up to `seconds`
  /// for the answers, and say which ranks have not reached call #seq, with what each answered
  /// or that it did not answer.
  /// Ranks that answer from call #seq itself but with another call than `mine` are named as
  /// such, and `*mismatch` is set (ranks passing different roots wait on each other forever).
  /// A report that arrives meanwhile (another rank's error, here or in the parent) ends the wait
  /// and lands in `*reported`: the rank that failed first knows more than the ranks' answers, and
  /// a rank blocked in another sub-communicator of the same parent cannot answer at all.
  std::string whoIsBehind(uint64_t seq, double seconds, const coll::OpDesc& mine, bool* mismatch, Status* reported);
  /// Retire the control receive; the watchdog no longer touches the transport afterwards.
  void stop();
  Status poll(int peer) override;
  Status probeCalls(uint64_t seq, const coll::OpDesc& mine) override;
  /// The waits of a sub-communicator (runtime/hierarchy.hpp) also stop for `parent`'s abort and
  /// for the errors the parent's other ranks report. `parent` must outlive this watchdog.
  void setParent(Watchdog* parent) { parent_ = parent; }
  /// Whether abort() was called or another rank reported an error.
  bool stopped() {
    if (aborted_.load(std::memory_order_acquire)) return true;
    std::lock_guard<std::mutex> lock(reportsMutex_);
    return control_.state == transport::Request::State::kDone;
  }
  /// abortStatus(), then the errors other ranks reported (the control receive, after driving the
  /// transport once). Sub-communicators may call it from two threads at once (runtime/hierarchy.cpp
  /// runs the cross level on its progress thread): one drives the transport, the other skips.
  Status pollReports();
  /// Whether abort() was called.
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  /// kAborted once abort() was called, else ok.
  Status abortStatus() const {
    if (!aborted_.load(std::memory_order_acquire)) return Status::ok();
    return Status(ErrorCode::kAborted, "communicator aborted: " + abortReason_);
  }
  /// Ask blocked and later waits to stop with kAborted.
  void abort(const std::string& reason);
  /// Tell every other rank that this one failed with `why` (best effort, bounded by 0.5 s).
  void report(const Status& why);
  const std::vector<PeerInfo>& peers() const { return peers_; }

 private:
  Status checkControl();
  /// Take a status query or answer that arrived (answering queries), and post the receive again.
  void checkStatus();

  transport::Transport* transport_;
  Watchdog* parent_ = nullptr;
  std::mutex reportsMutex_;  // pollReports() from two sub-communicators' threads
  int rank_;
  std::vector<PeerInfo> peers_;
  std::vector<bool> watchedMask_;  // same-host peers whose pid we can check
  double checkSeconds_;
  Clock::time_point nextCheck_;
  std::atomic<bool> aborted_{false};
  std::string abortReason_;
  transport::Request control_;
  std::vector<char> controlBuffer_;
  std::vector<std::string> reports_;  // outgoing payloads, kept alive while sending
  std::vector<std::unique_ptr<transport::Request>> reportRequests_;
  // Status queries and answers.
  uint64_t commId_ = 0;
  int size_ = 0;
  const coll::CallTrace* trace_ = nullptr;
  transport::Request status_;
  std::vector<char> statusBuffer_;
  struct Outgoing {
    std::string payload;
    transport::Request request;
  };
  std::deque<Outgoing> statusSends_;  // answers and queries in flight, retired once done
  struct Answer {
    uint64_t seq = 0;  ///< the query it answers
    uint64_t at = 0;   ///< the answering rank's current or last call
    bool active = false;
    std::string state;     ///< its describeState() line
    bool hasCall = false;  ///< the answer carried its call's description
    coll::OpDesc call;
  };
  std::vector<Answer> answers_;  // by rank; seq 0: none yet
  uint64_t probedSeq_ = 0;       // the call probeCalls() asked about
  /// Send a status query about call #seq to every other rank; (*asked)[r]: it went out.
  void askAll(uint64_t seq, std::vector<bool>* asked);
};

}  // namespace ferry
