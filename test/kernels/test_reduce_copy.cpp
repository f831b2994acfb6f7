// reduceCopy and the LL pack functions under the SIMT emulation, bit for bit against the host kernels.
//
// The device primitive promises the host kernels' arithmetic (reduce_copy.cuh): an nSrcs-way
// reduction equals host reduce() applied left to right, avg's last step equals sumDivide (or divide
// for one source). The sweep runs the emulated kernel (a few blocks of a few threads, so that
// several threads and blocks share the vectors, the head and the tail) over every type and op,
// 1..4 sources, 1..3 destinations, lengths around the 16-byte vector, three layouts (aligned,
// misaligned by one element, in place), and compares with that chain of host calls.
//
// Inputs are random bit patterns (every float8 pattern occurs), so NaN, infinity, subnormals,
// saturation and integer wrap-around are all exercised. Sum, prod and avg never see two NaNs in one
// element: which payload x86 keeps then depends on operand order, which the contract leaves open.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/reduce_copy.cuh"
#include "kernels/cuda/reduce_copy_kernel.hpp"
#include "kernels/host/reduce.hpp"

namespace ferry::kernels::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 8, 15, 16, 17, 1000, 4099};
constexpr RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                          RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};
constexpr uint32_t kAvgDivisor = 3;

bool isNanBits(DataType type, const unsigned char* p) {
  uint64_t b = 0;
  std::memcpy(&b, p, dataTypeSize(type));
  switch (type) {
    case DataType::kFloat16: return (b & 0x7FFF) > 0x7C00;
    case DataType::kBfloat16: return (b & 0x7FFF) > 0x7F80;
    case DataType::kFloat32: return (b & 0x7FFFFFFF) > 0x7F800000;
    case DataType::kFloat64: return (b & 0x7FFFFFFFFFFFFFFF) > 0x7FF0000000000000;
    case DataType::kFloat8e4m3: return (b & 0x7F) == 0x7F;
    case DataType::kFloat8e5m2: return (b & 0x7F) > 0x7C;
    default: return false;
  }
}

/// nSrcs random buffers of n elements; without NaN pairs in one element unless `nanPairs`.
std::vector<std::vector<unsigned char>> makeSources(DataType type, int nSrcs, size_t n, bool nanPairs,
                                                    std::mt19937_64& rng) {
  const size_t es = dataTypeSize(type);
  std::vector<std::vector<unsigned char>> srcs(nSrcs, std::vector<unsigned char>(n * es));
  for (auto& s : srcs) {
    for (auto& byte : s) byte = static_cast<unsigned char>(rng());
  }
  if (!nanPairs) {
    for (size_t i = 0; i < n; ++i) {
      bool seen = false;
      for (auto& s : srcs) {
        if (!isNanBits(type, &s[i * es])) continue;
        if (seen) std::memset(&s[i * es], 0, es);
        seen = true;
      }
    }
  }
  return srcs;
}

/// The host kernels' chain: want = s0 op s1 op ... with the last step fused with the divide.
std::vector<unsigned char> hostChain(DataType type, RedOp op, const std::vector<std::vector<unsigned char>>& srcs,
                                     size_t n, uint32_t divisor) {
  std::vector<unsigned char> want = srcs[0];
  const int nSrcs = static_cast<int>(srcs.size());
  for (int k = 1; k < nSrcs; ++k) {
    if (divisor != 0 && k == nSrcs - 1) sumDivide(type, want.data(), want.data(), srcs[k].data(), n, divisor);
    else reduce(type, op == RedOp::kAvg ? RedOp::kSum : op, want.data(), want.data(), srcs[k].data(), n);
  }
  if (nSrcs == 1 && divisor != 0) divide(type, want.data(), want.data(), n, divisor);
  return want;
}

