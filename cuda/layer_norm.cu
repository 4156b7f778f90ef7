// Fused layer_norm (and rms_norm: no mean) over the rows of a contiguous [rows, cols] tensor
// (Note [Fused nn kernels]).
// Forward: one block per row; a row that fits in registers is read once (16-byte loads) and
// normalized with two in-register passes (mean, then centered squares); longer rows re-read
// global memory. Backward: grad_input one block per row; grad_weight / grad_bias as column
// sums, partial sums per chunk of rows first and a second small kernel over the chunks.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/row_kernels.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

template <typename A>
__device__ __forceinline__ A rsqrt_acc(A v) {
  return A(1) / sqrt(v);
}

template <typename T, int V, int N, int MaxThreads>
__global__ void __launch_bounds__(MaxThreads)
    layer_norm_regs_kernel(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in, const T* weight,
                           const T* bias, int64_t rows, int64_t cols, acc_t<T> eps) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A v[N];
    load_row<V>(v, in + r * cols, cols, A(0));
    A mu = 0;  // rms_norm (mean null) does not center
    if (mean) {
      A s = 0;
#pragma unroll
      for (int i = 0; i < N; ++i) s += v[i];
      mu = block_reduce(s, SumOp(), A(0), scratch) / static_cast<A>(cols);
    }
    A sq = 0;
#pragma unroll
    for (int k = 0; k < N / V; ++k) {
      if (!chunk_valid<V>(k, cols)) continue;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const A c = v[k * V + i] - mu;
        sq += c * c;
      }
    }
    const A rs = rsqrt_acc(block_reduce(sq, SumOp(), A(0), scratch) / static_cast<A>(cols) + eps);
    if (threadIdx.x == 0) {
      if (mean) mean[r] = mu;
      rstd[r] = rs;
    }
#pragma unroll
    for (int k = 0; k < N / V; ++k) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int64_t j = (threadIdx.x + static_cast<int64_t>(k) * blockDim.x) * V + i;
        A y = (v[k * V + i] - mu) * rs;
        if (j < cols) {
          if (weight) y *= static_cast<A>(weight[j]);
          if (bias) y += static_cast<A>(bias[j]);
        }
        v[k * V + i] = y;
      }
    }
    store_row<V>(out + r * cols, v, cols);
  }
}

template <typename T>
__global__ void layer_norm_long_kernel(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in,
                                       const T* weight, const T* bias, int64_t rows, int64_t cols,
                                       acc_t<T> eps) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * cols;
    A mu = 0;  // rms_norm (mean null) does not center
    if (mean) {
      A s = 0;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += static_cast<A>(x[j]);
      mu = block_reduce(s, SumOp(), A(0), scratch) / static_cast<A>(cols);
    }
    A sq = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const A c = static_cast<A>(x[j]) - mu;
      sq += c * c;
    }
    const A rs = rsqrt_acc(block_reduce(sq, SumOp(), A(0), scratch) / static_cast<A>(cols) + eps);
    if (threadIdx.x == 0) {
      if (mean) mean[r] = mu;
      rstd[r] = rs;
    }
    T* y = out + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      A v = (static_cast<A>(x[j]) - mu) * rs;
      if (weight) v *= static_cast<A>(weight[j]);
      if (bias) v += static_cast<A>(bias[j]);
      y[j] = static_cast<T>(v);
    }
  }
}

template <typename T, int V, int N, int MaxThreads>
void launch_regs(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in, const T* w, const T* b,
                 int64_t rows, int64_t cols, acc_t<T> eps, cudaStream_t stream) {
  const int threads = threads_for((cols + V - 1) / V, N / V);
  layer_norm_regs_kernel<T, V, N, MaxThreads>
      <<<row_blocks(rows), threads, 0, stream>>>(out, mean, rstd, in, w, b, rows, cols, eps);
}

