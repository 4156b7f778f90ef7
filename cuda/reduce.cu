// Row reductions on CUDA: out[r] = reduce(in[r, :]) over a contiguous
// [outer, inner] input, one block per row (the ops/backend.h contract).
// Half types and sums accumulate in float/int64 like the CPU kernels.
#include <cmath>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

template <typename A>
__device__ bool nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return isnan(v);
  } else {
    return false;
  }
}

template <typename A>
__device__ A combine(ReduceOp op, A x, A y) {
  switch (op) {
    case ReduceOp::Sum: return x + y;
    case ReduceOp::Prod: return x * y;
    case ReduceOp::Max:
      if (nan_value(x) || nan_value(y)) return nan_value(x) ? x : y;
      return x > y ? x : y;
    case ReduceOp::Min:
      if (nan_value(x) || nan_value(y)) return nan_value(x) ? x : y;
      return x < y ? x : y;
    case ReduceOp::All: return A(x && y);
    case ReduceOp::Any: return A(x || y);
  }
  return x;
}

template <typename T>
__global__ void reduce_rows_kernel(ReduceOp op, int64_t inner, T* out, const T* in) {
  using A = acc_t<T>;
  __shared__ A partial[kThreads];
  const T* row = in + blockIdx.x * inner;
  // Max/Min start from the row's first element; the front end refuses empty rows.
  A acc = (op == ReduceOp::Sum || op == ReduceOp::Any)   ? A(0)
          : (op == ReduceOp::Prod || op == ReduceOp::All) ? A(1)
                                                          : static_cast<A>(row[0]);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) acc = combine(op, acc, static_cast<A>(row[i]));
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] = combine(op, partial[threadIdx.x], partial[threadIdx.x + width]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(partial[0]);
}

void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in) {
  const int64_t outer = in.size(0), inner = in.size(1);
  if (outer == 0) return;
  LaunchContext ctx(out);
  dispatch_all(in.dtype(), "reduce", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    reduce_rows_kernel<T><<<static_cast<unsigned>(outer), kThreads, 0, ctx.stream>>>(
        op, inner, static_cast<T*>(out.data_ptr()), static_cast<const T*>(in.data_ptr()));
  });
  KILN_CUDA_CHECK_LAUNCH("reduce");
}

}  // namespace

void install_reduce_kernels(Backend& b) { b.reduce = reduce_kernel; }

}  // namespace kiln::cuda
