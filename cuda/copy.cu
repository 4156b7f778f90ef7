// The strided cast/copy kernel behind every CUDA copy that is not a plain memcpy.
// One kernel per destination dtype switches on the source dtype inside the loop:
// the branch is uniform across the launch, and 20 instantiations compile much
// faster than one per (source, destination) pair.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/device_types.cuh"
#include "cuda/internal.h"
#include "ops/math/convert.h"

namespace kiln::cuda {

namespace {

using math::convert;

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

// Contiguous casts between the floating types autocast moves data through
// (float32 <-> float16/bfloat16): one 8-element pack per thread step and no
// per-element switch on the source dtype.
constexpr int kCastPack = 8;

template <typename Dst, typename Src>
__global__ void cast_flat_kernel(Dst* dst, const Src* src, int64_t n) {
  const int64_t packs = n / kCastPack;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = first; p < packs; p += step) {
    const Pack<Src, kCastPack> in = reinterpret_cast<const Pack<Src, kCastPack>*>(src)[p];
    Pack<Dst, kCastPack> out;
#pragma unroll
    for (int k = 0; k < kCastPack; ++k) out.v[k] = convert<Dst>(in.v[k]);
    reinterpret_cast<Pack<Dst, kCastPack>*>(dst)[p] = out;
  }
  for (int64_t i = packs * kCastPack + first; i < n; i += step) dst[i] = convert<Dst>(src[i]);
}

template <typename Dst, typename Src>
bool try_cast_flat(void* dst, const void* src, int64_t n, cudaStream_t stream) {
  const auto aligned = [](const void* p, size_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  if (!aligned(dst, sizeof(Dst) * kCastPack) || !aligned(src, sizeof(Src) * kCastPack))
    return false;
  const int64_t threads = std::max<int64_t>(n / kCastPack, 1);
  cast_flat_kernel<Dst, Src><<<grid_for(threads), kThreads, 0, stream>>>(
      static_cast<Dst*>(dst), static_cast<const Src*>(src), n);
  KILN_CUDA_CHECK_LAUNCH("copy_");
  return true;
}

// The fast path for a contiguous float32 <-> half cast; false when it does not apply.
bool cast_flat(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
               cudaStream_t stream) {
  using F = DType;
  if (dst_dtype == F::Float32 && src_dtype == F::BFloat16)
    return try_cast_flat<float, __nv_bfloat16>(dst, src, n, stream);
  if (dst_dtype == F::Float32 && src_dtype == F::Float16)
    return try_cast_flat<float, __half>(dst, src, n, stream);
  if (dst_dtype == F::BFloat16 && src_dtype == F::Float32)
    return try_cast_flat<__nv_bfloat16, float>(dst, src, n, stream);
  if (dst_dtype == F::Float16 && src_dtype == F::Float32)
    return try_cast_flat<__half, float>(dst, src, n, stream);
  return false;
}

// Same-dtype copies between strided layouts whose innermost dim is contiguous on both sides
// (cat into a slice of the last dim, split's backward, a head merge): rows of whole 4-, 8- or
// 16-byte words, with the row's offsets worked out once per word rather than per element.
template <typename Word>
__global__ void copy_rows_kernel(char* dst, const char* src, int64_t rows, int64_t row_words,
                                 StridedShape outer) {
  const int64_t n = rows * row_words;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t row = i / row_words;
    const int64_t w = i - row * row_words;
    int64_t d = 0, s = 0;
    for (int k = outer.ndim - 1; k >= 0; --k) {
      const int64_t idx = row % outer.sizes[k];
      row /= outer.sizes[k];
      d += idx * outer.dst_strides[k];
      s += idx * outer.src_strides[k];
    }
    reinterpret_cast<Word*>(dst + d)[w] = reinterpret_cast<const Word*>(src + s)[w];
  }
}

// The row copy for `shape` (element strides, elements of elem_size bytes); false when the
// innermost dim is not contiguous on both sides or no word size divides everything.
bool copy_rows(void* dst, const void* src, int elem_size, const StridedShape& shape,
               cudaStream_t stream) {
  const int last = shape.ndim - 1;
  if (last < 1 || shape.dst_strides[last] != 1 || shape.src_strides[last] != 1) return false;
  const int64_t row_bytes = shape.sizes[last] * elem_size;
  StridedShape outer;
  outer.ndim = last;
  int64_t rows = 1;
  uint64_t bits = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                  static_cast<uint64_t>(row_bytes);
  for (int k = 0; k < last; ++k) {
    outer.sizes[k] = shape.sizes[k];
    outer.dst_strides[k] = shape.dst_strides[k] * elem_size;
    outer.src_strides[k] = shape.src_strides[k] * elem_size;
    bits |= static_cast<uint64_t>(outer.dst_strides[k]) | static_cast<uint64_t>(outer.src_strides[k]);
    rows *= shape.sizes[k];
  }
  if (rows == 0 || row_bytes == 0) return true;
  const auto launch = [&](auto word) {
    using Word = decltype(word);
    const int64_t row_words = row_bytes / static_cast<int64_t>(sizeof(Word));
    copy_rows_kernel<Word><<<grid_for(rows * row_words), kThreads, 0, stream>>>(
        static_cast<char*>(dst), static_cast<const char*>(src), rows, row_words, outer);
    KILN_CUDA_CHECK_LAUNCH("copy_");
    return true;
  };
  if (bits % 16 == 0) return launch(uint4{});
  if (bits % 8 == 0) return launch(uint2{});
  if (bits % 4 == 0 && row_bytes >= 16) return launch(uint32_t{});
  return false;
}

}  // namespace

void launch_copy(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                 const StridedShape& shape, bool contiguous, cudaStream_t stream) {
  if (contiguous && cast_flat(dst, dst_dtype, src, src_dtype, n, stream)) return;
  if (!contiguous && dst_dtype == src_dtype &&
      copy_rows(dst, src, static_cast<int>(itemsize(dst_dtype)), shape, stream))
    return;
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
