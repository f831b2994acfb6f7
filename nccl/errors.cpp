// Status codes at the C ABI: ferry's ErrorCode -> ncclResult_t, the thread's last error, and the
// ncclGetErrorString / ncclGetLastError entry points.
//
// ferry's codes mirror ncclResult_t's meanings one to one up to kInProgress. The three that NCCL
// 2.21 has no code for map onto the nearest meaning: a deadline that passed waited for a peer
// (remote error), ranks that called different collectives misused the API (invalid usage), and an
// aborted communicator is invalid usage on the rank that aborted it but a remote error on the
// ranks that learned of it from that rank.
#include <cstdarg>
#include <cstdio>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"
#include "nccl/entry.hpp"

namespace ferry::nccl {
namespace {

thread_local std::string tLastError;

const char* resultName(ncclResult_t code) {
  static const char* const kNames[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                       "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                       "ncclRemoteError",   "ncclInProgress"};
  return code >= 0 && code < ncclNumResults ? kNames[code] : "unknown result";
}

Status formatError(ErrorCode code, const char* fn, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  return Status(code, std::string(fn) + ": " + buf);
}

}  // namespace

ncclResult_t toResult(const Status& status, bool abortedHere) {
  switch (status.code()) {
    case ErrorCode::kOk: return ncclSuccess;
    case ErrorCode::kUnhandledCudaError: return ncclUnhandledCudaError;
    case ErrorCode::kSystemError: return ncclSystemError;
    case ErrorCode::kInternalError: return ncclInternalError;
    case ErrorCode::kInvalidArgument: return ncclInvalidArgument;
    case ErrorCode::kInvalidUsage: return ncclInvalidUsage;
    case ErrorCode::kRemoteError: return ncclRemoteError;
    case ErrorCode::kInProgress: return ncclInProgress;
    case ErrorCode::kTimeout: return ncclRemoteError;
    case ErrorCode::kMismatch: return ncclInvalidUsage;
    case ErrorCode::kAborted: return abortedHere ? ncclInvalidUsage : ncclRemoteError;
  }
  return ncclInternalError;
}

void setLastError(const std::string& message) { tLastError = message; }

const std::string& lastError() { return tLastError; }

ncclResult_t fail(const char* fn, const Status& status, ncclResult_t code) {
  // Messages from ferry's C++ API name their own operation; prefix the entry point when missing.
  const std::string& m = status.message();
  std::string text = m.rfind(fn, 0) == 0 ? m : std::string(fn) + ": " + m;
  // Silent by default, but a returned error is always worth its one line (unless NCCL_DEBUG=NONE).
  if (!logLevelChosen() || log::enabled(log::Level::kWarn, log::kInit)) {
    log::write(log::Level::kWarn, log::kInit, "%s [%s]", text.c_str(), resultName(code));
  }
  setLastError(text);
  return code;
}

Status argError(const char* fn, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status s = formatError(ErrorCode::kInvalidArgument, fn, fmt, ap);
  va_end(ap);
  return s;
}

Status usageError(const char* fn, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Status s = formatError(ErrorCode::kInvalidUsage, fn, fmt, ap);
  va_end(ap);
  return s;
}

}  // namespace ferry::nccl

using namespace ferry::nccl;

extern "C" const char* pncclGetErrorString(ncclResult_t result) {
  switch (rawEnum(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (a CUDA call failed; see ncclGetLastError)";
    case ncclSystemError:
      return "unhandled system error (a system call or outside library failed; see ncclGetLastError)";
    case ncclInternalError: return "internal error (a bug in ferry; please report it with ncclGetLastError's text)";
    case ncclInvalidArgument: return "invalid argument (see ncclGetLastError for which one)";
    case ncclInvalidUsage: return "invalid usage (see ncclGetLastError for what was wrong)";
    case ncclRemoteError: return "remote process exited, failed or did not answer in time";
    case ncclInProgress: return "operation in progress";
  }
  return "unknown result code";
}
FERRY_NCCL_ALIAS(ncclGetErrorString)

extern "C" const char* pncclGetLastError(ncclComm_t comm) {
  try {
    // A failure of a non-blocking init happened on another thread: report it here too.
    if (lastError().empty() && comm != nullptr) {
      ferry::Status s = comm->asyncStatus();
      if (!s.isOk() && s.code() != ferry::ErrorCode::kInProgress) setLastError(s.message());
    }
    return lastError().c_str();
  } catch (...) {
    return "ncclGetLastError: internal error";
  }
}
FERRY_NCCL_ALIAS(ncclGetLastError)