template <typename T, int V>
void launch_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in, const T* w, const T* b,
                    int64_t rows, int64_t cols, acc_t<T> eps, cudaStream_t stream) {
  // Register budgets as in Note [Softmax row in registers] (cuda/softmax.cu); 32 values per
  // thread without vector loads spill (weight / bias indexing), so unaligned rows skip it.
  if (cols <= 1024 * 8)
    return launch_regs<T, V, 8, 1024>(out, mean, rstd, in, w, b, rows, cols, eps, stream);
  if constexpr (sizeof(T) <= 4 && V > 1) {
    if (cols <= 512 * 32)
      return launch_regs<T, V, 32, 512>(out, mean, rstd, in, w, b, rows, cols, eps, stream);
  }
  layer_norm_long_kernel<T>
      <<<row_blocks(rows), 1024, 0, stream>>>(out, mean, rstd, in, w, b, rows, cols, eps);
}

void layer_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                               const Tensor& in, const Tensor& weight, const Tensor& bias,
                               double eps) {
  const int64_t rows = in.size(0), cols = in.size(1);
  if (rows == 0 || cols == 0) return;
  LaunchContext ctx(out);
  dispatch_floating(in.dtype(), "layer_norm", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    constexpr int kVec = 16 / sizeof(T);
    T* y = static_cast<T*>(out.data_ptr());
    const T* x = static_cast<const T*>(in.data_ptr());
    A* mu = mean.defined() ? static_cast<A*>(mean.data_ptr()) : nullptr;
    A* rs = static_cast<A*>(rstd.data_ptr());
    const T* w = ptr_or_null<T>(weight);
    const T* b = ptr_or_null<T>(bias);
    if (vector_width<T>(x, cols) == kVec && vector_width<T>(y, cols) == kVec) {
      launch_forward<T, kVec>(y, mu, rs, x, w, b, rows, cols, static_cast<A>(eps), ctx.stream);
    } else {
      launch_forward<T, 1>(y, mu, rs, x, w, b, rows, cols, static_cast<A>(eps), ctx.stream);
    }
  });
  KILN_CUDA_CHECK_LAUNCH("layer_norm");
}

// grad_in = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), gy = g * weight, per row; rows up
// to 8192 (doubles: 4096) columns held in registers, so g and x are read once.
template <typename T, int V, int N, int MaxThreads>
__global__ void __launch_bounds__(MaxThreads)
    layer_norm_grad_input_regs_kernel(T* grad_in, const T* grad_out, const T* in,
                                      const acc_t<T>* mean, const acc_t<T>* rstd, const T* weight,
                                      int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A gy[N], xhat[N];
    load_row<V>(gy, grad_out + r * cols, cols, A(0));
    load_row<V>(xhat, in + r * cols, cols, A(0));
    const A mu = mean ? mean[r] : A(0), rs = rstd[r];
    A sum_gy = 0, sum_gy_xhat = 0;
#pragma unroll
    for (int k = 0; k < N / V; ++k) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int64_t j = (threadIdx.x + static_cast<int64_t>(k) * blockDim.x) * V + i;
        A& gv = gy[k * V + i];
        if (weight && j < cols) gv *= static_cast<A>(weight[j]);
        xhat[k * V + i] = (xhat[k * V + i] - mu) * rs;
        sum_gy += gv;
        sum_gy_xhat += gv * xhat[k * V + i];  // padding has gv == 0
      }
    }
    A a = 0;  // mean(gy); rms_norm has no centering term
    if (mean) a = block_reduce(sum_gy, SumOp(), A(0), scratch) / static_cast<A>(cols);
    const A c = block_reduce(sum_gy_xhat, SumOp(), A(0), scratch) / static_cast<A>(cols);
#pragma unroll
    for (int i = 0; i < N; ++i) gy[i] = rs * (gy[i] - a - xhat[i] * c);
    store_row<V>(grad_in + r * cols, gy, cols);
  }
}

// Longer rows: the second pass re-reads g and x, mostly from L2.
template <typename T>
__global__ void layer_norm_grad_input_kernel(T* grad_in, const T* grad_out, const T* in,
                                             const acc_t<T>* mean, const acc_t<T>* rstd,
                                             const T* weight, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * cols;
    const T* g = grad_out + r * cols;
    const A mu = mean ? mean[r] : A(0), rs = rstd[r];
    A sum_gy = 0, sum_gy_xhat = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      A gy = static_cast<A>(g[j]);
      if (weight) gy *= static_cast<A>(weight[j]);
      sum_gy += gy;
      sum_gy_xhat += gy * (static_cast<A>(x[j]) - mu) * rs;
    }
    A a = 0;  // mean(gy); rms_norm has no centering term
    if (mean) a = block_reduce(sum_gy, SumOp(), A(0), scratch) / static_cast<A>(cols);
    const A c = block_reduce(sum_gy_xhat, SumOp(), A(0), scratch) / static_cast<A>(cols);
    T* gi = grad_in + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      A gy = static_cast<A>(g[j]);
      if (weight) gy *= static_cast<A>(weight[j]);
      gi[j] = static_cast<T>(rs * (gy - a - (static_cast<A>(x[j]) - mu) * rs * c));
    }
  }
}

