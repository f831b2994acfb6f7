#include "base/call_check.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "ferry/types.hpp"

namespace ferry {
namespace {

enum class Root { kNone, kRoot, kPeer };
enum class Need { kAlways, kAtRoot, kNever };
// Where an in-place call's output starts relative to its input (NCCL's definitions):
// kSame: the same buffer; kRecvBlock: the input is this rank's block of the output (allGather);
// kSendBlock: the output is this rank's block of the input (reduceScatter).
enum class InPlace { kSame, kRecvBlock, kSendBlock };

struct Rule {
  bool reduces;
  Root root;
  bool sendPerRank;  // the send buffer holds count elements per rank
  bool recvPerRank;
  Need send;
  Need recv;
  InPlace inPlace;
};

// One row per CallKind, in its order (values from 1).
constexpr Rule kRules[] = {
    {true, Root::kNone, false, false, Need::kAlways, Need::kAlways, InPlace::kSame},       // allReduce
    {true, Root::kNone, true, false, Need::kAlways, Need::kAlways, InPlace::kSendBlock},   // reduceScatter
    {false, Root::kNone, false, true, Need::kAlways, Need::kAlways, InPlace::kRecvBlock},  // allGather
    {false, Root::kNone, true, true, Need::kAlways, Need::kAlways, InPlace::kSame},        // allToAll
    {false, Root::kRoot, false, false, Need::kAtRoot, Need::kAlways, InPlace::kSame},      // broadcast
    {true, Root::kRoot, false, false, Need::kAlways, Need::kAtRoot, InPlace::kSame},       // reduce
    {false, Root::kNone, false, false, Need::kNever, Need::kNever, InPlace::kSame},        // barrier
    {false, Root::kPeer, false, false, Need::kAlways, Need::kNever, InPlace::kSame},       // send
    {false, Root::kPeer, false, false, Need::kNever, Need::kAlways, InPlace::kSame},       // recv
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kNumCallKinds - 1);

const Rule& ruleOf(CallKind kind) { return kRules[static_cast<size_t>(kind) - 1]; }

// One past the highest address a buffer of this process can reach: the next power of two above
// every mapping (the stack sits at the top of the user address space), so 2^47 on x86-64 with
// four-level page tables. A range ending beyond it cannot be memory the caller owns.
uintptr_t addressCeiling() {
  static const uintptr_t ceiling = [] {
    uintptr_t top = 0;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find("[vsyscall]") != std::string::npos) continue;  // a fixed kernel page, not user memory
      uintptr_t from = 0, to = 0;
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &from, &to) == 2 && to > top) top = to;
    }
    if (top == 0) return std::numeric_limits<uintptr_t>::max();
    uintptr_t c = uintptr_t{1} << 40;
    while (c < top && c <= (std::numeric_limits<uintptr_t>::max() >> 1)) c <<= 1;
    return c;
  }();
  return ceiling;
}

// Read once when the library loads: checkCall() runs on every call.
const uintptr_t gCeiling = addressCeiling();

// Element sizes by type value, from the type table.
const auto gElementBytes = [] {
  std::array<uint8_t, kNumDataTypes> sizes{};
  for (int t = 0; t < kNumDataTypes; ++t) {
    sizes[static_cast<size_t>(t)] = static_cast<uint8_t>(dataTypeSize(static_cast<DataType>(t)));
  }
  return sizes;
}();

bool pageMapped(uintptr_t addr) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char resident = 0;
  return mincore(reinterpret_cast<void*>(addr & ~(page - 1)), 1, &resident) == 0 || errno != ENOMEM;
}

// Host buffers this large are probed (two system calls): moving them costs far more.
constexpr size_t kProbeBytes = size_t{1} << 20;

bool needs(Need n, bool isRoot) { return n == Need::kAlways || (n == Need::kAtRoot && isRoot); }

}  // namespace

