// DLPack: the C ABI for handing a strided tensor to another library without a
// copy (NumPy, PyTorch, CuPy, JAX...). The structs below are written from the
// public specification (dmlc/dlpack, version 1.x); only their layout matters, so
// they live in kiln::dlpack rather than the global namespace another library's
// dlpack.h would use. Ownership rules: Note [DLPack ownership] in core/dlpack.cpp.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln::dlpack {

// The ABI version kiln produces in DLManagedTensorVersioned and accepts (same major).
constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinorVersion = 0;

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

// A C enum: int-sized on every ABI DLPack targets.
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

// `strides` are in elements and may be null (compact row-major); the first
// element is at (char*)data + byte_offset.
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

constexpr uint64_t kFlagReadOnly = 1ull << 0;
constexpr uint64_t kFlagIsCopied = 1ull << 1;

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// Python capsule names (the protocol renames a consumed capsule to "used_*").
constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";

DLDataType to_dl_dtype(DType dtype);
DLDevice to_dl_device(Device device);
// RuntimeError naming the op for codes/bits/lanes kiln has no dtype for.
DType from_dl_dtype(DLDataType dtype, const char* op);
// CPU (kDLCPU, and host memory the CUDA runtime hands out) or CUDA; RuntimeError
// naming the op otherwise, or for CUDA in a build without it.
Device from_dl_device(DLDevice device, const char* op);

// Exports `t` without a copy; the result keeps t's storage alive until the
// consumer calls its deleter. `flags` go to the versioned struct.
DLManagedTensor* to_dlpack(const Tensor& t);
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, uint64_t flags = 0);

// A tensor viewing `src`'s memory; src->deleter runs when its storage dies.
// Throws (RuntimeError, "[op] ...") without taking ownership: on error the
// caller still owns `src`.
Tensor from_dlpack(DLManagedTensor* src, const char* op = "from_dlpack");
Tensor from_dlpack(DLManagedTensorVersioned* src, const char* op = "from_dlpack");

}  // namespace kiln::dlpack
