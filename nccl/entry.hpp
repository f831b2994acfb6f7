// The edge between the C ABI and ferry: how every nccl* entry point runs its body.
//
// Each entry point is written as `extern "C" ncclResult_t pncclX(...) { return entry("ncclX", [&] {
// ... return Status; }); }` followed by FERRY_NCCL_ALIAS(ncclX). entry() catches every exception,
// maps ferry's ErrorCode to ncclResult_t and keeps the message as this thread's last error, which
// ncclGetLastError returns. Like NCCL's library, the pnccl* name is the definition and the nccl*
// name a weak alias of it, so a profiling library can define nccl* and forward to pnccl*.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "ferry/nccl.h"
#include "ferry/status.hpp"

/// Define `name` as a weak alias of `p##name` (same address, same signature).
#define FERRY_NCCL_ALIAS(name) extern "C" __attribute__((weak, alias("p" #name))) decltype(p##name) name;

namespace ferry::nccl {

/// The integer a C caller passed for an enum parameter. C allows any int there, while a C++ enum's
/// valid values stop at its enumerators' bit width: read the bits as int before checking them.
template <typename Enum>
int rawEnum(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &value, sizeof v);
  return v;
}

/// ncclResult_t for a ferry status. `abortedHere` tells a local ncclCommAbort (invalid usage of a
/// communicator the application itself aborted) from an abort reported by a peer (remote error).
ncclResult_t toResult(const Status& status, bool abortedHere = false);

/// Remember `message` as this thread's last error (what ncclGetLastError returns).
void setLastError(const std::string& message);
/// This thread's last error ("" when none).
const std::string& lastError();

/// Whether the application chose a log level (FERRY_DEBUG or NCCL_DEBUG set). When it did not, the
/// library is silent, as NCCL's is, except for one WARN line per error an entry point returns.
bool logLevelChosen();

/// Record a failed call: log it at WARN, keep its message as the last error, return its code.
ncclResult_t fail(const char* fn, const Status& status, ncclResult_t code);

/// An error Status whose message starts with the entry point's name.
Status argError(const char* fn, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Status usageError(const char* fn, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Outcome of an entry point's body: a Status, plus the code to return when it is not a plain
/// mapping (ncclInProgress, or an abort that happened on this rank).
struct Outcome {
  Status status;
  ncclResult_t code = ncclSuccess;  ///< used when status is ok (ncclSuccess or ncclInProgress)
  bool abortedHere = false;
  Outcome(Status s) : status(std::move(s)) {}  // NOLINT: implicit by design
  Outcome(Status s, bool aborted) : status(std::move(s)), abortedHere(aborted) {}
  static Outcome inProgress() {
    Outcome o{Status::ok()};
    o.code = ncclInProgress;
    return o;
  }
};

/// Run `body` (returning Outcome or Status) as the entry point `fn`: nothing escapes.
template <typename Body>
ncclResult_t entry(const char* fn, Body&& body) noexcept {
  try {
    Outcome o = body();
    if (o.status.isOk()) return o.code;
    return fail(fn, o.status, toResult(o.status, o.abortedHere));
  } catch (const std::bad_alloc&) {
    return fail(fn, Status(ErrorCode::kSystemError, std::string(fn) + ": out of memory"), ncclSystemError);
  } catch (const std::exception& e) {
    return fail(fn, Status(ErrorCode::kInternalError, std::string(fn) + ": internal error: " + e.what()),
                ncclInternalError);
  } catch (...) {
    return fail(fn, Status(ErrorCode::kInternalError, std::string(fn) + ": internal error (unknown exception)"),
                ncclInternalError);
  }
}

}  // namespace ferry::nccl
