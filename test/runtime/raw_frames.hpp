// Rendezvous frame headers written byte by byte, for tests that speak to a root the way a broken
// or hostile client would (runtime/bootstrap/wire.hpp has the real encoders, which only write
// valid frames): big-endian magic, type, two reserved bytes, payload length.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::test {

inline std::vector<uint8_t> rawFrameHeader(uint32_t magic, uint16_t type, uint32_t length) {
  std::vector<uint8_t> b;
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(magic >> s));
  b.push_back(static_cast<uint8_t>(type >> 8));
  b.push_back(static_cast<uint8_t>(type));
  b.push_back(0);
  b.push_back(0);
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(length >> s));
  return b;
}

}  // namespace ferry::test