namespace {

// The checks of explainCall() as one expression, without a message: every call runs it, so it
// builds nothing and leaves the page probes of large host buffers to explainCall().
bool plainlyValid(const Call& a, int rank, int size, const CheckOptions& o) {
  const Rule& rule = ruleOf(a.kind);
  if (static_cast<unsigned>(static_cast<int>(a.type)) >= static_cast<unsigned>(kNumDataTypes)) return false;
  if (rule.reduces && static_cast<unsigned>(static_cast<int>(a.op)) >= static_cast<unsigned>(kNumRedOps)) return false;
  if (rule.reduces && !redOpDefinedFor(a.op, a.type)) return false;
  if (rule.root != Root::kNone && static_cast<unsigned>(a.root) >= static_cast<unsigned>(size)) return false;
  if (rule.root == Root::kPeer && a.root == rank && !o.peerMayBeSelf) return false;
  if (a.count == 0) return true;
  const bool isRoot = a.root == rank;
  const bool useSend = needs(rule.send, isRoot), useRecv = needs(rule.recv, isRoot);
  const size_t es = gElementBytes[static_cast<size_t>(a.type)];
  const uintptr_t ceiling = gCeiling;
  size_t sendBytes = 0, recvBytes = 0;
  if (__builtin_mul_overflow(a.count, es * (rule.sendPerRank ? static_cast<size_t>(size) : 1), &sendBytes) ||
      __builtin_mul_overflow(a.count, es * (rule.recvPerRank ? static_cast<size_t>(size) : 1), &recvBytes)) {
    return false;
  }
  const auto s = reinterpret_cast<uintptr_t>(a.send), r = reinterpret_cast<uintptr_t>(a.recv);
  auto fits = [&](uintptr_t p, size_t bytes) {
    return p != 0 && p <= ceiling && bytes <= ceiling - p && !(o.hostBuffers && bytes >= kProbeBytes);
  };
  if (useSend && !fits(s, sendBytes)) return false;
  if (useRecv && !fits(r, recvBytes)) return false;
  if (!(useSend && useRecv && s < r + recvBytes && r < s + sendBytes)) return true;
  // Overlapping buffers are valid exactly in place (the byte counts above did not overflow, so
  // neither does the block offset); anything else goes to explainCall() for its message.
  const size_t block = a.count * es * static_cast<size_t>(rank);
  switch (rule.inPlace) {
    case InPlace::kSame: return s == r;
    case InPlace::kRecvBlock: return s == r + block;
    case InPlace::kSendBlock: return r == s + block;
  }
  return false;
}

Status explainCall(const Call& a, int rank, int size, const CheckOptions& o);

}  // namespace

Status checkCall(const Call& a, int rank, int size, CheckOptions options) {
  // A kind outside the table is the caller's bug (the front ends build calls from the enum).
  if (static_cast<unsigned>(a.kind) - 1 >= static_cast<unsigned>(kNumCallKinds - 1)) [[unlikely]] {
    return makeError(ErrorCode::kInvalidArgument, "call on rank %d: kind %d is not a call (expected 1..%d)", rank,
                     static_cast<int>(a.kind), kNumCallKinds - 1);
  }
  if (plainlyValid(a, rank, size, options)) [[likely]]
    return Status::ok();
  return explainCall(a, rank, size, options);
}

