// The columns kernel of Note [CUDA reductions] (cuda/reduce.cuh): out[o, j] = reduce(in[o, :, j])
// with threads mapped to outputs, for inner > 1 and for rows of a few elements.
#include <algorithm>
#include <cmath>

#include "cuda/elementwise.cuh"
#include "cuda/reduce.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Block (bx, by), by a power of two: thread (x, y) reduces rows y, y + by, ... of output
// blockIdx.x * bx + x over the R slice [blockIdx.y * chunk, + chunk), then the by values meet
// in shared memory. out[blockIdx.y * outputs + c] is the result, or with gridDim.y > 1 a
// partial of the [splits, outputs] scratch.
template <typename T, typename Out>
__global__ void columns_kernel(ReduceOp op, int64_t outer, int64_t n, int64_t inner, int64_t chunk,
                               const T* __restrict__ in, Out* __restrict__ out) {
  using A = acc_t<T>;
  __shared__ A buf[kThreads];
  const int64_t outputs = outer * inner;
  const int64_t r0 = blockIdx.y * chunk, r1 = r0 + chunk < n ? r0 + chunk : n;
  const int slot = threadIdx.y * blockDim.x + threadIdx.x;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x); base < outputs;
       base += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = base + threadIdx.x;
    A acc = reduce_identity<A>(op);
    if (c < outputs) {
      const T* col = in + (c / inner) * n * inner + c % inner;
      acc = with_op(op, [&](auto o) {
        A a = acc;
        const int64_t step = blockDim.y;
        int64_t k = r0 + threadIdx.y;
        // U loads in flight before combining (more of them for narrow types).
        constexpr int U = sizeof(T) >= 4 ? 4 : 8;
        for (; k + (U - 1) * step < r1; k += U * step) {
          T v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) v[u] = col[(k + u * step) * inner];
#pragma unroll
          for (int u = 0; u < U; ++u) a = reduce_combine(o, a, static_cast<A>(v[u]));
        }
        for (; k < r1; k += step) a = reduce_combine(o, a, static_cast<A>(col[k * inner]));
        return a;
      });
    }
    if (blockDim.y > 1) {
      buf[slot] = acc;
      __syncthreads();
      for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
        if (threadIdx.y < half)
          buf[slot] = reduce_combine(op, buf[slot], buf[slot + half * blockDim.x]);
        __syncthreads();
      }
      acc = buf[threadIdx.x];
      __syncthreads();  // everyone has read buf before the next iteration writes it
    }
    if (threadIdx.y == 0 && c < outputs) out[blockIdx.y * outputs + c] = static_cast<Out>(acc);
  }
}

struct ColumnGrid {
  unsigned bx = 1, by = 1;
  unsigned blocks_x = 1, splits = 1;
  int64_t chunk = 0;
};

int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v && p < kThreads) p *= 2;
  return p;
}

// Up to 32 consecutive outputs per warp row (coalesced when inner is wide); when inner is
// narrow, threadIdx.y takes consecutive rows of R instead, so a warp still reads one run of
// memory. With `split`, R is cut across blockIdx.y until about kTargetBlocks blocks run.
ColumnGrid column_grid(int64_t outputs, int64_t n, int64_t inner, bool split) {
  ColumnGrid g;
  g.by = static_cast<unsigned>(std::min(kThreads / pow2_at_least(inner), pow2_at_least(n)));
  g.bx = kThreads / g.by;
  const int64_t blocks_x = std::clamp<int64_t>((outputs + g.bx - 1) / g.bx, 1, int64_t{1} << 20);
  g.blocks_x = static_cast<unsigned>(blocks_x);
  int64_t splits = 1;
  // Each thread keeps at least 16 rows of its slice.
  if (split)
    splits = std::clamp<int64_t>(std::min(kTargetBlocks / blocks_x, n / (g.by * 16)), 1, 65535);
  g.chunk = (n + splits - 1) / splits;
  g.splits = static_cast<unsigned>(g.chunk == 0 ? 1 : (n + g.chunk - 1) / g.chunk);
  return g;
}

template <typename T>
void launch_columns(ReduceOp op, const Tensor& out, const Tensor& in, cudaStream_t stream) {
  using A = acc_t<T>;
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
  const int64_t outputs = outer * inner;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const ColumnGrid g = column_grid(outputs, n, inner, true);
  if (g.splits == 1) {
    columns_kernel<T, T><<<dim3(g.blocks_x, 1), dim3(g.bx, g.by), 0, stream>>>(
        op, outer, n, inner, std::max<int64_t>(n, 1), src, dst);
    return;
  }
  Tensor partials = make_tensor({static_cast<int64_t>(g.splits), outputs},
                                reduce_acc_dtype(in.dtype()), in.device());
  A* part = static_cast<A*>(partials.data_ptr());
  columns_kernel<T, A><<<dim3(g.blocks_x, g.splits), dim3(g.bx, g.by), 0, stream>>>(
      op, outer, n, inner, g.chunk, src, part);
  const ColumnGrid f = column_grid(outputs, g.splits, outputs, false);
  columns_kernel<A, T><<<dim3(f.blocks_x, 1), dim3(f.bx, f.by), 0, stream>>>(
      op, 1, g.splits, outputs, g.splits, part, dst);
}

}  // namespace

void reduce_columns(ReduceOp op, const Tensor& out, const Tensor& in, cudaStream_t stream) {
  dispatch_all(in.dtype(), "reduce", [&](auto tag) {
    launch_columns<device_t<typename decltype(tag)::type>>(op, out, in, stream);
  });
}

}  // namespace kiln::cuda
