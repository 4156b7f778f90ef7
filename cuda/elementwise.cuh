// Shared pieces of the CUDA elementwise kernels: device types for kiln's
// dtypes, the strided offset calculator, and the launch helper.
//
// Note [CUDA elementwise]: operands arrive broadcast to the output's shape
// (stride 0 on broadcast dims) and in one compute dtype. The host merges dims
// that are contiguous across all operands, so contiguous tensors take the
// flat path (no index arithmetic); otherwise each thread turns its linear
// index into per-operand offsets. One kernel per dtype switches on the op:
// the branch is uniform across a launch, so it costs nothing measurable on
// memory-bound ops and keeps compile time (and CI time) small.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "core/coalesce.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/check.h"
#include "cuda/device_types.cuh"
#include "cuda/internal.h"
#include "ops/op_table.h"

namespace kiln::cuda {

constexpr int kMaxDims = 10;

// Linear index -> element offsets of N operands.
template <int N>
struct OffsetCalc {
  int ndim = 0;
  bool contiguous = true;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];

  __device__ void get(int64_t linear, int64_t (&offsets)[N]) const {
    for (int k = 0; k < N; ++k) offsets[k] = contiguous ? linear : 0;
    if (contiguous) return;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) offsets[k] += i * strides[d][k];
    }
  }
};

// Merges dims contiguous across all operands (as ops/cpu/loops.h does).
template <int N>
OffsetCalc<N> make_offset_calc(const Shape& shape, const std::array<const Tensor*, N>& ops,
                               const char* op) {
  OffsetCalc<N> c;
  std::array<const Shape*, N> strides;
  std::array<int64_t, N> unit;
  for (int k = 0; k < N; ++k) {
    strides[k] = &ops[k]->strides();
    unit[k] = 1;
  }
  const CoalescedDims<N> dims = coalesce_dims<N>(shape, strides, unit);
  const Shape& sizes = dims.sizes;
  KILN_CHECK(static_cast<int>(sizes.size()) <= kMaxDims, NotImplemented, "[", op,
             "] CUDA kernels support up to ", kMaxDims, " non-mergeable dims, got shape ", shape);
  c.ndim = static_cast<int>(sizes.size());
  c.contiguous = c.ndim <= 1;
  for (int k = 0; k < N && c.ndim == 1; ++k) c.contiguous = c.contiguous && dims.strides(0)[k] == 1;
  if (c.ndim == 0) c.contiguous = true;
  for (int d = 0; d < c.ndim; ++d) {
    c.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) c.strides[d][k] = dims.strides(d)[k];
  }
  return c;
}

// A grid-stride loop: thread-count independent, so any launch covers n.
#define KILN_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// Contiguous kernels move 16 bytes per access (V = 16 / sizeof(T) elements):
// the widest load a thread can issue, which memory-bound ops need to reach
// the card's bandwidth.
constexpr int kVectorBytes = 16;

// One input operand: device memory, or a host scalar passed by value.
template <typename T>
struct In {
  using A = acc_t<T>;
  const T* ptr = nullptr;  // null: every element is `value`
  // In the accumulation type: a Python number meeting a half tensor keeps
  // float precision (Note [Reduced-precision scalar operands], ops/elementwise.cpp).
  A value{};
  // Non-zero: element i is ptr[i % period], a contiguous block repeated along
  // broadcast leading dims (a bias added to every row).
  int64_t period = 0;
  __device__ A at(int64_t offset) const {
    return ptr ? static_cast<A>(ptr[period ? offset % period : offset]) : value;
  }
  template <int V>
  __device__ Pack<A, V> pack(int64_t p) const {
    Pack<A, V> r;
    if (ptr) {
      const int64_t first = period ? (p * V) % period : p * V;  // period % V == 0
      const Pack<T, V> raw = *reinterpret_cast<const Pack<T, V>*>(ptr + first);
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = static_cast<A>(raw.v[k]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = value;
    }
    return r;
  }
};

// The period of `t` read as a flat operand of the contiguous `out` (same
// shape): t's numel when t is contiguous, the size of its contiguous trailing
// block when its leading dims are broadcast (stride 0), and 0 when neither.
inline int64_t flat_period(const Tensor& t) {
  if (t.is_contiguous()) return t.numel();
  int64_t expected = 1, d = t.dim() - 1;
  for (; d >= 0 && t.stride(d) != 0; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return 0;
    expected *= t.size(d);
  }
  for (; d >= 0; --d)
    if (t.size(d) != 1 && t.stride(d) != 0) return 0;
  return expected;
}

inline bool is_aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;  // null (a scalar operand) passes
}

// Blocks for a flat kernel over n elements taken V at a time (at least one,
// so the tail of a short tensor still runs).
inline unsigned flat_grid(int64_t n, int V) { return grid_for(std::max<int64_t>(n / V, 1)); }

// The stream and device an op on `t` runs on (the thread's current stream).
struct LaunchContext {
  explicit LaunchContext(const Tensor& t)
      : guard(t.device().index), stream(stream_of(t.device().index)) {}
  DeviceGuard guard;
  cudaStream_t stream;
};

// Scratch bytes on `like`'s device (CUB's temporary storage), from the caching allocator and
// released to its cache when the tensor goes away.
inline Tensor scratch(const Tensor& like, size_t bytes) {
  return make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, like.device());
}

// Host entry points (registered by install_elementwise_kernels).
void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p);
void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace kiln::cuda
