// A size on the command line of the standalone bench tools (memcpy-rate, host-costs): a number
// with an optional K, M or G (powers of 1024), above 0 and at most 10^12 bytes.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace ferry::bench {

inline bool parseSizeArg(const char* text, size_t* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double unit = 1;
  if (*end == 'K' || *end == 'k') unit = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, ++end;
  if (end == text || *end != '\0' || !(v > 0) || v * unit > 1e12) return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

}  // namespace ferry::bench
