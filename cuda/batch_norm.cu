// Batch norm over a contiguous [outer, C, inner] tensor (NCHW: [N, C, H * W]; channels-last:
// [N * H * W, C, 1]), in three launches per direction and no host sync:
//   1. per-channel partial sums over chunks of the channel's elements (blocks (chunk, channel)
//      for NCHW; 32-channel column tiles for inner == 1, so reads stay coalesced);
//   2. one thread per channel combines the chunks: statistics, running-stat update, gradients
//      of weight and bias, and the per-channel coefficients of
//   3. one elementwise pass out = (p - P[c]) * A[c] + (q - Q[c]) * B[c] + D[c], the forward
//      (p = x) and the input gradient (p = g, q = x) alike.
// The forward sums x - K with K the channel's first element, which keeps
// sum(x^2) - sum(x)^2 / n from cancelling when the mean is large against the spread.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/row_kernels.cuh"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Statistics pass: a += x - K, b += (x - K)^2.
template <typename T>
struct StatsSums {
  const T* x;
  int64_t inner;
  __device__ acc_t<T> center(int64_t c) const { return static_cast<acc_t<T>>(x[c * inner]); }
  __device__ void add(int64_t i, acc_t<T> k, acc_t<T>& a, acc_t<T>& b) const {
    const acc_t<T> d = static_cast<acc_t<T>>(x[i]) - k;
    a += d;
    b += d * d;
  }
};

// Backward pass: a += g, b += g * (x - mean).
template <typename T>
struct GradSums {
  const T* x;
  const T* g;
  const acc_t<T>* mean;
  __device__ acc_t<T> center(int64_t c) const { return mean[c]; }
  __device__ void add(int64_t i, acc_t<T> m, acc_t<T>& a, acc_t<T>& b) const {
    const acc_t<T> gv = static_cast<acc_t<T>>(g[i]);
    a += gv;
    b += gv * (static_cast<acc_t<T>>(x[i]) - m);
  }
};

// a / b, in 32 bits when `small` (both fit): 64-bit division is slow on the GPU.
__device__ __forceinline__ int64_t div_index(int64_t a, int64_t b, bool small) {
  if (small) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

// inner > 1: block (blockIdx.x = channel, blockIdx.y = chunk) sums its chunk of the channel's
// outer * inner elements.
template <typename A, typename Sums>
__global__ void channel_partial_kernel(A* part1, A* part2, Sums sums, int64_t outer, int64_t C,
                                       int64_t inner, int64_t chunk, bool small) {
  __shared__ A scratch[32];
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t j1 = j0 + chunk < m ? j0 + chunk : m;
  const A k = sums.center(c);
  A a = 0, b = 0;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const int64_t o = div_index(j, inner, small);
    sums.add((o * C + c) * inner + (j - o * inner), k, a, b);
  }
  a = block_reduce(a, SumOp(), A(0), scratch);
  b = block_reduce(b, SumOp(), A(0), scratch);
  if (threadIdx.x == 0) {
    part1[blockIdx.y * C + c] = a;
    part2[blockIdx.y * C + c] = b;
  }
}

constexpr int kTile = 32, kTileRows = 8;

