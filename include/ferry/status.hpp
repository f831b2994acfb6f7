// Status and Result: the one error type of ferry's C++ API.
//
// Every fallible call returns a Status (or a Result<T> holding a value or a Status). Codes mirror
// ncclResult_t's meanings so the NCCL-compatible C API maps them one to one; the message is a full
// sentence naming the argument, the rank and the expected value where they apply.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ferry {

/// What went wrong, at the granularity a caller can act on.
enum class ErrorCode : int {
  kOk = 0,
  kUnhandledCudaError = 1,  ///< a CUDA call failed
  kSystemError = 2,         ///< a system call or library outside ferry failed
  kInternalError = 3,       ///< a bug or broken invariant inside ferry
  kInvalidArgument = 4,     ///< the caller passed a value ferry cannot accept
  kInvalidUsage = 5,        ///< a valid value used at the wrong time or in the wrong way
  kRemoteError = 6,         ///< a peer failed: it died, aborted or reported an error
  kInProgress = 7,          ///< a non-blocking operation has not finished
  kTimeout = 8,             ///< a wait passed its deadline
  kMismatch = 9,            ///< ranks called different collectives or arguments
  kAborted = 10,            ///< the communicator was aborted
};

/// Short stable name of a code ("invalid argument").
const char* errorCodeName(ErrorCode code);

/// The result of an operation without a value. Ok is one null pointer: creating, moving,
/// testing and destroying it costs a few instructions, which matters because every layer of a
/// collective returns one (a small call passes a dozen of them up the stack). An error holds its
/// code and message on the heap.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message)
      : rep_(code == ErrorCode::kOk ? nullptr : new Rep{code, std::move(message)}) {}
  Status(const Status& o) : rep_(o.rep_ != nullptr ? new Rep(*o.rep_) : nullptr) {}
  Status(Status&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  Status& operator=(const Status& o) {
    if (this != &o) {
      Rep* copy = o.rep_ != nullptr ? new Rep(*o.rep_) : nullptr;
      delete rep_;
      rep_ = copy;
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    if (this != &o) {
      delete rep_;
      rep_ = o.rep_;
      o.rep_ = nullptr;
    }
    return *this;
  }
  ~Status() { delete rep_; }

  static Status ok() { return Status(); }

  bool isOk() const { return rep_ == nullptr; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return rep_ != nullptr ? rep_->code : ErrorCode::kOk; }
  /// The sentence saying what went wrong; empty when ok.
  const std::string& message() const {
    static const std::string kEmpty;
    return rep_ != nullptr ? rep_->message : kEmpty;
  }
  /// "timeout: rank 2: ..." style one-line rendering.
  std::string toString() const;
  /// The status itself, so FERRY_TRY accepts a Status and a Result alike.
  const Status& status() const { return *this; }

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
  };
  Rep* rep_ = nullptr;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool isOk() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return isOk(); }
  Status status() const { return isOk() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

/// Build an error Status from printf-style arguments.
Status makeError(ErrorCode code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace ferry

/// The one propagation macro: evaluate a Status or Result and return its Status from the enclosing
/// function when it is an error. For a Result the value stays in the variable for use afterwards.
#define FERRY_TRY(expr)                     \
  do {                                      \
    const auto& ferry_try_result_ = (expr); \
    if (!ferry_try_result_.isOk()) {        \
      return ferry_try_result_.status();    \
    }                                       \
  } while (0)