/// 16-byte aligned storage with room for an offset.
struct Arena {
  explicit Arena(size_t bytes) : words((bytes + 64) / 16 + 1) {}
  unsigned char* at(size_t offset) { return reinterpret_cast<unsigned char*>(words.data()) + offset; }
  std::vector<uint4> words;
};

TEST_CASE("emulated reduceCopy equals the host kernels for every type, op, fan-in and fan-out") {
  std::mt19937_64 rng(2026);
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const size_t es = dataTypeSize(type);
    for (RedOp op : kOps) {
      if (!redOpDefinedFor(op, type)) continue;  // the bitwise ops: integer types only
      const uint32_t divisor = op == RedOp::kAvg ? kAvgDivisor : 0;
      for (int nSrcs = 1; nSrcs <= 4; ++nSrcs) {
        for (size_t c = 0; c < std::size(kCounts); ++c) {
          const size_t n = kCounts[c];
          const int nDsts = 1 + static_cast<int>((nSrcs + c) % 3);
          const auto srcs = makeSources(type, nSrcs, n, op == RedOp::kMax || op == RedOp::kMin, rng);
          const std::vector<unsigned char> want = hostChain(type, op, srcs, n, divisor);
          for (int layout = 0; layout < 3; ++layout) {  // 0 aligned, 1 misaligned by one element, 2 in place
            INFO(dataTypeName(type) << " " << redOpName(op) << " nSrcs " << nSrcs << " nDsts " << nDsts << " n " << n
                                    << " layout " << layout);
            const size_t shift = layout == 1 ? es : 0;
            std::vector<Arena> srcMem, dstMem;
            std::vector<const void*> srcPtrs;
            std::vector<void*> dstPtrs;
            for (int k = 0; k < nSrcs; ++k) {
              srcMem.emplace_back(n * es);
              if (n != 0) std::memcpy(srcMem.back().at(shift), srcs[k].data(), n * es);
            }
            for (int k = 0; k < nSrcs; ++k) srcPtrs.push_back(srcMem[k].at(shift));
            for (int d = 0; d < nDsts; ++d) dstMem.emplace_back(n * es);
            for (int d = 0; d < nDsts; ++d) {
              // In place: the first destination is the first source, the second one the last source.
              if (layout == 2 && d == 0) dstPtrs.push_back(srcMem[0].at(0));
              else if (layout == 2 && d == 1) dstPtrs.push_back(srcMem[nSrcs - 1].at(0));
              else dstPtrs.push_back(dstMem[d].at(shift));
            }
            const int threads = layout == 0 ? 4 : layout == 1 ? 8 : 32;
            REQUIRE(gpu::launchReduceCopy(type, op, nSrcs, srcPtrs.data(), nDsts, dstPtrs.data(), n, divisor, 3,
                                          threads, nullptr) == 0);
            for (int d = 0; d < nDsts; ++d) {
              INFO("destination " << d);
              CHECK((n == 0 || std::memcmp(dstPtrs[d], want.data(), n * es) == 0));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("emulated copyBytes copies to every destination at any alignment") {
  std::mt19937_64 rng(5);
  for (size_t bytes : {0, 1, 15, 16, 17, 1000, 4099}) {
    for (size_t offset : {0, 1, 3}) {
      for (int nDsts = 1; nDsts <= 3; ++nDsts) {
        Arena src(bytes), d0(bytes), d1(bytes), d2(bytes);
        for (size_t i = 0; i < bytes; ++i) *src.at(offset + i) = static_cast<unsigned char>(rng());
        // The last destination is misaligned by one more byte when nDsts == 3 (the scalar path).
        void* dsts[3] = {d0.at(offset), d1.at(offset), d2.at(offset + (nDsts == 3 ? 1 : 0))};
        const void* from = src.at(offset);
        simt::launch(dim3(1), dim3(8), [&] { gpu::copyBytes(nDsts, dsts, from, bytes); });
        for (int d = 0; d < nDsts; ++d) {
          INFO("bytes " << bytes << " offset " << offset << " destination " << d << " of " << nDsts);
          CHECK((bytes == 0 || std::memcmp(dsts[d], from, bytes) == 0));
        }
      }
    }
  }
}

TEST_CASE("invalid launch arguments are refused") {
  const void* s[1] = {nullptr};
  void* d[1] = {nullptr};
  CHECK(gpu::launchReduceCopy(DataType::kFloat32, RedOp::kSum, 0, s, 1, d, 0, 0, 1, 1, nullptr) != 0);
  CHECK(gpu::launchReduceCopy(DataType::kFloat32, RedOp::kSum, 9, s, 1, d, 0, 0, 1, 1, nullptr) != 0);
  CHECK(gpu::launchReduceCopy(static_cast<DataType>(12), RedOp::kSum, 1, s, 1, d, 0, 0, 1, 1, nullptr) != 0);
  CHECK(gpu::launchReduceCopy(DataType::kFloat32, RedOp::kSum, 1, s, 1, d, 0, 0, 1, 1024, nullptr) != 0);
  for (RedOp op : {RedOp::kBand, RedOp::kBor, RedOp::kBxor}) {  // integer types only
    CHECK(gpu::launchReduceCopy(DataType::kFloat32, op, 1, s, 1, d, 0, 0, 1, 1, nullptr) != 0);
    CHECK(gpu::launchReduceCopy(DataType::kBfloat16, op, 1, s, 1, d, 0, 0, 1, 1, nullptr) != 0);
    CHECK(gpu::launchReduceCopy(DataType::kInt64, op, 1, s, 1, d, 0, 0, 1, 1, nullptr) == 0);
  }
}

/// One call of the pack function for storage type T, to compare with the host kernels.
struct PackCall {
  RedOp op;
  int which;  // 0 applyPack8, 1 applyPack8Divide, 2 dividePack8
  uint64_t a, b;
  uint32_t divisor;
  uint64_t result = 0;
  template <typename T, typename Op>
  void operator()() {
    if (which == 0) result = gpu::applyPack8<T, Op>(a, b);
    if (which == 1) result = gpu::applyPack8Divide<T, Op>(a, b, divisor);
    if (which == 2) result = gpu::dividePack8<T>(a, divisor);
  }
};

TEST_CASE("LL pack arithmetic equals the host kernels") {
  std::mt19937_64 rng(88);
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType type = static_cast<DataType>(t);
    const size_t es = dataTypeSize(type), n = 8 / es;
    for (RedOp op : kOps) {
      if (op == RedOp::kAvg || !redOpDefinedFor(op, type)) continue;  // avg: the sum's divide calls below
      for (int iter = 0; iter < 2000; ++iter) {
        uint64_t a = rng(), b = rng();
        for (size_t i = 0; i < n; ++i) {  // no NaN pairs for sum/prod (see the top of the file)
          const bool minmax = op == RedOp::kMax || op == RedOp::kMin;
          auto* pa = reinterpret_cast<unsigned char*>(&a) + i * es;
          auto* pb = reinterpret_cast<unsigned char*>(&b) + i * es;
          if (!minmax && isNanBits(type, pa) && isNanBits(type, pb)) std::memset(pb, 0, es);
        }
        const uint32_t divisor = 1 + static_cast<uint32_t>(rng() % 300);
        for (int which = 0; which < 3; ++which) {
          if (which != 0 && op != RedOp::kSum) continue;
          PackCall call{op, which, a, b, divisor};
          gpu::dispatchTypeOp(type, op, call);
          uint64_t want = 0;
          if (which == 0) reduce(type, op, &want, &a, &b, n);
          if (which == 1) sumDivide(type, &want, &a, &b, n, divisor);
          if (which == 2) divide(type, &want, &a, n, divisor);
          INFO(dataTypeName(type) << " " << redOpName(op) << " which " << which << " a " << a << " b " << b
                                  << " divisor " << divisor);
          REQUIRE(call.result == want);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry::kernels::test
