// Shared pieces of the transport conformance suite: which transport this run covers, message
// contents with a closed form, and checks on a finished request.
//
// Every message's bytes derive from a seed (sender, receiver, tag, sequence number), so a receiver
// knows exactly what it should hold and a message delivered to the wrong receive, out of order or
// partly overwritten shows up as a named byte.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test/transports/rank_harness.hpp"

namespace ferry::test {

/// The transport this run of the suite covers, and what its probe found.
const std::string& transportUnderTest();
const TransportProbe& probeUnderTest();
/// Set once by main(), before any test runs: probes `name` in a process of its own.
const TransportProbe& setTransportUnderTest(const std::string& name);

/// Seed of the message `seq` from `from` to `to` on `tag`.
inline uint64_t seedOf(int from, int to, uint64_t tag, uint64_t seq) {
  return (uint64_t(from + 1) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(to + 1) * 0xC2B2AE3D27D4EB4Full) ^
         (tag * 0x165667B19E3779F9ull) ^ (seq * 0xD6E8FEB86659FD93ull);
}

/// Byte i of the message with `seed`: a mix of both, so shifted or swapped data never matches.
inline uint8_t patternByte(uint64_t seed, size_t i) {
  uint64_t x = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return uint8_t(x >> 56);
}

inline void fillPattern(void* buf, size_t bytes, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < bytes; ++i) p[i] = patternByte(seed, i);
}

/// "" when `buf` holds the message with `seed`, else the first wrong byte, named with `what`.
inline std::string checkPattern(const void* buf, size_t bytes, uint64_t seed, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != patternByte(seed, i)) {
      return what + ": byte " + std::to_string(i) + " of " + std::to_string(bytes) + " is " + std::to_string(p[i]) +
             ", expected " + std::to_string(patternByte(seed, i));
    }
  }
  return "";
}

/// "" when bytes [from, to) of `buf` all hold `fill` (a canary past the posted size).
inline std::string checkUntouched(const void* buf, size_t from, size_t to, uint8_t fill, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = from; i < to; ++i) {
    if (p[i] != fill) return what + ": byte " + std::to_string(i) + " past the message was overwritten";
  }
  return "";
}

/// "" when a receive completed with `bytes` from `source` on `tag`, else what differs.
std::string checkReceived(const transport::Request& r, int source, uint64_t tag, size_t bytes, const std::string& what);
/// "" when a send completed.
std::string checkSent(const transport::Request& r, const std::string& what);

/// Fork `n` ranks over the transport under test and check that every rank exits with its expected
/// code (0 unless `expected` says otherwise). Returns false when every rank skipped (exit 77).
bool runAndCheck(int n, const TransportBody& body, double timeoutSeconds = 40, const std::vector<int>& expected = {});

}  // namespace ferry::test
