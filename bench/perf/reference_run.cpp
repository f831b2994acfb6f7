// Digests of checked outputs. See reference_run.hpp for the file and what a mismatch names.
#include "bench/perf/reference_run.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "bench/perf/check_values.hpp"
#include "bench/perf/dtypes.hpp"

namespace ferry::perf {
namespace {

// 64 bits over `bytes` bytes, eight at a time; the length enters first, so chunks of different
// lengths never collide by their padding.
uint64_t chunkHash(const uint8_t* p, size_t bytes) {
  uint64_t h = mixBits(0x9E3779B97F4A7C15ull ^ bytes);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mixBits(h ^ w);
  }
  if (i < bytes) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    h = mixBits(h ^ w ^ 0xFFull << 56);
  }
  return h;
}

std::vector<uint64_t> hashes(const uint8_t* p, size_t count, size_t es) {
  std::vector<uint64_t> out;
  for (size_t first = 0; first < count; first += ReferenceRun::kChunkElems) {
    const size_t n = std::min(ReferenceRun::kChunkElems, count - first);
    out.push_back(chunkHash(p + first * es, n * es));
  }
  return out;
}

// Element i's bits as a number (little-endian), printed as 0x with two digits a byte.
std::string elementBits(const uint8_t* p, size_t i, size_t es) {
  uint64_t v = 0;
  std::memcpy(&v, p + i * es, std::min<size_t>(es, 8));
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", static_cast<int>(2 * es), static_cast<unsigned long long>(v));
  return buf;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

void fillSpreadInput(DataType type, int rank, uint64_t seed, void* data, size_t count) {
  const TypeInfo& t = typeInfo(type);
  // float32/64 and bfloat16: 2^-20 .. 2^20; float16 and float8: a third of the exponent range.
  const int binades = std::min(20, (1 << (t.exponentBits - 1)) / 3);
  const EncodeFn encode = encoder(type);
  const uint64_t base = mixBits(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) + 1);
  auto* out = static_cast<uint8_t*>(data);
  for (size_t g = 0; g < count; ++g) {
    const uint64_t h = mixBits(base ^ mixBits(g));
    const int e = static_cast<int>(h % static_cast<uint64_t>(2 * binades + 1)) - binades;
    const double significand = 1.0 + static_cast<double>((h >> 16) & 0xFFFFFF) / 16777216.0;
    const uint64_t bits = encode(std::ldexp((h >> 63) != 0 ? -significand : significand, e));
    std::memcpy(out + g * t.size, &bits, t.size);
  }
}

Result<ReferenceRun> ReferenceRun::open(const std::string& path, int rank, bool full) {
  ReferenceRun run;
  run.path_ = path + ".rank" + std::to_string(rank);
  run.full_ = full;
  std::error_code ec;
  if (!std::filesystem::exists(run.path_, ec)) {
    const std::string tmp = run.path_ + ".tmp";
    run.out_ = std::fopen(tmp.c_str(), "w");
    if (run.out_ == nullptr) {
      return Status(ErrorCode::kInvalidArgument, "--reference-run " + path + ": rank " + std::to_string(rank) +
                                                     " cannot create " + tmp + ": " + std::strerror(errno));
    }
    return run;
  }
  std::ifstream in(run.path_);
  if (!in) {
    return Status(ErrorCode::kInvalidArgument,
                  "--reference-run " + path + ": rank " + std::to_string(rank) + " cannot read " + run.path_);
  }
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) {
      return Status(ErrorCode::kInvalidArgument, "--reference-run " + path + ": line " + std::to_string(number) +
                                                     " of " + run.path_ +
                                                     " is not '<key> <elements> <chunk hashes>' (expected a file that "
                                                     "--reference-run wrote)");
    }
    run.expected_[line.substr(0, space)] = line.substr(space + 1);
  }
  return run;
}