namespace {

Status explainCall(const Call& a, int rank, int size, const CheckOptions& o) {
  auto bad = [&](const std::string& what) {
    return makeError(ErrorCode::kInvalidArgument, "%s on rank %d: %s", a.name(), rank, what.c_str());
  };
  const Rule& rule = ruleOf(a.kind);
  if (!isValidDataType(static_cast<int>(a.type))) {
    return bad("type " + std::to_string(static_cast<int>(a.type)) + " is not a data type (expected " + dataTypeList() +
               ")");
  }
  if (rule.reduces && !isValidRedOp(static_cast<int>(a.op))) {
    return bad("op " + std::to_string(static_cast<int>(a.op)) + " is not a reduction (expected " + redOpList() + ")");
  }
  if (rule.reduces && !redOpDefinedFor(static_cast<RedOp>(a.op), static_cast<DataType>(a.type))) {
    return bad(std::string("op ") + redOpName(static_cast<RedOp>(a.op)) + " needs an integer type (" +
               integerTypeList() + "), got " + dataTypeName(static_cast<DataType>(a.type)));
  }
  if (rule.root == Root::kRoot && (a.root < 0 || a.root >= size)) {
    return bad("root " + std::to_string(a.root) + " is out of range (expected 0 <= root < " + std::to_string(size) +
               ")");
  }
  if (rule.root == Root::kPeer && (a.root < 0 || a.root >= size || (a.root == rank && !o.peerMayBeSelf))) {
    return bad("peer " + std::to_string(a.root) + " is invalid (expected 0 <= peer < " + std::to_string(size) +
               (o.peerMayBeSelf ? "" : ", peer != " + std::to_string(rank)) + ")");
  }
  const bool isRoot = a.root == rank;
  const bool useSend = needs(rule.send, isRoot) && a.count > 0;
  const bool useRecv = needs(rule.recv, isRoot) && a.count > 0;
  const size_t es = dataTypeSize(a.type);
  const uintptr_t ceiling = addressCeiling();
  // Bytes of each buffer: a multiplication checked for overflow (this runs on every call).
  const size_t sendMultiple = rule.sendPerRank ? static_cast<size_t>(size) : 1;
  const size_t recvMultiple = rule.recvPerRank ? static_cast<size_t>(size) : 1;
  size_t sendBytes = 0, recvBytes = 0;
  const bool sendTooBig = __builtin_mul_overflow(a.count, es * sendMultiple, &sendBytes) || sendBytes > ceiling;
  const bool recvTooBig = __builtin_mul_overflow(a.count, es * recvMultiple, &recvBytes) || recvBytes > ceiling;
  if (sendTooBig || recvTooBig) [[unlikely]] {
    const bool perRank = sendTooBig ? rule.sendPerRank : rule.recvPerRank;
    const size_t multiple = sendTooBig ? sendMultiple : recvMultiple;
    return bad("count " + std::to_string(a.count) + " of " + dataTypeName(a.type) +
               (perRank ? " x " + std::to_string(size) + " ranks" : std::string()) + " makes the " +
               (sendTooBig ? "send" : "receive") + " buffer larger than the address space (expected count <= " +
               std::to_string(ceiling / es / multiple) + ")");
  }
  const auto s = reinterpret_cast<uintptr_t>(a.send), r = reinterpret_cast<uintptr_t>(a.recv);
  auto checkRange = [&](bool used, uintptr_t p, size_t bytes, const char* which) -> Status {
    if (!used) return Status::ok();
    if (p == 0) return bad(std::string(which) + " buffer is null with count " + std::to_string(a.count));
    if (p > ceiling || bytes > ceiling - p) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "%s buffer 0x%" PRIxPTR " + %zu bytes ends beyond the address space (0x%" PRIxPTR ")", which, p,
                    bytes, ceiling);
      return bad(text);
    }
    if (o.hostBuffers && bytes >= kProbeBytes && (!pageMapped(p) || !pageMapped(p + bytes - 1))) {
      char text[200];
      std::snprintf(text, sizeof(text),
                    "%s buffer [0x%" PRIxPTR ", 0x%" PRIxPTR
                    ") is not mapped memory (count %zu "
                    "is larger than the buffer?)",
                    which, p, p + bytes, a.count);
      return bad(text);
    }
    return Status::ok();
  };
  FERRY_TRY(checkRange(useSend, s, sendBytes, "send"));
  FERRY_TRY(checkRange(useRecv, r, recvBytes, "receive"));
  if (useSend && useRecv && s < r + recvBytes && r < s + sendBytes) {
    const size_t block = a.count * es * static_cast<size_t>(rank);
    bool exact = false;
    const char* rule_text = "";
    switch (rule.inPlace) {
      case InPlace::kSame:
        exact = s == r;
        rule_text = "send == recv";
        break;
      case InPlace::kRecvBlock:
        exact = s == r + block;
        rule_text = "send == recv + rank * count elements";
        break;
      case InPlace::kSendBlock:
        exact = r == s + block;
        rule_text = "recv == send + rank * count elements";
        break;
    }
    if (!exact) {
      char text[320];
      std::snprintf(text, sizeof(text),
                    "send buffer [0x%" PRIxPTR ", +%zu) and receive buffer [0x%" PRIxPTR
                    ", +%zu) overlap without "
                    "being in place (expected disjoint buffers, or %s)",
                    s, sendBytes, r, recvBytes, rule_text);
      return bad(text);
    }
  }
  return Status::ok();
}

}  // namespace

}  // namespace ferry