// inner == 1: block (32 channels of blockIdx.x, rows chunk blockIdx.y) of an [outer, C] matrix.
template <typename A, typename Sums>
__global__ void column_partial_kernel(A* part1, A* part2, Sums sums, int64_t outer, int64_t C,
                                      int64_t chunk) {
  __shared__ A t1[kTileRows][kTile + 1];
  __shared__ A t2[kTileRows][kTile + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t r1 = r0 + chunk < outer ? r0 + chunk : outer;
  A a = 0, b = 0;
  if (c < C) {
    const A k = sums.center(c);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kTileRows) sums.add(r * C + c, k, a, b);
  }
  t1[threadIdx.y][threadIdx.x] = a;
  t2[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  for (int y = 1; y < kTileRows; ++y) {
    a += t1[y][threadIdx.x];
    b += t2[y][threadIdx.x];
  }
  part1[blockIdx.y * C + c] = a;
  part2[blockIdx.y * C + c] = b;
}

// Per-channel coefficients of the elementwise pass, [5, C]: P, A, Q, B, D.
template <typename A>
struct Coef {
  A* v;
  int64_t C;
  __device__ void set(int64_t c, A p, A a, A q, A b, A d) const {
    v[c] = p;
    v[C + c] = a;
    v[2 * C + c] = q;
    v[3 * C + c] = b;
    v[4 * C + c] = d;
  }
};

template <typename A>
__device__ __forceinline__ A param(const A* t, int64_t c, A fallback) {
  return t ? t[c] : fallback;
}

template <typename T, typename A = acc_t<T>>
__global__ void stats_final_kernel(Coef<A> coef, A* mean, A* invstd, A* running_mean,
                                   A* running_var, const A* part1, const A* part2, int64_t chunks,
                                   int64_t C, int64_t n, const T* x, int64_t inner, const A* weight,
                                   const A* bias, A momentum, A eps, bool training) {
  KILN_GRID_STRIDE(c, C) {
    A m, is;
    if (training) {
      A s1 = 0, s2 = 0;
      for (int64_t k = 0; k < chunks; ++k) {
        s1 += part1[k * C + c];
        s2 += part2[k * C + c];
      }
      const A nn = static_cast<A>(n), d = s1 / nn;
      A var = s2 / nn - d * d;
      var = var > A(0) ? var : A(0);
      m = static_cast<A>(x[c * inner]) + d;  // the shift K of the partial sums
      is = A(1) / sqrt(var + eps);
      if (running_mean) running_mean[c] = (A(1) - momentum) * running_mean[c] + momentum * m;
      if (running_var)
        running_var[c] =
            (A(1) - momentum) * running_var[c] + momentum * var * nn / static_cast<A>(n - 1);
    } else {
      m = running_mean[c];
      is = A(1) / sqrt(running_var[c] + eps);
    }
    if (mean) mean[c] = m;
    if (invstd) invstd[c] = is;
    coef.set(c, m, is * param(weight, c, A(1)), A(0), A(0), param(bias, c, A(0)));
  }
}

template <typename A>
__global__ void grad_final_kernel(Coef<A> coef, A* grad_weight, A* grad_bias, const A* part1,
                                  const A* part2, int64_t chunks, int64_t C, int64_t n,
                                  const A* mean, const A* invstd, const A* weight, bool training) {
  KILN_GRID_STRIDE(c, C) {
    A sg = 0, sgx = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sg += part1[k * C + c];
      sgx += part2[k * C + c];
    }
    const A is = invstd[c], scale = is * param(weight, c, A(1)), nn = static_cast<A>(n);
    if (grad_weight) grad_weight[c] = sgx * is;
    if (grad_bias) grad_bias[c] = sg;
    // grad_in = scale * (g - mean(g) - xhat * mean(g * xhat)), xhat = (x - mean) * invstd.
    if (training) {
      coef.set(c, sg / nn, scale, mean[c], -scale * is * is * sgx / nn, A(0));
    } else {
      coef.set(c, A(0), scale, A(0), A(0), A(0));
    }
  }
}

// out = (p - P[c]) * A[c] + (q - Q[c]) * B[c] + D[c], V consecutive elements per thread: V
// divides inner (one channel), or inner == 1 and V divides C (V consecutive channels).
template <typename T, int V>
__global__ void channel_affine_kernel(T* out, const T* p, const T* q, const acc_t<T>* coef,
                                      int64_t total, int64_t C, int64_t inner, bool small) {
  using A = acc_t<T>;
  KILN_GRID_STRIDE(v, total / V) {
    const int64_t i = v * V;
    const int64_t row = div_index(i, inner, small);  // i / inner, then its channel
    const int64_t c0 = row - div_index(row, C, small) * C;
    const Pack<T, V> pv = reinterpret_cast<const Pack<T, V>*>(p)[v];
    Pack<T, V> qv;
    if (q) qv = reinterpret_cast<const Pack<T, V>*>(q)[v];
    Pack<T, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t c = inner == 1 ? c0 + k : c0;
      A y = (static_cast<A>(pv.v[k]) - coef[c]) * coef[C + c] + coef[4 * C + c];
      if (q) y += (static_cast<A>(qv.v[k]) - coef[2 * C + c]) * coef[3 * C + c];
      r.v[k] = static_cast<T>(y);
    }
    reinterpret_cast<Pack<T, V>*>(out)[v] = r;
  }
}

template <typename T>
void launch_affine(T* out, const T* p, const T* q, const acc_t<T>* coef, int64_t total, int64_t C,
                   int64_t inner, cudaStream_t stream) {
  constexpr int kVec = kVectorBytes / sizeof(T);
  const bool small = total < (int64_t{1} << 31);
  const bool aligned =
      is_aligned(out, kVectorBytes) && is_aligned(p, kVectorBytes) && is_aligned(q, kVectorBytes);
  if (aligned && (inner % kVec == 0 || (inner == 1 && C % kVec == 0))) {
    channel_affine_kernel<T, kVec>
        <<<flat_grid(total, kVec), kThreads, 0, stream>>>(out, p, q, coef, total, C, inner, small);
  } else {
    channel_affine_kernel<T, 1>
        <<<flat_grid(total, 1), kThreads, 0, stream>>>(out, p, q, coef, total, C, inner, small);
  }
}

// Blocks in flight for the partial sums: a few per SM on the largest GPUs.
constexpr int64_t kTargetBlocks = 2048;

struct Chunks {
  int64_t count, size;
};

// How the partial kernels split a channel's outer * inner elements (or, inner == 1, the rows).
Chunks plan_chunks(int64_t outer, int64_t C, int64_t inner) {
  if (inner == 1) {
    const int64_t tiles = (C + kTile - 1) / kTile;
    int64_t count = std::min((outer + 255) / 256, std::max<int64_t>(1, kTargetBlocks / tiles));
    count = std::clamp<int64_t>(count, 1, 65535);
    return {count, (outer + count - 1) / count};
  }
  const int64_t m = outer * inner;
  int64_t count = std::min((m + 4095) / 4096, std::max<int64_t>(1, kTargetBlocks / C));
  count = std::clamp<int64_t>(count, 1, 65535);
  return {count, (m + count - 1) / count};
}