ReferenceRun::ReferenceRun(ReferenceRun&& other) noexcept
    : path_(std::move(other.path_)), full_(other.full_), out_(other.out_), expected_(std::move(other.expected_)) {
  other.out_ = nullptr;
}

ReferenceRun::~ReferenceRun() {
  if (out_ != nullptr) {  // not finished: the run failed, so it leaves no reference
    std::fclose(out_);
    std::remove((path_ + ".tmp").c_str());
  }
}

uint64_t ReferenceRun::check(const std::string& key, const void* out, size_t count, size_t es, std::string& message) {
  const auto* p = static_cast<const uint8_t*>(out);
  const std::vector<uint64_t> got = hashes(p, count, es);
  if (recording()) {
    std::fprintf(out_, "%s %zu", key.c_str(), count);
    for (uint64_t h : got) std::fprintf(out_, " %016llx", static_cast<unsigned long long>(h));
    if (full_ || count * es <= kFullBytes) {
      std::fputs(" =", out_);
      for (size_t b = 0; b < count * es; ++b) std::fprintf(out_, "%s%02x", b == 0 ? " " : "", p[b]);
    }
    std::fputc('\n', out_);
    return 0;
  }
  auto it = expected_.find(key);
  if (it == expected_.end()) {
    message = key + ": not in " + path_ + " (a run with other flags recorded it?)";
    return 1;
  }
  std::istringstream line(it->second);
  size_t expectedCount = 0;
  line >> expectedCount;
  if (expectedCount != count) {
    message = key + ": " + std::to_string(count) + " elements where " + path_ + " has " + std::to_string(expectedCount);
    return 1;
  }
  std::vector<uint64_t> want;
  std::string word;
  std::string hex;
  while (line >> word) {
    if (word == "=") {
      line >> hex;
      break;
    }
    want.push_back(std::strtoull(word.c_str(), nullptr, 16));
  }
  size_t firstChunk = got.size(), chunks = 0;
  for (size_t c = 0; c < got.size(); ++c) {
    if (c < want.size() && want[c] == got[c]) continue;
    if (firstChunk == got.size()) firstChunk = c;
    ++chunks;
  }
  if (chunks == 0) return 0;
  if (hex.size() == 2 * count * es) {
    std::vector<uint8_t> bytes(count * es);
    for (size_t b = 0; b < bytes.size(); ++b) {
      bytes[b] = static_cast<uint8_t>(hexDigit(hex[2 * b]) * 16 + hexDigit(hex[2 * b + 1]));
    }
    size_t first = count, differing = 0;
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(&bytes[i * es], p + i * es, es) == 0) continue;
      if (first == count) first = i;
      ++differing;
    }
    if (differing > 0) {
      message = key + ": element " + std::to_string(first) + " of " + std::to_string(count) +
                " differs first (expected " + elementBits(bytes.data(), first, es) + ", got " +
                elementBits(p, first, es) + "); " + std::to_string(differing) + " elements differ";
      return differing;
    }
  }
  const size_t begin = firstChunk * kChunkElems, end = std::min(count, begin + kChunkElems) - 1;
  message = key + ": chunk " + std::to_string(firstChunk) + " (elements " + std::to_string(begin) + "-" +
            std::to_string(end) + " of " + std::to_string(count) + ") differs first; " + std::to_string(chunks) +
            " chunks of " + std::to_string(kChunkElems) +
            " differ (the file keeps hashes only: record with --reference-run-full to name the element)";
  return chunks;
}

Status ReferenceRun::finish() {
  if (out_ == nullptr) return Status::ok();
  const std::string tmp = path_ + ".tmp";
  const bool written = std::fflush(out_) == 0 && std::ferror(out_) == 0;
  std::fclose(out_);
  out_ = nullptr;
  if (!written || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status(ErrorCode::kSystemError, "--reference-run: cannot write " + path_ + ": " + std::strerror(err));
  }
  return Status::ok();
}

}  // namespace ferry::perf
