// Fused softmax / log_softmax over the rows of a contiguous [rows, cols] tensor
// (Note [Fused nn kernels]). A row that fits in registers (a warp's for up to 1024 columns,
// a block's of up to 1024 threads * N values beyond) is read from global memory once with
// 16-byte loads, reduced (max, then sum of exp) with warp shuffles and written once. Longer
// rows take an online pass (running max, rescaled sum) and a second pass that re-reads the
// row and writes it.
#include "cuda/check.h"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/row_kernels.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Softmax (or log_softmax) in place of a row held in registers, padded with -inf;
// reduce(value, op, identity) combines the values of the threads sharing the row.
template <int N, typename A, typename Reduce>
__device__ __forceinline__ void softmax_in_registers(A (&v)[N], bool log, Reduce reduce) {
  A m = neg_inf<A>();
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmax(m, v[i]);
  m = reduce(m, MaxOp(), neg_inf<A>());
  // softmax keeps exp(v - m) in place (one exp per value); log_softmax keeps v.
  A s = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const A e = exp_acc(v[i] - m);
    if (!log) v[i] = e;
    s += e;
  }
  s = reduce(s, SumOp(), A(0));
  if (log) {
    const A log_s = log_acc(s);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = (v[i] - m) - log_s;
  } else {
    const A inv = A(1) / s;
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] *= inv;
  }
}

template <typename T, int V, int N, int MaxThreads>
__global__ void __launch_bounds__(MaxThreads)
    softmax_regs_kernel(T* out, const T* in, int64_t rows, int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const auto reduce = [&](A x, auto op, A identity) {
    return block_reduce(x, op, identity, scratch);
  };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A v[N];
    load_row<V>(v, in + r * cols, cols, neg_inf<A>());
    softmax_in_registers(v, log, reduce);
    store_row<V>(out + r * cols, v, cols);
  }
}

// Short rows: one warp per row, kRowsPerBlock rows per block, warp shuffles only; load_row /
// store_row see a 32-thread row (blockDim.x == 32). Capped at 64 registers (8 blocks per SM):
// 8 values per lane (up to 256 columns) fit every dtype; 32 (up to 1024) fit float and half
// types with 16-byte loads and spill without, so those rows go to the block kernel.
constexpr int kRowsPerBlock = 4;

template <typename T, int V, int N>
__global__ void __launch_bounds__(32 * kRowsPerBlock, 8)
    softmax_warp_kernel(T* out, const T* in, int64_t rows, int64_t cols, bool log) {
  using A = acc_t<T>;
  const auto reduce = [](A x, auto op, A) { return warp_reduce(x, op); };
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    A v[N];
    load_row<V>(v, in + r * cols, cols, neg_inf<A>());
    softmax_in_registers(v, log, reduce);
    store_row<V>(out + r * cols, v, cols);
  }
}

template <typename T, int V, int N>
void launch_warp(T* out, const T* in, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  const dim3 block(32, kRowsPerBlock);
  softmax_warp_kernel<T, V, N>
      <<<row_blocks((rows + kRowsPerBlock - 1) / kRowsPerBlock), block, 0, stream>>>(out, in, rows,
                                                                                     cols, log);
}

template <typename T>
__global__ void softmax_online_kernel(T* out, const T* in, int64_t rows, int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * cols;
    A row_max;
    const A s = row_online_sum_exp(x, cols, scratch, row_max);
    const A log_s = log_acc(s), inv = A(1) / s;
    T* y = out + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const A shifted = static_cast<A>(x[j]) - row_max;
      y[j] = static_cast<T>(log ? shifted - log_s : exp_acc(shifted) * inv);
    }
  }
}

template <typename T, int V, int N, int MaxThreads>
void launch_regs(T* out, const T* in, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  const int threads = threads_for((cols + V - 1) / V, N / V);
  softmax_regs_kernel<T, V, N, MaxThreads>
      <<<row_blocks(rows), threads, 0, stream>>>(out, in, rows, cols, log);
}

template <typename T, int V>
void launch_softmax(T* out, const T* in, int64_t rows, int64_t cols, bool log,
                    cudaStream_t stream) {
  // Note [Softmax row in registers]: the register file (64K per SM) bounds how many rows an
  // SM holds at once. ptxas -v on sm_90 (CUDA 12), 16-byte loads: 8 values x up to 1024
  // threads take 32 registers (two blocks per SM; doubles 48); 32 values x 512 threads take
  // 64 (two blocks per SM); 32 values x 1024 threads take 63, no spill (one block per SM: a
  // 32768-float row is half the register file). Without vector loads the 32-value variants
  // need more (117 at 512 threads; ~250 bytes spilled at 1024). Longer rows, and doubles past
  // 8192 columns, take the online kernel.
  if (cols <= 32 * 8) return launch_warp<T, V, 8>(out, in, rows, cols, log, stream);
  if constexpr (sizeof(T) <= 4 && V > 1) {
    if (cols <= 32 * 32) return launch_warp<T, V, 32>(out, in, rows, cols, log, stream);
  }
  if (cols <= 1024 * 8) return launch_regs<T, V, 8, 1024>(out, in, rows, cols, log, stream);
  if constexpr (sizeof(T) <= 4) {
    if (cols <= 512 * 32) return launch_regs<T, V, 32, 512>(out, in, rows, cols, log, stream);
    if (cols <= 1024 * 32) return launch_regs<T, V, 32, 1024>(out, in, rows, cols, log, stream);
  }
  softmax_online_kernel<T><<<row_blocks(rows), 1024, 0, stream>>>(out, in, rows, cols, log);
}

