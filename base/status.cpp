#include "ferry/status.hpp"

#include <cstdarg>
#include <cstdio>

namespace ferry {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kUnhandledCudaError: return "unhandled CUDA error";
    case ErrorCode::kSystemError: return "system error";
    case ErrorCode::kInternalError: return "internal error";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidUsage: return "invalid usage";
    case ErrorCode::kRemoteError: return "remote error";
    case ErrorCode::kInProgress: return "in progress";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kMismatch: return "collective mismatch";
    case ErrorCode::kAborted: return "aborted";
  }
  return "unknown error";
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(errorCodeName(rep_->code)) + ": " + rep_->message;
}

Status makeError(ErrorCode code, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return Status(code, buf);
}

}  // namespace ferry
