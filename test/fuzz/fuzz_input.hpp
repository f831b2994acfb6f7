// Helpers shared by the libFuzzer harnesses: reading typed values off the fuzzer's bytes, and the
// process setup every harness wants (logs written, at full verbosity, to /dev/null).
//
// A harness must never read past the input, so every getter returns a default once the bytes run
// out; FERRY_FUZZ_CHECK is the harnesses' assert, and stays on in every build type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

/// Abort (a crash libFuzzer records with its input) when an invariant of the code under test fails.
#define FERRY_FUZZ_CHECK(cond)                                                               \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace ferry::fuzz {

/// Consumes the fuzzer's input front to back.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - at_; }
  bool empty() const { return at_ == size_; }
  uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
  uint32_t u32() { return uint32_t{u16()} << 16 | u16(); }
  uint64_t u64() { return uint64_t{u32()} << 32 | u32(); }
  /// Up to `n` bytes (fewer at the end of the input).
  std::vector<uint8_t> bytes(size_t n) {
    n = n < remaining() ? n : remaining();
    std::vector<uint8_t> out(data_ + at_, data_ + at_ + n);
    at_ += n;
    return out;
  }
  std::vector<uint8_t> rest() { return bytes(remaining()); }
  /// Bytes up to (not including) the next `stop` byte, which is consumed.
  std::string until(uint8_t stop) {
    std::string s;
    while (!empty()) {
      uint8_t c = u8();
      if (c == stop) break;
      s.push_back(static_cast<char>(c));
    }
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

/// Every harness calls this from LLVMFuzzerInitialize: ferry's logs at TRACE (so every message's
/// formatting runs) into /dev/null (so the fuzzer's output stays readable and fast). Must run
/// before anything reads the configuration.
inline void quietLogs() {
  ::setenv("FERRY_DEBUG", "TRACE", 1);
  ::setenv("FERRY_DEBUG_SUBSYS", "ALL", 1);
  ::setenv("FERRY_DEBUG_FILE", "/dev/null", 1);
}

}  // namespace ferry::fuzz
