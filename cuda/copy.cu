// The strided cast/copy kernel behind every CUDA copy that is not a plain memcpy.
// One kernel per destination dtype switches on the source dtype inside the loop:
// the branch is uniform across the launch, and 20 instantiations compile much
// faster than one per (source, destination) pair.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/check.h"
#include "cuda/device_types.cuh"
#include "cuda/internal.h"

namespace kiln::cuda {

namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// PyTorch's conversion rules (as ops/cpu/convert.h): to bool means != 0, half types via float.
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename Dst>
__device__ __forceinline__ Dst load(const void* src, DType dt, int64_t i) {
  switch (dt) {
    case DType::Bool: return convert<Dst>(static_cast<const bool*>(src)[i]);
    case DType::UInt8: return convert<Dst>(static_cast<const uint8_t*>(src)[i]);
    case DType::Int8: return convert<Dst>(static_cast<const int8_t*>(src)[i]);
    case DType::Int16: return convert<Dst>(static_cast<const int16_t*>(src)[i]);
    case DType::Int32: return convert<Dst>(static_cast<const int32_t*>(src)[i]);
    case DType::Int64: return convert<Dst>(static_cast<const int64_t*>(src)[i]);
    case DType::Float16: return convert<Dst>(static_cast<const __half*>(src)[i]);
    case DType::BFloat16: return convert<Dst>(static_cast<const __nv_bfloat16*>(src)[i]);
    case DType::Float32: return convert<Dst>(static_cast<const float*>(src)[i]);
    case DType::Float64: return convert<Dst>(static_cast<const double*>(src)[i]);
  }
  return Dst();
}

template <typename Dst, bool Contiguous>
__global__ void copy_kernel(Dst* dst, const void* src, DType src_dtype, int64_t n,
                            StridedShape shape) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t d = i, s = i;
    if constexpr (!Contiguous) {
      d = 0;
      s = 0;
      int64_t rem = i;
      for (int k = shape.ndim - 1; k >= 0; --k) {
        const int64_t idx = rem % shape.sizes[k];
        rem /= shape.sizes[k];
        d += idx * shape.dst_strides[k];
        s += idx * shape.src_strides[k];
      }
    }
    dst[d] = load<Dst>(src, src_dtype, s);
  }
}

template <typename Dst>
void launch_typed(void* dst, const void* src, DType src_dtype, int64_t n,
                  const StridedShape& shape, bool contiguous, cudaStream_t stream) {
  Dst* out = static_cast<Dst*>(dst);
  if (contiguous) {
    copy_kernel<Dst, true><<<grid_for(n), kThreads, 0, stream>>>(out, src, src_dtype, n, shape);
  } else {
    copy_kernel<Dst, false><<<grid_for(n), kThreads, 0, stream>>>(out, src, src_dtype, n, shape);
  }
  KILN_CUDA_CHECK_LAUNCH("copy_");
}

}  // namespace

void launch_copy(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                 const StridedShape& shape, bool contiguous, cudaStream_t stream) {
  switch (dst_dtype) {
#define KILN_COPY_CASE(ctype, name, pyname)                                                 \
  case DType::name:                                                                      \
    return launch_typed<device_t<ctype>>(dst, src, src_dtype, n, shape, contiguous, \
                                                stream);
    KILN_FORALL_DTYPES(KILN_COPY_CASE)
#undef KILN_COPY_CASE
  }
}

}  // namespace kiln::cuda
