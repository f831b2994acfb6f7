// The DLPack exchange ABI (dmlc/dlpack, version 0.x): the C structs a producer such as torch puts
// in the capsule that `obj.__dlpack__()` returns. Only the layout and the enum values matter here;
// they are fixed by the specification, so a consumer declares them itself instead of depending on
// dlpack.h.
//
// Ownership protocol (the Python array API's data interchange rules):
// - `__dlpack__()` returns a PyCapsule named "dltensor" holding a DLManagedTensor*. While it has
//   that name, the capsule's own destructor calls the tensor's deleter.
// - A consumer that takes the tensor renames the capsule "used_dltensor"; from then on the capsule
//   destructor does nothing and the consumer must call `deleter(self)` exactly once, when it no
//   longer uses the memory. A capsule with any other name is not the consumer's to touch.
#pragma once

#include <cstdint>

namespace ferry::bindings::dlpack {

/// Where the memory lives (DLDeviceType). Only the values this consumer names are listed.
enum DeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  ///< pinned host memory: plain host memory to the CPU
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
};

/// DLDevice: a device type and its ordinal.
struct Device {
  int32_t deviceType;
  int32_t deviceId;
};

/// DLDataTypeCode: the kind of number; `bits` gives its width.
enum TypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

/// DLDataType: `lanes` > 1 means vector elements (not supported by ferry).
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

/// DLTensor: a strided view. `strides` is in elements and may be null, meaning compact row-major;
/// the first element is at `data + byteOffset`.
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byteOffset;
};

/// DLManagedTensor: the tensor plus the producer's context and the deleter that releases it.
struct ManagedTensor {
  Tensor dlTensor;
  void* managerCtx;
  void (*deleter)(ManagedTensor* self);
};

/// Capsule names of the protocol above.
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

}  // namespace ferry::bindings::dlpack
