// kernels::copyStreaming against memcpy: every length around the 4 KiB cut-over and the 64-byte
// lines, every misalignment of source and destination within a line, and a guard on both sides
// of the destination that must stay untouched (the aligned head and the tail must not spill).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/host/copy.hpp"

namespace ferry::kernels::test {
namespace {

constexpr unsigned char kGuard = 0x5A;

TEST_CASE("copyStreaming equals memcpy at every length and alignment", "[kernels][copy]") {
  constexpr size_t kLengths[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 4096 + 63, 8191, 65536 + 17, (1u << 20) + 5};
  constexpr size_t kMax = (1u << 20) + 5;
  std::mt19937_64 rng(42);
  std::vector<unsigned char> src(kMax + 128);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  std::vector<unsigned char> dst(kMax + 256);
  for (size_t len : kLengths) {
    for (size_t so : {size_t{0}, size_t{1}, size_t{17}, size_t{63}}) {
      for (size_t dOff : {size_t{0}, size_t{8}, size_t{33}, size_t{63}}) {
        // dst + 64 + dOff: at least 64 guard bytes before the copy, and after it.
        std::memset(dst.data(), kGuard, dst.size());
        unsigned char* d = dst.data() + 64 + dOff;
        copyStreaming(d, src.data() + so, len);
        INFO("length " << len << ", source offset " << so << ", destination offset " << dOff);
        REQUIRE(std::memcmp(d, src.data() + so, len) == 0);
        for (unsigned char* g = dst.data(); g < d; ++g) REQUIRE(*g == kGuard);
        for (unsigned char* g = d + len; g < dst.data() + dst.size(); ++g) REQUIRE(*g == kGuard);
      }
    }
  }
}

}  // namespace
}  // namespace ferry::kernels::test
