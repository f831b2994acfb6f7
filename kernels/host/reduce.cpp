// Dispatch of the host kernels: pick the widest instruction set once, then forward every call.
//
// Why a table pointer: the choice depends on the CPU, known only at run time, and must cost nothing
// per call. The active KernelTable is one atomic pointer; a call loads it (a plain load on x86),
// indexes by type and op, and makes one indirect call. The first call detects the CPU with
// __builtin_cpu_supports; setIsa() swaps the pointer (tests use it to run every instruction set).
//
// This file is compiled for baseline x86-64: nothing here may run instructions the CPU might lack.
#include "kernels/host/reduce.hpp"

#include <atomic>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/host/kernel_table.hpp"
#include "base/log.hpp"

namespace ferry::kernels {
namespace {

std::atomic<const KernelTable*> gTable{nullptr};

const KernelTable& tableFor(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512: return avx512KernelTable();
    case Isa::kAvx2: return avx2KernelTable();
    case Isa::kBaseline: break;
  }
#else
  (void)isa;
#endif
  return baselineKernelTable();
}

Isa bestIsa() {
  if (isaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (isaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBaseline;
}

/// The cold path of table(): detect, install (unless setIsa got there first), log once.
[[gnu::noinline]] const KernelTable* detectTable() {
  const KernelTable* best = &tableFor(bestIsa());
  const KernelTable* expected = nullptr;
  if (!gTable.compare_exchange_strong(expected, best, std::memory_order_acq_rel)) return expected;
  FERRY_INFO(log::kInit, "host reduction kernels: %s", isaName(best->isa));
  return best;
}

inline const KernelTable& table() {
  const KernelTable* t = gTable.load(std::memory_order_acquire);
  if (__builtin_expect(t == nullptr, 0)) t = detectTable();
  return *t;
}

inline bool typeOk(DataType type) { return static_cast<unsigned>(type) < static_cast<unsigned>(kNumDataTypes); }
inline bool opOk(RedOp op) { return static_cast<unsigned>(op) < static_cast<unsigned>(kNumRedOps); }

}  // namespace

void reduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  // A null entry: avg, or an op the type does not define (bitwise on floats).
  const ReduceFn fn = typeOk(type) && opOk(op) ? table().reduce[static_cast<int>(type)][static_cast<int>(op)] : nullptr;
  if (__builtin_expect(fn == nullptr, 0)) {
    // Collectives validate type and op before they get here; reaching this is a bug upstream.
    FERRY_WARN(log::kColl, "reduce kernel called with unsupported type %d / op %d; nothing done",
               static_cast<int>(type), static_cast<int>(op));
    return;
  }
  fn(dst, a, b, count);
}

void sumDivide(DataType type, void* dst, const void* a, const void* b, size_t count, uint32_t divisor) {
  if (__builtin_expect(!typeOk(type), 0)) {
    FERRY_WARN(log::kColl, "sumDivide kernel called with unsupported type %d; nothing done", static_cast<int>(type));
    return;
  }
  table().sumDivide[static_cast<int>(type)](dst, a, b, count, divisor);
}

void divide(DataType type, void* dst, const void* src, size_t count, uint32_t divisor) {
  if (__builtin_expect(!typeOk(type), 0)) {
    FERRY_WARN(log::kColl, "divide kernel called with unsupported type %d; nothing done", static_cast<int>(type));
    return;
  }
  table().divide[static_cast<int>(type)](dst, src, count, divisor);
}

Isa activeIsa() { return table().isa; }

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline: return "x86-64";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "invalid";
}

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29. Not __builtin_cpu_supports("f16c"): clang before 16 rejects that name.
static bool hasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

bool isaSupported(Isa isa) {
#if defined(__x86_64__)
  // Idempotent; needed when the first call comes from another object's static constructor.
  __builtin_cpu_init();
#endif
  switch (isa) {
    case Isa::kBaseline: return true;
#if defined(__x86_64__)
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && hasF16c() && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return isaSupported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    case Isa::kAvx2:
    case Isa::kAvx512: return false;
#endif
  }
  return false;
}

bool setIsa(Isa isa) {
  if (!isaSupported(isa)) return false;
  gTable.store(&tableFor(isa), std::memory_order_release);
  return true;
}

}  // namespace ferry::kernels
