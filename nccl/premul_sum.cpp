// PreMulSum reductions: the table of a communicator's reductions, the scaling of an input, and the
// ncclRedOpCreatePreMulSum / ncclRedOpDestroy entry points.
#include "nccl/premul_sum.hpp"

#include <cstring>
#include <type_traits>

#include "runtime/nccl_support.hpp"
#include "nccl/comm_handle.hpp"
#include "nccl/entry.hpp"

namespace ferry::nccl {
namespace {

template <typename T>
T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* base, size_t i, T v) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// Integers multiply modulo 2^bits (as the device code's integer multiply does), without the
// undefined behaviour of signed overflow.
template <typename T>
void scaleInteger(void* dst, const void* src, size_t n, uint64_t bits) {
  using U = std::make_unsigned_t<T>;
  const uint64_t s = static_cast<U>(bits);
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = static_cast<U>(load<T>(src, i));
    store<T>(dst, i, static_cast<T>(static_cast<U>(x * s)));
  }
}

template <typename T>
void scaleFloat(void* dst, const void* src, size_t n, uint64_t bits) {
  T s;
  std::memcpy(&s, &bits, sizeof(T));
  for (size_t i = 0; i < n; ++i) store<T>(dst, i, load<T>(src, i) * s);
}

// The product of two 11-bit (8-bit, 4-bit) significands fits float32's 24 bits, so multiplying in
// float32 and rounding once gives the correctly rounded float16 (bfloat16, float8) product.
template <typename S, float (*Widen)(S), S (*Narrow)(float)>
void scaleHalf(void* dst, const void* src, size_t n, uint64_t bits) {
  const float s = Widen(static_cast<S>(bits));
  for (size_t i = 0; i < n; ++i) store<S>(dst, i, Narrow(Widen(load<S>(src, i)) * s));
}

}  // namespace

uint64_t PreMulSum::value() const {
  if (scalar == nullptr) return bits;
  uint64_t v = 0;
  std::memcpy(&v, scalar, dataTypeSize(type));
  return v;
}

int RedOpTable::create(const PreMulSum& op) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!ops_[i]) {
      ops_[i] = op;
      return static_cast<int>(i) + ncclNumOps;
    }
  }
  ops_.push_back(op);
  return static_cast<int>(ops_.size() - 1) + ncclNumOps;
}

bool RedOpTable::destroy(int op) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = static_cast<size_t>(op - ncclNumOps);
  if (op < ncclNumOps || i >= ops_.size() || !ops_[i]) return false;
  ops_[i].reset();
  return true;
}

std::optional<PreMulSum> RedOpTable::find(int op) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = static_cast<size_t>(op - ncclNumOps);
  if (op < ncclNumOps || i >= ops_.size()) return std::nullopt;
  return ops_[i];
}

void scaleInto(void* dst, const void* src, size_t count, const PreMulSum& op) {
  const uint64_t s = op.value();
  switch (op.type) {
    case DataType::kInt8: return scaleInteger<int8_t>(dst, src, count, s);
    case DataType::kUint8: return scaleInteger<uint8_t>(dst, src, count, s);
    case DataType::kInt32: return scaleInteger<int32_t>(dst, src, count, s);
    case DataType::kUint32: return scaleInteger<uint32_t>(dst, src, count, s);
    case DataType::kInt64: return scaleInteger<int64_t>(dst, src, count, s);
    case DataType::kUint64: return scaleInteger<uint64_t>(dst, src, count, s);
    case DataType::kFloat32: return scaleFloat<float>(dst, src, count, s);
    case DataType::kFloat64: return scaleFloat<double>(dst, src, count, s);
    case DataType::kFloat16: return scaleHalf<uint16_t, kernels::halfToFloat, kernels::floatToHalf>(dst, src, count, s);
    case DataType::kBfloat16:
      return scaleHalf<uint16_t, kernels::bfloat16ToFloat, kernels::floatToBfloat16>(dst, src, count, s);
    case DataType::kFloat8e4m3:
      return scaleHalf<uint8_t, kernels::fp8e4m3ToFloat, kernels::floatToFp8e4m3>(dst, src, count, s);
    case DataType::kFloat8e5m2:
      return scaleHalf<uint8_t, kernels::fp8e5m2ToFloat, kernels::floatToFp8e5m2>(dst, src, count, s);
  }
}

}  // namespace ferry::nccl

using namespace ferry::nccl;
using ferry::Status;

extern "C" ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  constexpr const char* fn = "ncclRedOpCreatePreMulSum";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    if (op == nullptr) return argError(fn, "op is NULL (it receives the new reduction)");
    if (scalar == nullptr) return argError(fn, "scalar is NULL");
    const int type = rawEnum(datatype), where = rawEnum(residence);
    if (!ferry::isValidDataType(type)) {
      return argError(fn, "datatype %d is not valid (expected %s)", type, ferry::dataTypeList());
    }
    if (where != ncclScalarDevice && where != ncclScalarHostImmediate) {
      return argError(fn, "residence %d is not valid (expected ncclScalarDevice = 0 or ncclScalarHostImmediate = 1)",
                      where);
    }
    PreMulSum p;
    p.type = static_cast<ferry::DataType>(type);
    if (where == ncclScalarHostImmediate) {
      std::memcpy(&p.bits, scalar, ferry::dataTypeSize(p.type));
    } else {
      // Without the CUDA backend "device" memory is host memory: read it when a collective runs.
      p.scalar = scalar;
    }
    *op = static_cast<ncclRedOp_t>(comm->redOps.create(p));
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

extern "C" ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  constexpr const char* fn = "ncclRedOpDestroy";
  return entry(fn, [&]() -> Status {
    if (comm == nullptr) return argError(fn, "comm is NULL");
    const int raw = rawEnum(op);
    if (raw < ncclNumOps) {
      return argError(fn, "op %d is a built-in reduction; only ncclRedOpCreatePreMulSum's can be destroyed", raw);
    }
    if (!comm->redOps.destroy(raw)) {
      return argError(fn, "op %d is not a live reduction created on this communicator", raw);
    }
    return Status::ok();
  });
}
FERRY_NCCL_ALIAS(ncclRedOpDestroy)