template <typename A, typename Sums>
void launch_partials(A* p1, A* p2, const Sums& sums, int64_t outer, int64_t C, int64_t inner,
                     const Chunks& ch, cudaStream_t stream) {
  if (inner == 1) {
    const dim3 grid(static_cast<unsigned>((C + kTile - 1) / kTile),
                    static_cast<unsigned>(ch.count));
    column_partial_kernel<A>
        <<<grid, dim3(kTile, kTileRows), 0, stream>>>(p1, p2, sums, outer, C, ch.size);
  } else {
    const dim3 grid(static_cast<unsigned>(C), static_cast<unsigned>(ch.count));
    const bool small = outer * C * inner < (int64_t{1} << 31);
    channel_partial_kernel<A>
        <<<grid, kThreads, 0, stream>>>(p1, p2, sums, outer, C, inner, ch.size, small);
  }
}

template <typename A>
A* ptr_or_null_mut(const Tensor& t) {
  return t.defined() ? static_cast<A*>(t.data_ptr()) : nullptr;
}

void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& invstd,
                        const Tensor& in, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, bool training,
                        double momentum, double eps) {
  const int64_t outer = in.size(0), C = in.size(1), inner = in.size(2);
  const int64_t total = in.numel();
  if (total == 0) return;
  LaunchContext ctx(in);
  const DType stat = in.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Chunks ch = plan_chunks(outer, C, inner);
  Tensor coef = make_tensor({5, C}, stat, in.device());
  Tensor part;
  if (training) part = make_tensor({2, ch.count, C}, stat, in.device());
  dispatch_floating(in.dtype(), "batch_norm", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(in.data_ptr());
    A* p1 = nullptr;
    if (training) {
      p1 = static_cast<A*>(part.data_ptr());
      launch_partials<A>(p1, p1 + ch.count * C, StatsSums<T>{x, inner}, outer, C, inner, ch,
                         ctx.stream);
    }
    stats_final_kernel<T><<<grid_for(C), kThreads, 0, ctx.stream>>>(
        Coef<A>{static_cast<A*>(coef.data_ptr()), C}, ptr_or_null_mut<A>(mean),
        ptr_or_null_mut<A>(invstd), ptr_or_null_mut<A>(running_mean),
        ptr_or_null_mut<A>(running_var), p1, p1 ? p1 + ch.count * C : nullptr, ch.count, C,
        outer * inner, x, inner, ptr_or_null<A>(weight), ptr_or_null<A>(bias),
        static_cast<A>(momentum), static_cast<A>(eps), training);
    launch_affine<T>(static_cast<T*>(out.data_ptr()), x, nullptr,
                     static_cast<const A*>(coef.data_ptr()), total, C, inner, ctx.stream);
  });
  KILN_CUDA_CHECK_LAUNCH("batch_norm");
}

void batch_norm_backward(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& in, const Tensor& mean,
                         const Tensor& invstd, const Tensor& weight, bool training) {
  const int64_t outer = in.size(0), C = in.size(1), inner = in.size(2);
  const int64_t total = in.numel();
  if (total == 0) return;
  LaunchContext ctx(in);
  const DType stat = mean.dtype();
  const Chunks ch = plan_chunks(outer, C, inner);
  Tensor coef = make_tensor({5, C}, stat, in.device());
  Tensor part = make_tensor({2, ch.count, C}, stat, in.device());
  dispatch_floating(in.dtype(), "batch_norm_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(in.data_ptr());
    const T* g = static_cast<const T*>(grad_out.data_ptr());
    const A* mu = static_cast<const A*>(mean.data_ptr());
    A* p1 = static_cast<A*>(part.data_ptr());
    launch_partials<A>(p1, p1 + ch.count * C, GradSums<T>{x, g, mu}, outer, C, inner, ch,
                       ctx.stream);
    grad_final_kernel<A><<<grid_for(C), kThreads, 0, ctx.stream>>>(
        Coef<A>{static_cast<A*>(coef.data_ptr()), C}, ptr_or_null_mut<A>(grad_weight),
        ptr_or_null_mut<A>(grad_bias), p1, p1 + ch.count * C, ch.count, C, outer * inner, mu,
        static_cast<const A*>(invstd.data_ptr()), ptr_or_null<A>(weight), training);
    if (grad_in.defined())
      launch_affine<T>(static_cast<T*>(grad_in.data_ptr()), g, training ? x : nullptr,
                       static_cast<const A*>(coef.data_ptr()), total, C, inner, ctx.stream);
  });
  KILN_CUDA_CHECK_LAUNCH("batch_norm_backward");
}

}  // namespace

void install_batch_norm_kernels(Backend& b) {
  b.batch_norm_forward = batch_norm_forward;
  b.batch_norm_backward = batch_norm_backward;
}

}  // namespace kiln::cuda
