// Pieces shared by the CUDA runtime's own files (not part of its interface).
#pragma once

#include <cuda_runtime.h>

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

// The pinned block holding `ptr` is in use by work on `stream`: it is not reused until then.
void pinned_record_stream(const void* ptr, cudaStream_t stream);

// The backend's copy and fill entries (cuda/copy.cpp).
void copy_tensor(const Tensor& dst, const Tensor& src);
void fill_tensor(const Tensor& dst, Scalar value);

}  // namespace kiln::cuda
