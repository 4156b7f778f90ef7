#include "core/dlpack.h"

#include <algorithm>
#include <memory>

#include "core/error.h"

namespace kiln::dlpack {

// Note [DLPack ownership]
// Export: one heap block holds the DLManagedTensor(Versioned) together with a
// reference to the tensor's Storage and the shape/stride arrays the DLTensor
// points into. The consumer calls `deleter` exactly once when it is done; that
// frees the block and drops the Storage reference, so the memory outlives every
// kiln tensor for as long as the consumer needs it (CUDA memory then returns to
// the caching allocator). Nothing here needs Python: the deleter may run on any
// thread, with or without the GIL.
// Import: the DLTensor's memory becomes a Storage whose release function calls
// the producer's deleter, so it runs when the last kiln view of it dies. Until
// the Storage exists the caller keeps ownership: every check happens first, and
// a failing from_dlpack leaves `src` untouched (a Python capsule then stays
// unconsumed and its destructor calls the deleter). A struct kiln exported
// itself is unwrapped back to the original Storage, so kiln -> kiln round trips
// alias the same storage (overlap checks, record_stream and pinning keep working).
// The Storage starts at the lowest address the view touches, with the first
// element at a non-negative offset, so negative strides keep kiln's invariant
// that a view lies within [data, data + nbytes).

namespace {

template <class M>
struct Exported {
  M managed{};
  Storage storage;
  Shape shape, strides;
};

template <class M>
void release_exported(M* self) {
  delete static_cast<Exported<M>*>(self->manager_ctx);
}

void set_version(DLManagedTensor*, uint64_t) {}
void set_version(DLManagedTensorVersioned* m, uint64_t flags) {
  m->version = {kMajorVersion, kMinorVersion};
  m->flags = flags;
}

template <class M>
M* export_tensor(const Tensor& t, uint64_t flags) {
  auto ex = std::make_unique<Exported<M>>();
  ex->storage = t.storage();
  ex->shape = t.sizes();
  ex->strides = t.strides();
  // Some consumers (older NumPy) reject arbitrary strides on dims of size 0 or 1,
  // where a stride never moves the pointer anyway.
  for (size_t d = 0; d < ex->shape.size(); ++d) {
    if (ex->shape[d] < 2) ex->strides[d] = 1;
  }
  M& m = ex->managed;
  DLTensor& dl = m.dl_tensor;
  dl.data = t.data_ptr();
  dl.device = to_dl_device(t.device());
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ex->shape.data();
  dl.strides = ex->strides.data();
  dl.byte_offset = 0;
  m.manager_ctx = ex.get();
  m.deleter = &release_exported<M>;
  set_version(&m, flags);
  return &ex.release()->managed;
}

void check_version(DLManagedTensor*, const char*) {}
void check_version(DLManagedTensorVersioned* m, const char* op) {
  KILN_CHECK(m->version.major == kMajorVersion, Runtime, "[", op, "] DLPack version ",
             m->version.major, ".", m->version.minor,
             " is not supported: kiln reads major version ", kMajorVersion);
}

template <class M>
Tensor import_tensor(M* src, const char* op) {
  KILN_CHECK(src != nullptr, Runtime, "[", op, "] got a null DLManagedTensor");
  check_version(src, op);
  const DLTensor& dl = src->dl_tensor;
  const DType dtype = from_dl_dtype(dl.dtype, op);
  const Device device = from_dl_device(dl.device, op);
  KILN_CHECK(dl.ndim >= 0 && (dl.ndim == 0 || dl.shape), Runtime, "[", op,
             "] malformed DLTensor: ndim ", dl.ndim, " with shape ", dl.shape ? "set" : "null");
  Shape sizes(dl.shape, dl.shape + dl.ndim);
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, Runtime, "[", op, "] DLTensor has a negative size: ", sizes);
  }
  const bool empty = checked_numel(sizes, op) == 0;
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  const auto isz = static_cast<int64_t>(itemsize(dtype));
  char* first = static_cast<char*>(dl.data) + dl.byte_offset;

  if (src->deleter == &release_exported<M>) {
    Storage storage = static_cast<Exported<M>*>(src->manager_ctx)->storage;
    const auto delta = first - static_cast<char*>(storage->data.get());
    if (delta >= 0 && delta % isz == 0) {
      src->deleter(src);
      return make_tensor_from_storage(std::move(storage), std::move(sizes), std::move(strides),
                                      delta / isz, dtype);
    }
  }

