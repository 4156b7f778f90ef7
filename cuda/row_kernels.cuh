// Device helpers of the fused row kernels (softmax.cu, layer_norm.cu, cross_entropy.cu):
// block-wide reductions through warp shuffles, an online sum of exp over a row, and a
// thread's share of a row held in registers with 16-byte loads (Note [Fused nn kernels] in
// ops/cpu/fused_nn_kernels.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/tensor.h"
#include "cuda/device_types.cuh"

namespace kiln::cuda {

template <typename A>
__device__ __forceinline__ A neg_inf() {
  return -static_cast<A>(INFINITY);
}

__device__ __forceinline__ float exp_acc(float x) { return expf(x); }
__device__ __forceinline__ double exp_acc(double x) { return ::exp(x); }
__device__ __forceinline__ float log_acc(float x) { return logf(x); }
__device__ __forceinline__ double log_acc(double x) { return ::log(x); }

struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
// NaN does not win here; it still reaches every result through the row's sum.
struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return fmax(a, b);
  }
};

template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the block (blockDim.x a multiple of 32); every thread gets the result.
// `scratch` holds 32 values; consecutive calls may share it.
template <typename A, typename Op>
__device__ A block_reduce(A v, Op op, A identity, A* scratch) {
  v = warp_reduce(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : identity;
  return warp_reduce(v, op);
}

// One read of a row x[0, cols) by the block: returns sum(exp(x - row_max)) and sets row_max
// (every thread gets both), with a running max and a sum rescaled when the max grows. With
// V > 1 the row is 16-byte aligned and cols a multiple of V: threads load V elements at once
// and rescale once per chunk.
template <int V = 1, typename T, typename A>
__device__ A row_online_sum_exp(const T* x, int64_t cols, A* scratch, A& row_max) {
  A m = neg_inf<A>(), s = 0;
  for (int64_t c = threadIdx.x; c * V < cols; c += blockDim.x) {
    A v[V];
    if constexpr (V == 1) {
      v[0] = static_cast<A>(x[c]);
    } else {
      const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(x)[c];
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = static_cast<A>(p.v[i]);
    }
    A chunk_max = v[0];
#pragma unroll
    for (int i = 1; i < V; ++i) chunk_max = v[i] > chunk_max ? v[i] : chunk_max;
    if (chunk_max > m) {
      s = s * exp_acc(m - chunk_max);
      m = chunk_max;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      // -inf adds nothing (and -inf - -inf would be NaN); the max itself adds exactly 1 (so
      // does an inf max); NaN reaches the sum.
      if (v[i] != neg_inf<A>()) s += v[i] == m ? A(1) : exp_acc(v[i] - m);
    }
  }
  row_max = block_reduce(m, MaxOp(), neg_inf<A>(), scratch);
  s = m == neg_inf<A>() ? A(0) : s * exp_acc(m - row_max);
  return block_reduce(s, SumOp(), A(0), scratch);
}

// A thread's share of a row: N values in N / V chunks of V consecutive elements; the thread's
// chunk k is the row's chunk threadIdx.x + k * blockDim.x. With V > 1 the row is 16-byte
// aligned and cols a multiple of V, so a chunk is either whole or past the end.
template <int V>
__device__ __forceinline__ bool chunk_valid(int k, int64_t cols) {
  return (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(k) * blockDim.x + 1) * V <= cols;
}

template <int V, int N, typename T, typename A>
__device__ __forceinline__ void load_row(A (&v)[N], const T* row, int64_t cols, A pad) {
#pragma unroll
  for (int k = 0; k < N / V; ++k) {
    if (chunk_valid<V>(k, cols)) {
      const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(
          row)[threadIdx.x + static_cast<int64_t>(k) * blockDim.x];
#pragma unroll
      for (int i = 0; i < V; ++i) v[k * V + i] = static_cast<A>(p.v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[k * V + i] = pad;
    }
  }
}

template <int V, int N, typename T, typename A>
__device__ __forceinline__ void store_row(T* row, const A (&v)[N], int64_t cols) {
#pragma unroll
  for (int k = 0; k < N / V; ++k) {
    if (!chunk_valid<V>(k, cols)) continue;
    Pack<T, V> p;
#pragma unroll
    for (int i = 0; i < V; ++i) p.v[i] = static_cast<T>(v[k * V + i]);
    reinterpret_cast<Pack<T, V>*>(row)[threadIdx.x + static_cast<int64_t>(k) * blockDim.x] = p;
  }
}

// The data of an optional (possibly undefined) tensor argument, or null.
template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Elements per 16-byte load when every row of a [rows, cols] tensor at `ptr` is 16-byte
// aligned, else 1.
template <typename T>
inline int vector_width(const void* ptr, int64_t cols) {
  constexpr int v = 16 / sizeof(T);
  const bool aligned = reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && cols % v == 0;
  return aligned ? v : 1;
}

// Threads (a multiple of 32, at most 1024) for `work` items of one row at `per_thread` each.
inline int threads_for(int64_t work, int64_t per_thread) {
  int64_t t = (work + per_thread - 1) / per_thread;
  t = (t + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

// One block per row, the grid capped (kernels loop over rows by gridDim.x).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
}

}  // namespace kiln::cuda
