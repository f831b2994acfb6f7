#include "ferry/types.hpp"

#include <string>

namespace ferry {

bool isValidDataType(int value) { return value >= 0 && value < kNumDataTypes; }
bool isValidRedOp(int value) { return value >= 0 && value < kNumRedOps; }

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kBfloat16: return "bfloat16";
    case DataType::kFloat8e4m3: return "float8e4m3";
    case DataType::kFloat8e5m2: return "float8e5m2";
  }
  return "invalid";
}

namespace {
// One row per RedOp, in its order: the name, and whether only integer types define the op.
struct RedOpRow {
  const char* name;
  bool integerOnly;
};
constexpr RedOpRow kRedOps[] = {
    {"sum", false}, {"prod", false}, {"max", false}, {"min", false},
    {"avg", false}, {"band", true},  {"bor", true},  {"bxor", true},
};
static_assert(sizeof(kRedOps) / sizeof(kRedOps[0]) == static_cast<size_t>(kNumRedOps));
}  // namespace

const char* redOpName(RedOp op) {
  const int v = static_cast<int>(op);
  return isValidRedOp(v) ? kRedOps[v].name : "invalid";
}

bool isIntegerOnly(RedOp op) {
  const int v = static_cast<int>(op);
  return isValidRedOp(v) && kRedOps[v].integerOnly;
}

const char* callKindName(CallKind kind) {
  switch (kind) {
    case CallKind::kAllReduce: return "allReduce";
    case CallKind::kReduceScatter: return "reduceScatter";
    case CallKind::kAllGather: return "allGather";
    case CallKind::kAllToAll: return "allToAll";
    case CallKind::kBroadcast: return "broadcast";
    case CallKind::kReduce: return "reduce";
    case CallKind::kBarrier: return "barrier";
    case CallKind::kSend: return "send";
    case CallKind::kRecv: return "recv";
  }
  return "unknown";
}

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16 || type == DataType::kFloat8e4m3 || type == DataType::kFloat8e5m2;
}

bool redOpDefinedFor(RedOp op, DataType type) { return !isIntegerOnly(op) || !isFloatingPoint(type); }

namespace {
template <typename Name>
std::string listOf(int n, Name name) {
  std::string s = "0.." + std::to_string(n - 1) + ":";
  for (int v = 0; v < n; ++v) s += std::string(v == 0 ? " " : ", ") + name(v);
  return s;
}
}  // namespace

const char* dataTypeList() {
  static const std::string list = listOf(kNumDataTypes, [](int v) { return dataTypeName(static_cast<DataType>(v)); });
  return list.c_str();
}

const char* redOpList() {
  static const std::string list = listOf(kNumRedOps, [](int v) { return redOpName(static_cast<RedOp>(v)); });
  return list.c_str();
}

const char* integerTypeList() {
  static const std::string list = [] {
    std::string s;
    for (int v = 0; v < kNumDataTypes; ++v) {
      const auto t = static_cast<DataType>(v);
      if (!isFloatingPoint(t)) s += (s.empty() ? "" : ", ") + std::string(dataTypeName(t));
    }
    return s;
  }();
  return list.c_str();
}

}  // namespace ferry
