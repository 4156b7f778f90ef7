// Pieces shared by the CUDA runtime's own files (not part of its interface).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/scalar.h"
#include "cuda/runtime.h"

namespace kiln::cuda {

inline cudaStream_t stream_of(int device) {
  return static_cast<cudaStream_t>(current_stream(device));
}

// Blocks of kThreads for a grid-stride loop over n elements.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (1 << 16) ? blocks : (1 << 16));
}

// Sizes and element strides of a strided copy or fill, dims merged where possible.
constexpr int kMaxCopyDims = 8;
struct StridedShape {
  int ndim = 0;
  int64_t sizes[kMaxCopyDims];
  int64_t dst_strides[kMaxCopyDims];
  int64_t src_strides[kMaxCopyDims];
};

// dst[i] = convert(src[i]) for n elements laid out by `shape` (flat when contiguous).
void launch_copy(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                 const StridedShape& shape, bool contiguous, cudaStream_t stream);
// Every element of dst (laid out by shape's dst strides) set to the `elem_size`-byte
// pattern `bits`.
void launch_fill(void* dst, int elem_size, uint64_t bits, int64_t n, const StridedShape& shape,
                 bool contiguous, cudaStream_t stream);

// Note [Deferred index errors] (ops/index.cpp): each device has one record in host-mapped
// pinned memory. A kernel that finds a bad index claims it (state 0 -> 1 with a
// compare-and-swap), fills it in and publishes it (state 2); the host reads and clears it
// after its next wait on that device (check_device_errors in cuda/runtime.h). Laid out for
// both sides: plain integers only.
// Besides bad indices the record takes integer divisions by zero (Note [Shared elementwise
// functors] in ops/math/functors.h), which raise zero_division_message instead.
enum class DeviceErrorKind : int32_t { Index, ZeroDivision };
struct DeviceErrorRecord {
  unsigned int state;  // 0 free, 1 being written by a kernel, 2 published
  int32_t kind;        // DeviceErrorKind
  int32_t style;       // IndexErrorStyle
  uint64_t op;         // address of the op's name, a string literal on the host
  int64_t index, size, dim;
};
// The record of `device`, as kernels address it (created on first use; that is an allocation
// of pinned host memory, not a synchronization).
DeviceErrorRecord* device_error_record(int device);

// Note [Sync debug mode] (cuda/runtime.cpp): every wait kiln makes for a stream goes through
// here. Warns or raises per kiln.cuda.set_sync_debug_mode, naming `op` and `what` waits.
void note_synchronizing_call(const char* op, const char* what);
// note_synchronizing_call, cudaStreamSynchronize, then check_device_errors for the device.
void wait_for_stream(cudaStream_t stream, int device, const char* op, const char* what);
// A device-to-host copy on `stream` that the host waits for (wait_for_stream after it). The
// note comes first, so a raise in "error" mode leaves no copy in flight into `dst`.
void copy_to_host_and_wait(void* dst, const void* src, size_t nbytes, cudaStream_t stream,
                           int device, const char* op, const char* what);

// The pinned block holding `ptr` is in use by work on `stream`: it is not reused until then.
void pinned_record_stream(const void* ptr, cudaStream_t stream);

// The backend's copy and fill entries (cuda/copy.cpp).
void copy_tensor(const Tensor& dst, const Tensor& src);
void fill_tensor(const Tensor& dst, Scalar value);

}  // namespace kiln::cuda
