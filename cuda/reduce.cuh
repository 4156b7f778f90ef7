// Device pieces shared by the CUDA reduce kernels (reduce.cu: rows, reduce_columns.cu: inner > 1).
// Note [CUDA reductions]: the input is a contiguous [outer, R, inner] tensor reduced over R
// (ops/backend.h). Three kernel shapes, chosen on the host from R, outer and inner:
//  - rows (inner == 1, long rows): a row is split over `splits` blocks, each reading its share
//    with 16-byte loads and reducing through warp shuffles. With splits > 1 the blocks write
//    partials in the accumulation type to a scratch tensor from the caching allocator and a
//    second launch (one warp per row) reduces them, so a full reduction of 2^28 floats runs on
//    ~1000 blocks instead of one.
//  - warp rows (inner == 1, short rows): one warp per row, kThreads / 32 rows per block.
//  - columns (inner > 1, or rows of a few elements): threadIdx.x maps to outputs (coalesced
//    reads of each of the R rows), threadIdx.y splits R within the block, and with few outputs
//    and a long R, blockIdx.y splits R across blocks, their partials reduced by a second launch.
// Arithmetic and partials are in acc_t (float for half types). One kernel per dtype takes the op
// at run time; with_op switches once per thread, outside the element loops, so those compile
// per op without a branch per element. The split points depend only on the shapes, so results
// are deterministic.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/device_types.cuh"
#include "cuda/internal.h"
#include "ops/backend.h"

namespace kiln::cuda {

// Blocks a reduction aims for: enough to fill an H200 (132 SMs x 8 blocks of 256 threads).
constexpr int64_t kTargetBlocks = 1024;

// The dtype partials are kept in: the accumulation type of `t`.
inline DType reduce_acc_dtype(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t;
}

template <typename A>
__device__ __forceinline__ bool reduce_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return isnan(v);
  } else {
    return false;
  }
}

// The start value of an accumulator: combining it with any x gives x.
template <typename A>
__device__ __forceinline__ A reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Any:
      return A(0);
    case ReduceOp::Prod:
    case ReduceOp::All:
      return A(1);
    case ReduceOp::Max:
      if constexpr (std::is_floating_point_v<A>)
        return -static_cast<A>(INFINITY);
      else
        return std::numeric_limits<A>::lowest();
    case ReduceOp::Min:
      if constexpr (std::is_floating_point_v<A>)
        return static_cast<A>(INFINITY);
      else
        return std::numeric_limits<A>::max();
  }
  return A(0);
}

// Max/Min propagate NaN.
template <typename A>
__device__ __forceinline__ A reduce_combine(ReduceOp op, A x, A y) {
  switch (op) {
    case ReduceOp::Sum:
      return A(x + y);
    case ReduceOp::Prod:
      return A(x * y);
    case ReduceOp::Max:
      if (reduce_nan(x) || reduce_nan(y)) return reduce_nan(x) ? x : y;
      return x > y ? x : y;
    case ReduceOp::Min:
      if (reduce_nan(x) || reduce_nan(y)) return reduce_nan(x) ? x : y;
      return x < y ? x : y;
    case ReduceOp::All:
      return A(x && y);
    case ReduceOp::Any:
      return A(x || y);
  }
  return x;
}

// Calls f(op as a compile-time constant), so a hot loop written with reduce_combine(op, ...)
// inlines without a switch per element.
template <typename F>
__device__ __forceinline__ auto with_op(ReduceOp op, F&& f) {
  using std::integral_constant;
  switch (op) {
    case ReduceOp::Prod:
      return f(integral_constant<ReduceOp, ReduceOp::Prod>{});
    case ReduceOp::Max:
      return f(integral_constant<ReduceOp, ReduceOp::Max>{});
    case ReduceOp::Min:
      return f(integral_constant<ReduceOp, ReduceOp::Min>{});
    case ReduceOp::All:
      return f(integral_constant<ReduceOp, ReduceOp::All>{});
    case ReduceOp::Any:
      return f(integral_constant<ReduceOp, ReduceOp::Any>{});
    default:
      return f(integral_constant<ReduceOp, ReduceOp::Sum>{});
  }
}

// __shfl_xor_sync has no overloads below 32 bits (bool, int8, int16).
template <typename A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  if constexpr (sizeof(A) < 4) {
    return static_cast<A>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), mask));
  } else {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
}

// Every lane of the warp gets the reduction of the warp's 32 values.
template <typename A>
__device__ __forceinline__ A reduce_warp(ReduceOp op, A v) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v = reduce_combine(op, v, shfl_xor(v, mask));
  return v;
}

// out[o, j] = reduce(in[o, :, j]) for inner > 1 or rows of a few elements (reduce_columns.cu).
void reduce_columns(ReduceOp op, const Tensor& out, const Tensor& in, cudaStream_t stream);

}  // namespace kiln::cuda
