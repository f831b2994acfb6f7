// Fuzzes the call descriptions ranks compare to detect mismatched collectives: a peer's call
// header (kind, type, op, count, root, algorithm, protocol as raw words out of shared memory) and
// a peer's 24-bit tag fingerprint, rendered into the messages that explain a mismatch.
//
// Input: the raw fields of two calls (ours and the peer's) and a fingerprint. A peer may be a
// different build or a corrupted page: nothing it writes may crash the rank that reads it.
#include "collectives/algorithms.hpp"
#include "collectives/table.hpp"
#include "collectives/op.hpp"
#include "test/fuzz/fuzz_input.hpp"

using namespace ferry;
using namespace ferry::coll;

namespace {

// The header's words as checkPeerCall() turns them into an OpDesc.
OpDesc rawDesc(fuzz::Input& in) {
  OpDesc d;
  d.kind = static_cast<CallKind>(in.u32());
  d.count = in.u64();
  d.type = static_cast<DataType>(in.u32());
  d.op = static_cast<RedOp>(in.u32());
  d.root = static_cast<int>(in.u32());
  return d;
}

// Our own call is always one the API accepted.
OpDesc validDesc(fuzz::Input& in) {
  OpDesc d;
  d.kind = static_cast<CallKind>(1 + in.u8() % 8);
  d.count = in.u64();
  int type = in.u8() % 32;
  d.type = isValidDataType(type) ? static_cast<DataType>(type) : DataType::kFloat32;
  int op = in.u8() % 8;
  d.op = isValidRedOp(op) ? static_cast<RedOp>(op) : RedOp::kSum;
  d.root = static_cast<int>(in.u32());
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  OpDesc mine = validDesc(in);
  OpDesc theirs = rawDesc(in);
  uint32_t fp = in.u32() & 0xFFFFFF;
  uint32_t algorithm = in.u32();
  uint32_t protocol = in.u32();

  FERRY_FUZZ_CHECK(!describe(mine).empty());
  FERRY_FUZZ_CHECK(!describe(theirs).empty());
  FERRY_FUZZ_CHECK((fingerprint(theirs) & ~0xFFFFFFu) == 0);
  if (fp != fingerprint(mine)) FERRY_FUZZ_CHECK(!explainMismatch(mine, fp).empty());
  FERRY_FUZZ_CHECK(!explainMismatch(mine, fingerprint(theirs)).empty());
  (void)algorithmName(static_cast<Algorithm>(algorithm));
  (void)protocolName(static_cast<Protocol>(protocol));
  (void)callKindName(theirs.kind);
  return 0;
}