  // Element offsets of the lowest and highest addresses the view touches.
  // Checked: the producer's strides are as untrusted as its sizes.
  int64_t lo = 0, hi = 0, span = 0;
  bool overflow = false;
  for (size_t d = 0; d < sizes.size() && !empty; ++d) {
    int64_t reach;
    overflow |= mul_overflows(sizes[d] - 1, strides[d], &reach);
    overflow |= add_overflows(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
  }
  overflow |= sub_overflows(hi, lo, &span) || add_overflows(span, 1, &span) ||
              mul_overflows(span, isz, &span);
  KILN_CHECK(empty || !overflow, Runtime, "[", op,
             "] Storage size calculation overflowed with sizes=", sizes, " and strides=", strides);
  auto storage = std::make_shared<StorageImpl>();
  storage->device = device;
  storage->nbytes = empty ? 0 : static_cast<size_t>(span);
  storage->data = std::shared_ptr<void>(first + lo * isz, [src](void*) {
    if (src->deleter) src->deleter(src);
  });
  return make_tensor_from_storage(std::move(storage), std::move(sizes), std::move(strides), -lo,
                                  dtype);
}

const char* device_type_name(int32_t type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLOpenCL:
      return "kDLOpenCL";
    case kDLVulkan:
      return "kDLVulkan";
    case kDLMetal:
      return "kDLMetal";
    case kDLVPI:
      return "kDLVPI";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLExtDev:
      return "kDLExtDev";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    case kDLOneAPI:
      return "kDLOneAPI";
    case kDLWebGPU:
      return "kDLWebGPU";
    case kDLHexagon:
      return "kDLHexagon";
    case kDLMAIA:
      return "kDLMAIA";
    default:
      return "unknown";
  }
}

const char* type_code_name(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "kDLInt";
    case kDLUInt:
      return "kDLUInt";
    case kDLFloat:
      return "kDLFloat";
    case kDLOpaqueHandle:
      return "kDLOpaqueHandle";
    case kDLBfloat:
      return "kDLBfloat";
    case kDLComplex:
      return "kDLComplex";
    case kDLBool:
      return "kDLBool";
    default:
      return "unknown";
  }
}

}  // namespace

DLDataType to_dl_dtype(DType dtype) {
  DLDataType out{kDLFloat, static_cast<uint8_t>(itemsize(dtype) * 8), 1};
  switch (dtype) {
    case DType::Bool:
      out.code = kDLBool;
      break;
    case DType::UInt8:
      out.code = kDLUInt;
      break;
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
      out.code = kDLInt;
      break;
    case DType::BFloat16:
      out.code = kDLBfloat;
      break;
    case DType::Float16:
    case DType::Float32:
    case DType::Float64:
      out.code = kDLFloat;
      break;
  }
  return out;
}

DType from_dl_dtype(DLDataType dtype, const char* op) {
  KILN_CHECK(dtype.lanes == 1, Runtime, "[", op, "] DLPack vector dtypes (lanes=", dtype.lanes,
             ") are not supported: kiln needs lanes == 1");
  const int bits = dtype.bits;
  switch (dtype.code) {
    case kDLBool:
      if (bits == 8) return DType::Bool;
      break;
    case kDLUInt:
      if (bits == 8) return DType::UInt8;
      break;
    case kDLInt:
      if (bits == 8) return DType::Int8;
      if (bits == 16) return DType::Int16;
      if (bits == 32) return DType::Int32;
      if (bits == 64) return DType::Int64;
      break;
    case kDLFloat:
      if (bits == 16) return DType::Float16;
      if (bits == 32) return DType::Float32;
      if (bits == 64) return DType::Float64;
      break;
    case kDLBfloat:
      if (bits == 16) return DType::BFloat16;
      break;
    default:
      break;
  }
  fail(ErrorKind::Runtime, "[", op, "] unsupported DLPack dtype (code ", type_code_name(dtype.code),
       " = ", int(dtype.code), ", bits ", bits,
       "): kiln has bool, uint8, int8/16/32/64, float16/32/64 and bfloat16");
}

DLDevice to_dl_device(Device device) {
  if (device.is_cuda()) return {kDLCUDA, device.index < 0 ? 0 : device.index};
  return {kDLCPU, 0};
}

Device from_dl_device(DLDevice device, const char* op) {
  switch (device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      return Device();
    case kDLCUDA:
#ifdef KILN_WITH_CUDA
      return Device(DeviceType::CUDA, device.device_id);
#else
      fail(ErrorKind::Runtime, "[", op, "] got a tensor on kDLCUDA:", device.device_id,
           " but kiln was built without CUDA");
#endif
    default:
      break;
  }
  fail(ErrorKind::Runtime, "[", op, "] unsupported DLPack device type ",
       device_type_name(device.device_type), " (", int(device.device_type),
       "): kiln takes kDLCPU, kDLCUDAHost and kDLCUDA");
}

DLManagedTensor* to_dlpack(const Tensor& t) { return export_tensor<DLManagedTensor>(t, 0); }

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, uint64_t flags) {
  return export_tensor<DLManagedTensorVersioned>(t, flags);
}

Tensor from_dlpack(DLManagedTensor* src, const char* op) { return import_tensor(src, op); }

Tensor from_dlpack(DLManagedTensorVersioned* src, const char* op) { return import_tensor(src, op); }

}  // namespace kiln::dlpack