constexpr int kColTile = 32, kColRows = 8;

// Column sums of g * xhat (into part_w) and g (into part_b) over the rows of chunk
// blockIdx.y, for the kColTile * V columns of blockIdx.x, V consecutive columns per thread
// (with V > 1, 16-byte loads: rows aligned and cols a multiple of V); either output may be
// null. The sums run in the same order for every V. Over GPT-2's 8192 x 768 float32 rows on
// the H200 one column per thread took 24.5 us per call, V = 4 takes 20 (reading g and x: 15).
template <typename T, int V>
__global__ void layer_norm_col_partial_kernel(acc_t<T>* part_w, acc_t<T>* part_b, const T* grad_out,
                                              const T* in, const acc_t<T>* mean,
                                              const acc_t<T>* rstd, int64_t rows, int64_t cols,
                                              int64_t chunk_rows) {
  using A = acc_t<T>;
  constexpr int kCols = kColTile * V;
  __shared__ A sw_tile[kColRows][kCols + 1];
  __shared__ A sb_tile[kColRows][kCols + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int64_t j = c0 + static_cast<int64_t>(threadIdx.x) * V;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  A sw[V], sb[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sw[i] = sb[i] = A(0);
  if (j < cols) {
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColRows) {
      const A mu = mean ? mean[r] : A(0), rs = rstd[r];
      const Pack<T, V> g = *reinterpret_cast<const Pack<T, V>*>(grad_out + r * cols + j);
      const Pack<T, V> x = *reinterpret_cast<const Pack<T, V>*>(in + r * cols + j);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const A gv = static_cast<A>(g.v[i]);
        sw[i] += gv * (static_cast<A>(x.v[i]) - mu) * rs;
        sb[i] += gv;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    sw_tile[threadIdx.y][threadIdx.x * V + i] = sw[i];
    sb_tile[threadIdx.y][threadIdx.x * V + i] = sb[i];
  }
  __syncthreads();
  // Every thread of the block sums the kColRows partials of some of the block's columns.
  for (int c = threadIdx.y * kColTile + threadIdx.x; c < kCols; c += kColTile * kColRows) {
    if (c0 + c >= cols) break;
    A tw = sw_tile[0][c], tb = sb_tile[0][c];
    for (int k = 1; k < kColRows; ++k) {
      tw += sw_tile[k][c];
      tb += sb_tile[k][c];
    }
    if (part_w) part_w[blockIdx.y * cols + c0 + c] = tw;
    if (part_b) part_b[blockIdx.y * cols + c0 + c] = tb;
  }
}

// Sums the chunks' partial column sums: a block per kColTile columns, its kColRows rows of
// threads splitting the chunks (a thread per column alone would walk all chunks serially).
template <typename T>
__global__ void layer_norm_col_final_kernel(T* grad_weight, T* grad_bias, const acc_t<T>* part_w,
                                            const acc_t<T>* part_b, int64_t chunks, int64_t cols) {
  using A = acc_t<T>;
  __shared__ A sw_tile[kColRows][kColTile + 1];
  __shared__ A sb_tile[kColRows][kColTile + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  A sw = 0, sb = 0;
  if (j < cols) {
    for (int64_t k = threadIdx.y; k < chunks; k += kColRows) {
      if (part_w) sw += part_w[k * cols + j];
      if (part_b) sb += part_b[k * cols + j];
    }
  }
  sw_tile[threadIdx.y][threadIdx.x] = sw;
  sb_tile[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  for (int k = 1; k < kColRows; ++k) {
    sw += sw_tile[k][threadIdx.x];
    sb += sb_tile[k][threadIdx.x];
  }
  if (grad_weight) grad_weight[j] = static_cast<T>(sw);
  if (grad_bias) grad_bias[j] = static_cast<T>(sb);
}

void layer_norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                                const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const int64_t rows = in.size(0), cols = in.size(1);
  if (rows == 0 || cols == 0) return;
  LaunchContext ctx(in);
  const bool want_wb = grad_weight.defined() || grad_bias.defined();
  // Enough row chunks to fill the GPU, each at least 32 rows long.
  const int64_t chunk_rows = std::max<int64_t>(32, (rows + 255) / 256);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  Tensor part_w, part_b;
  if (grad_weight.defined()) part_w = make_tensor({chunks, cols}, rstd.dtype(), in.device());
  if (grad_bias.defined()) part_b = make_tensor({chunks, cols}, rstd.dtype(), in.device());
  dispatch_floating(in.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(grad_out.data_ptr());
    const T* x = static_cast<const T*>(in.data_ptr());
    const A* mu = mean.defined() ? static_cast<const A*>(mean.data_ptr()) : nullptr;
    const A* rs = static_cast<const A*>(rstd.data_ptr());
    if (grad_in.defined()) {
      constexpr int kVec = 16 / sizeof(T);
      constexpr int kThreadsMax = sizeof(T) == 8 ? 512 : 1024;
      T* gi = static_cast<T*>(grad_in.data_ptr());
      const T* w = ptr_or_null<T>(weight);
      const unsigned blocks = row_blocks(rows);
      if (cols > kThreadsMax * 8) {
        layer_norm_grad_input_kernel<T>
            <<<blocks, threads_for(cols, 8), 0, ctx.stream>>>(gi, g, x, mu, rs, w, rows, cols);
      } else if (vector_width<T>(gi, cols) == kVec && vector_width<T>(g, cols) == kVec &&
                 vector_width<T>(x, cols) == kVec) {
        layer_norm_grad_input_regs_kernel<T, kVec, 8, kThreadsMax>
            <<<blocks, threads_for(cols / kVec, 8 / kVec), 0, ctx.stream>>>(gi, g, x, mu, rs, w,
                                                                            rows, cols);
      } else {
        layer_norm_grad_input_regs_kernel<T, 1, 8, kThreadsMax>
            <<<blocks, threads_for(cols, 8), 0, ctx.stream>>>(gi, g, x, mu, rs, w, rows, cols);
      }
    }
    if (!want_wb) return;
    A* pw = part_w.defined() ? static_cast<A*>(part_w.data_ptr()) : nullptr;
    A* pb = part_b.defined() ? static_cast<A*>(part_b.data_ptr()) : nullptr;
    const auto partials = [&](auto kernel, int64_t v) {
      const dim3 grid(static_cast<unsigned>((cols + kColTile * v - 1) / (kColTile * v)),
                      static_cast<unsigned>(chunks));
      kernel<<<grid, dim3(kColTile, kColRows), 0, ctx.stream>>>(pw, pb, g, x, mu, rs, rows, cols,
                                                                chunk_rows);
    };
    constexpr int kVec = 16 / sizeof(T);
    if (vector_width<T>(g, cols) == kVec && vector_width<T>(x, cols) == kVec) {
      partials(layer_norm_col_partial_kernel<T, kVec>, kVec);
    } else {
      partials(layer_norm_col_partial_kernel<T, 1>, 1);
    }
    const unsigned col_blocks = static_cast<unsigned>((cols + kColTile - 1) / kColTile);
    layer_norm_col_final_kernel<T><<<col_blocks, dim3(kColTile, kColRows), 0, ctx.stream>>>(
        grad_weight.defined() ? static_cast<T*>(grad_weight.data_ptr()) : nullptr,
        grad_bias.defined() ? static_cast<T*>(grad_bias.data_ptr()) : nullptr, pw, pb, chunks,
        cols);
  });
  KILN_CUDA_CHECK_LAUNCH("layer_norm_backward");
}

}  // namespace

void install_layer_norm_kernels(Backend& b) {
  b.layer_norm_forward = layer_norm_forward_kernel;
  b.layer_norm_backward = layer_norm_backward_kernel;
}

}  // namespace kiln::cuda
