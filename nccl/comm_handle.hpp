// struct ncclComm: what an ncclComm_t points to. It owns a ferry::Comm and adds what the C API needs
// on top of it: the life cycle of a handle that other threads may be using, non-blocking init, the
// sticky error readable from any thread, and the communicator's PreMulSum reductions.
//
// Threads. ferry::Comm runs one call at a time; `opMutex_` serializes calls from several threads.
// Only Comm::abort() is called without that lock (it is thread-safe). ncclCommGetAsyncError reads
// state under `mu_`, never the Comm itself, so a watchdog thread may poll while a call blocks.
//
// Life cycle. Every call enters the handle (in-flight count) and leaves it. Destroy and abort mark
// the handle closing (later calls fail with ncclInvalidUsage), abort also aborts the Comm so that
// blocked calls return, and both wait until no call is in flight before freeing. A handle whose
// non-blocking init is still running when it is destroyed is freed by the init thread once
// Comm::create returns (create cannot be interrupted; it ends by its own deadline).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "ferry/comm.hpp"
#include "nccl/entry.hpp"
#include "nccl/premul_sum.hpp"
#include "nccl/registrations.hpp"

struct ncclComm {
 public:
  /// A handle for `rank` of `size` whose Comm does not exist yet (initializing).
  ncclComm(int rank, int size, int device, bool blocking);
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  const int rank;
  const int size;
  const int device;     ///< what ncclCommCuDevice reports
  const bool blocking;  ///< config->blocking; inherited by ncclCommSplit without a config

  /// Record the result of Comm::create. Returns true when the handle was destroyed meanwhile and
  /// the caller (the init thread) must delete it.
  bool finishInit(ferry::Result<std::unique_ptr<ferry::Comm>> created);

  /// Run `body` on the Comm as one call of entry point `fn`: enter, wait for init, serialize with
  /// other calls, record a sticky error. The Outcome knows whether an abort came from this rank.
  template <typename Body>
  ferry::nccl::Outcome call(const char* fn, Body&& body) {
    ferry::Status st = enter(fn);
    if (!st.isOk()) return st;
    Leave leave{this};
    st = waitReady(fn);
    if (!st.isOk()) return ferry::nccl::Outcome(st, abortedHere());
    {
      std::lock_guard<std::mutex> op(opMutex_);
      st = body(*comm_);
      if (!st.isOk()) noteFailure();
    }
    return ferry::nccl::Outcome(st, abortedHere());
  }

  /// Abort the Comm's calls in flight (they return kAborted) without closing the handle: what
  /// ncclCommShrink's NCCL_SHRINK_ABORT does first. Thread-safe, takes no call lock.
  void abortCalls(const std::string& reason);
  /// ncclCommGetAsyncError: kInProgress while initializing, else the sticky error or ok.
  ferry::Status asyncStatus();
  /// Wait for a running init to finish (for ncclGroupEnd of blocking inits); returns its status.
  ferry::Status waitInit();
  /// Later calls fail with ncclInvalidUsage (ncclCommFinalize).
  ferry::Status finalize(const char* fn);
  /// ncclCommRevoke: abort the calls in flight and refuse every later call but ncclCommShrink (and
  /// destroy/abort). The async error reads ncclInProgress until the aborted calls have returned.
  ferry::Status revoke(const char* fn);
  /// ncclCommDestroy (abort = false) or ncclCommAbort (abort = true). Frees `c` or hands it to its
  /// init thread; `c` must not be used afterwards.
  static ferry::Status close(ncclComm* c, bool abort);

  ferry::nccl::RedOpTable redOps;
  ferry::nccl::Registrations registrations;

 private:
  enum class State { kInitializing, kReady, kFailed, kFinalized };
  struct Leave {
    ncclComm* c;
    ~Leave() { c->leave(); }
  };

  ferry::Status enter(const char* fn);
  void leave();
  ferry::Status waitReady(const char* fn);
  void noteFailure();  // call with opMutex_ held
  bool abortedHere();

  std::mutex mu_;  // guards everything below except comm_'s use
  std::condition_variable cv_;
  State state_ = State::kInitializing;
  bool closing_ = false;
  bool abortedHere_ = false;
  bool revoked_ = false;
  bool abandoned_ = false;  // destroyed during init: the init thread deletes the handle
  int inflight_ = 0;
  ferry::Status error_;  // init failure or sticky error of the Comm
  std::mutex opMutex_;   // one call at a time on comm_
  std::unique_ptr<ferry::Comm> comm_;
};
