// fill on CUDA: the value is converted on the host, so the kernel only writes
// a bit pattern of the element's width (4 widths x contiguous/strided).
#include <cstdint>

#include "cuda/check.h"
#include "cuda/internal.h"

namespace kiln::cuda {

namespace {

template <typename U, bool Contiguous>
__global__ void fill_kernel(U* dst, U value, int64_t n, StridedShape shape) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t d = i;
    if constexpr (!Contiguous) {
      d = 0;
      int64_t rem = i;
      for (int k = shape.ndim - 1; k >= 0; --k) {
        d += (rem % shape.sizes[k]) * shape.dst_strides[k];
        rem /= shape.sizes[k];
      }
    }
    dst[d] = value;
  }
}

template <typename U>
void launch_width(void* dst, uint64_t bits, int64_t n, const StridedShape& shape, bool contiguous,
                  cudaStream_t stream) {
  const U v = static_cast<U>(bits);
  if (contiguous) {
    fill_kernel<U, true><<<grid_for(n), kThreads, 0, stream>>>(static_cast<U*>(dst), v, n, shape);
  } else {
    fill_kernel<U, false><<<grid_for(n), kThreads, 0, stream>>>(static_cast<U*>(dst), v, n, shape);
  }
  KILN_CUDA_CHECK_LAUNCH("fill_");
}

}  // namespace

void launch_fill(void* dst, int elem_size, uint64_t bits, int64_t n, const StridedShape& shape,
                 bool contiguous, cudaStream_t stream) {
  switch (elem_size) {
    case 1: return launch_width<uint8_t>(dst, bits, n, shape, contiguous, stream);
    case 2: return launch_width<uint16_t>(dst, bits, n, shape, contiguous, stream);
    case 4: return launch_width<uint32_t>(dst, bits, n, shape, contiguous, stream);
    default: return launch_width<uint64_t>(dst, bits, n, shape, contiguous, stream);
  }
}

}  // namespace kiln::cuda
