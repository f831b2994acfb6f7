#include "ferry/types.hpp"

#include <string>

namespace ferry {

bool isValidDataType(int value) { return value >= 0 && value < kNumDataTypes; }
bool isValidRedOp(int value) { return value >= 0 && value < kNumRedOps; }

size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

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

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMax: return "max";
    case RedOp::kMin: return "min";
    case RedOp::kAvg: return "avg";
  }
  return "invalid";
}

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16 || type == DataType::kFloat8e4m3 || type == DataType::kFloat8e5m2;
}

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

}  // namespace ferry
