// CUDA reductions: the backend entry and the row kernels (inner == 1) of Note [CUDA reductions]
// in cuda/reduce.cuh; reduce_columns.cu has the inner > 1 kernels.
#include <algorithm>
#include <cmath>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/reduce.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Rows up to this long get one warp each; longer rows get one or more blocks.
constexpr int64_t kWarpRowMax = 2048;
// Rows up to this long go to the columns kernel (a few threads per row).
constexpr int64_t kTinyRowMax = 32;

// Combines x[lane], x[lane + lanes], ... (n elements) into acc. The row may start anywhere:
// a scalar head up to the first 16-byte boundary, then 16-byte vectors (four loads in flight
// per thread), then a scalar tail.
template <typename Op, typename T, typename A>
__device__ __forceinline__ A accumulate_row(Op op, A acc, const T* x, int64_t n, int64_t lane,
                                            int64_t lanes) {
  constexpr int V = 16 / sizeof(T);
  const int64_t misaligned = (reinterpret_cast<uintptr_t>(x) % 16) / sizeof(T);
  const int64_t head = misaligned == 0 ? 0 : (V - misaligned < n ? V - misaligned : n);
  for (int64_t i = lane; i < head; i += lanes) acc = reduce_combine(op, acc, static_cast<A>(x[i]));
  const Pack<T, V>* vec = reinterpret_cast<const Pack<T, V>*>(x + head);
  const int64_t nvec = (n - head) / V;
  int64_t i = lane;
  for (; i + 3 * lanes < nvec; i += 4 * lanes) {
    Pack<T, V> p[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) p[u] = vec[i + u * lanes];
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) acc = reduce_combine(op, acc, static_cast<A>(p[u].v[k]));
  }
  for (; i < nvec; i += lanes) {
    const Pack<T, V> p = vec[i];
#pragma unroll
    for (int k = 0; k < V; ++k) acc = reduce_combine(op, acc, static_cast<A>(p.v[k]));
  }
  for (int64_t j = head + nvec * V + lane; j < n; j += lanes)
    acc = reduce_combine(op, acc, static_cast<A>(x[j]));
  return acc;
}

// Block b reduces share b % splits of row b / splits into out[b]: the result when splits == 1,
// else a partial of the [rows, splits] scratch.
template <typename T, typename Out>
__global__ void rows_kernel(ReduceOp op, int64_t rows, int64_t n, int64_t splits,
                            const T* __restrict__ in, Out* __restrict__ out) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t b = blockIdx.x; b < rows * splits; b += gridDim.x) {
    const int64_t row = b / splits, share = b % splits;
    A acc = with_op(op, [&](auto k) {
      return accumulate_row(k, reduce_identity<A>(op), in + row * n, n,
                            share * blockDim.x + threadIdx.x, splits * blockDim.x);
    });
    acc = reduce_warp(op, acc);
    __syncthreads();  // the previous row's reader of scratch is done
    if (lane == 0) scratch[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : reduce_identity<A>(op);
      acc = reduce_warp(op, acc);
      if (lane == 0) out[b] = static_cast<Out>(acc);
    }
  }
}

// One warp per row of n elements.
template <typename T, typename Out>
__global__ void warp_rows_kernel(ReduceOp op, int64_t rows, int64_t n, const T* __restrict__ in,
                                 Out* __restrict__ out) {
  using A = acc_t<T>;
  const int64_t warps = blockDim.x >> 5;
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * warps + (threadIdx.x >> 5); row < rows;
       row += int64_t(gridDim.x) * warps) {
    A acc = with_op(op, [&](auto k) {
      return accumulate_row(k, reduce_identity<A>(op), in + row * n, n, lane, 32);
    });
    acc = reduce_warp(op, acc);
    if (lane == 0) out[row] = static_cast<Out>(acc);
  }
}

inline unsigned capped_grid(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
}

template <typename T, typename Out>
void launch_warp_rows(ReduceOp op, int64_t rows, int64_t n, const T* in, Out* out,
                      cudaStream_t stream) {
  const int64_t rows_per_block = kThreads / 32;
  warp_rows_kernel<T, Out>
      <<<capped_grid((rows + rows_per_block - 1) / rows_per_block), kThreads, 0, stream>>>(
          op, rows, n, in, out);
}

// out[r] = reduce(in[r, :]) for `rows` contiguous rows of n elements.
template <typename T>
void reduce_rows(ReduceOp op, const Tensor& out, const Tensor& in, int64_t rows, int64_t n,
                 cudaStream_t stream) {
  using A = acc_t<T>;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  if (n <= kWarpRowMax) return launch_warp_rows(op, rows, n, src, dst, stream);
  // Each block reads at least four 16-byte vectors per thread.
  const int64_t per_block = kThreads * (16 / sizeof(T)) * 4;
  const int64_t splits =
      std::clamp<int64_t>(std::min(kTargetBlocks / rows, n / per_block), 1, kTargetBlocks);
  if (splits == 1) {
    rows_kernel<T, T><<<capped_grid(rows), kThreads, 0, stream>>>(op, rows, n, 1, src, dst);
    return;
  }
  Tensor partials = make_tensor({rows, splits}, reduce_acc_dtype(in.dtype()), in.device());
  A* part = static_cast<A*>(partials.data_ptr());
  rows_kernel<T, A>
      <<<capped_grid(rows * splits), kThreads, 0, stream>>>(op, rows, n, splits, src, part);
  launch_warp_rows(op, rows, splits, part, dst, stream);
}

void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  const int64_t n = in.size(1), inner = in.size(2);
  if (out.numel() == 0) return;
  LaunchContext ctx(out);
  if (inner > 1 || n <= kTinyRowMax) {
    reduce_columns(op, out, in, ctx.stream);
  } else {
    dispatch_all(in.dtype(), "reduce", [&](auto tag) {
      using T = device_t<typename decltype(tag)::type>;
      reduce_rows<T>(op, out, in, in.size(0), n, ctx.stream);
    });
  }
  KILN_CUDA_CHECK_LAUNCH("reduce");
}

}  // namespace

void install_reduce_kernels(Backend& b) { b.reduce = reduce_kernel; }

}  // namespace kiln::cuda
