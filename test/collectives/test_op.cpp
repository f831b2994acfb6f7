// Call descriptions (collectives/op.hpp): fingerprints and the messages that explain a mismatch,
// for calls the API accepts and for whatever a peer's call header may hold.
#include <catch2/catch.hpp>
#include <climits>
#include <string>

#include "collectives/op.hpp"

namespace ferry::coll {
namespace {

TEST_CASE("fingerprints tell calls apart field by field", "[op]") {
  OpDesc a{CallKind::kAllReduce, 1024, DataType::kFloat32, RedOp::kSum, -1};
  OpDesc b = a;
  CHECK(fingerprint(a) == fingerprint(b));
  b.kind = CallKind::kBroadcast;
  CHECK(explainMismatch(a, fingerprint(b)) == "runs broadcast");
  b = a;
  b.type = DataType::kFloat16;
  CHECK(explainMismatch(a, fingerprint(b)) == "uses data type float16");
  CHECK(explainMismatch(a, 0xF00000) == "runs an unknown operation (kind 15)");
}

TEST_CASE("every reduction op, the bitwise ones too, fingerprints apart and is named in a mismatch", "[op]") {
  const RedOp ops[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                       RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};
  for (RedOp x : ops) {
    for (RedOp y : ops) {
      const OpDesc mine{CallKind::kReduce, 64, DataType::kInt32, x, 1};
      OpDesc theirs = mine;
      theirs.op = y;
      INFO(redOpName(x) << " against " << redOpName(y));
      if (x == y) {
        CHECK(fingerprint(mine) == fingerprint(theirs));
      } else {
        CHECK(explainMismatch(mine, fingerprint(theirs), 4) == std::string("uses op ") + redOpName(y));
      }
    }
  }
  CHECK(describe(OpDesc{CallKind::kAllReduce, 8, DataType::kUint8, RedOp::kBxor, -1}) ==
        "allReduce(count=8, uint8, bxor)");
}

// Found by test/fuzz/fuzz_call: hash13 computed root + 1 in int, which overflows (undefined
// behaviour, reported by the asan suite's UBSan) for a root of INT_MAX; a peer's call header may
// carry any root.
TEST_CASE("any root fingerprints, INT_MAX and INT_MIN included", "[op]") {
  for (int root : {INT_MAX, INT_MAX - 1, INT_MIN, -2, -1, 0}) {
    OpDesc d{CallKind::kBroadcast, 8, DataType::kInt32, RedOp::kSum, root};
    CHECK((fingerprint(d) & ~0xFFFFFFu) == 0);
    CHECK(describe(d).find("root=" + std::to_string(root)) != std::string::npos);
  }
  OpDesc max{CallKind::kReduce, 8, DataType::kInt32, RedOp::kSum, INT_MAX};
  OpDesc below = max;
  below.root = INT_MAX - 1;
  CHECK(fingerprint(max) != fingerprint(below));
}

TEST_CASE("a peer's call header with unknown values still describes itself", "[op]") {
  OpDesc theirs{static_cast<CallKind>(200), ~size_t{0}, static_cast<DataType>(99), static_cast<RedOp>(77), INT_MIN};
  CHECK(describe(theirs).find("unknown") != std::string::npos);
}

}  // namespace
}  // namespace ferry::coll