void softmax_lastdim_kernel(const Tensor& out, const Tensor& in, bool log) {
  const int64_t rows = in.size(0), cols = in.size(1);
  if (rows == 0 || cols == 0) return;
  LaunchContext ctx(out);
  dispatch_floating(in.dtype(), "softmax", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    constexpr int kVec = 16 / sizeof(T);
    T* y = static_cast<T*>(out.data_ptr());
    const T* x = static_cast<const T*>(in.data_ptr());
    const bool vec = vector_width<T>(x, cols) == kVec && vector_width<T>(y, cols) == kVec;
    if (vec) {
      launch_softmax<T, kVec>(y, x, rows, cols, log, ctx.stream);
    } else {
      launch_softmax<T, 1>(y, x, rows, cols, log, ctx.stream);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("softmax");
}

// Per row: grad_in = y * (g - sum(g * y)), or (log) g - exp(y) * sum(g). Rows up to 8192
// (doubles: 4096) columns are held in registers: g and y are read once.
template <typename T, int V, int N, int MaxThreads>
__global__ void __launch_bounds__(MaxThreads)
    softmax_backward_regs_kernel(T* grad_in, const T* grad_out, const T* out, int64_t rows,
                                 int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A g[N], y[N];
    load_row<V>(g, grad_out + r * cols, cols, A(0));
    load_row<V>(y, out + r * cols, cols, A(0));
    A s = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) s += log ? g[i] : g[i] * y[i];
    s = block_reduce(s, SumOp(), A(0), scratch);
#pragma unroll
    for (int i = 0; i < N; ++i) g[i] = log ? g[i] - exp_acc(y[i]) * s : y[i] * (g[i] - s);
    store_row<V>(grad_in + r * cols, g, cols);
  }
}

// Longer rows: the second pass re-reads g and y, mostly from L2.
template <typename T>
__global__ void softmax_backward_kernel(T* grad_in, const T* grad_out, const T* out, int64_t rows,
                                        int64_t cols, bool log) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* g = grad_out + r * cols;
    const T* y = out + r * cols;
    A s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      s += log ? static_cast<A>(g[j]) : static_cast<A>(g[j]) * static_cast<A>(y[j]);
    s = block_reduce(s, SumOp(), A(0), scratch);
    T* gi = grad_in + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const A gv = static_cast<A>(g[j]), yv = static_cast<A>(y[j]);
      gi[j] = static_cast<T>(log ? gv - exp_acc(yv) * s : yv * (gv - s));
    }
  }
}

void softmax_backward_lastdim_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                     const Tensor& out, bool log) {
  const int64_t rows = out.size(0), cols = out.size(1);
  if (rows == 0 || cols == 0) return;
  LaunchContext ctx(out);
  dispatch_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    constexpr int kVec = 16 / sizeof(T);
    constexpr int kThreadsMax = sizeof(T) == 8 ? 512 : 1024;
    T* gi = static_cast<T*>(grad_in.data_ptr());
    const T* g = static_cast<const T*>(grad_out.data_ptr());
    const T* y = static_cast<const T*>(out.data_ptr());
    const unsigned blocks = row_blocks(rows);
    if (cols > kThreadsMax * 8) {
      softmax_backward_kernel<T>
          <<<blocks, threads_for(cols, 8), 0, ctx.stream>>>(gi, g, y, rows, cols, log);
    } else if (vector_width<T>(gi, cols) == kVec && vector_width<T>(g, cols) == kVec &&
               vector_width<T>(y, cols) == kVec) {
      softmax_backward_regs_kernel<T, kVec, 8, kThreadsMax>
          <<<blocks, threads_for(cols / kVec, 8 / kVec), 0, ctx.stream>>>(gi, g, y, rows, cols,
                                                                          log);
    } else {
      softmax_backward_regs_kernel<T, 1, 8, kThreadsMax>
          <<<blocks, threads_for(cols, 8), 0, ctx.stream>>>(gi, g, y, rows, cols, log);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("softmax_backward");
}

}  // namespace

void install_softmax_kernels(Backend& b) {
  b.softmax_lastdim = softmax_lastdim_kernel;
  b.softmax_backward_lastdim = softmax_backward_lastdim_kernel;
}

}  // namespace kiln::cuda
