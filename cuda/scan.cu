// CUDA arg-reductions (max/min with indices) and inclusive scans over the
// rows of a contiguous [outer, n] input (the ops/backend.h contracts). Scans are
// CUB's device-wide scan around the shared scan functors (Note [Scan functors]).
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cmath>
#include <cub/device/device_scan.cuh>
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/reduce.cuh"
#include "ops/dispatch.h"
#include "ops/math/scan_functors.h"

namespace kiln::cuda {

namespace {

template <typename A>
__device__ bool nan_of(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return isnan(v);
  } else {
    return false;
  }
}

// Whether (av, ai) wins over (bv, bi): NaN is the extreme, ties go to the
// lower index (PyTorch's first occurrence).
template <typename A>
__device__ bool better(bool is_max, A av, int64_t ai, A bv, int64_t bi) {
  const bool an = nan_of(av), bn = nan_of(bv);
  if (an != bn) return an;
  if (an || av == bv) return ai < bi;
  return is_max ? av > bv : av < bv;
}

// Block b takes share b % splits of row b / splits (elements share * blockDim.x + t, stepping
// by splits * blockDim.x) and writes its winner to values[b], indices[b]: the result when
// splits == 1, else a partial that arg_reduce_finish combines. A long row on few outputs (a full
// argmax) is thus read by many blocks, not one.
template <typename T, typename V>
__global__ void arg_reduce_rows(bool is_max, int64_t inner, int64_t splits, V* values,
                                int64_t* indices, const T* in) {
  using A = acc_t<T>;
  __shared__ A best_v[kThreads];
  __shared__ int64_t best_i[kThreads];
  const int64_t share = blockIdx.x % splits;
  const T* row = in + (blockIdx.x / splits) * inner;
  A bv = static_cast<A>(row[0]);  // a valid candidate for every share: ties go to index 0
  int64_t bi = 0;
  for (int64_t i = share * blockDim.x + threadIdx.x; i < inner; i += splits * blockDim.x) {
    A v = static_cast<A>(row[i]);
    if (better(is_max, v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width &&
        better(is_max, best_v[threadIdx.x + width], best_i[threadIdx.x + width],
               best_v[threadIdx.x], best_i[threadIdx.x])) {
      best_v[threadIdx.x] = best_v[threadIdx.x + width];
      best_i[threadIdx.x] = best_i[threadIdx.x + width];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    values[blockIdx.x] = static_cast<V>(best_v[0]);
    indices[blockIdx.x] = best_i[0];
  }
}

// values[r], indices[r] = the winner among row r's `splits` partials.
template <typename A, typename T>
__global__ void arg_reduce_finish(bool is_max, int64_t rows, int64_t splits, const A* part_v,
                                  const int64_t* part_i, T* values, int64_t* indices) {
  KILN_GRID_STRIDE(r, rows) {
    A bv = part_v[r * splits];
    int64_t bi = part_i[r * splits];
    for (int64_t s = 1; s < splits; ++s) {
      if (better(is_max, part_v[r * splits + s], part_i[r * splits + s], bv, bi)) {
        bv = part_v[r * splits + s];
        bi = part_i[r * splits + s];
      }
    }
    values[r] = static_cast<T>(bv);
    indices[r] = bi;
  }
}

void arg_reduce_kernel(ReduceOp op, const Tensor& values, const Tensor& indices,
                       const Tensor& in) {
  const int64_t outer = in.size(0), inner = in.size(1);
  if (outer == 0) return;
  LaunchContext ctx(in);
  const bool is_max = op == ReduceOp::Max;
  // Splits fill about kTargetBlocks blocks, each reading at least 8 elements per thread.
  const int64_t splits =
      std::clamp<int64_t>(std::min(kTargetBlocks / outer, inner / (kThreads * 8)), 1,
                          kTargetBlocks);
  dispatch_all(in.dtype(), is_max ? "max" : "min", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    const T* src = static_cast<const T*>(in.data_ptr());
    T* val = static_cast<T*>(values.data_ptr());
    if (splits == 1) {
      arg_reduce_rows<T, T><<<static_cast<unsigned>(outer), kThreads, 0, ctx.stream>>>(
          is_max, inner, 1, val, indices.data<int64_t>(), src);
      return;
    }
    Tensor part_v = make_tensor({outer * splits}, reduce_acc_dtype(in.dtype()), in.device());
    Tensor part_i = make_tensor({outer * splits}, DType::Int64, in.device());
    arg_reduce_rows<T, A><<<static_cast<unsigned>(outer * splits), kThreads, 0, ctx.stream>>>(
        is_max, inner, splits, static_cast<A*>(part_v.data_ptr()), part_i.data<int64_t>(), src);
    arg_reduce_finish<A, T><<<grid_for(outer), kThreads, 0, ctx.stream>>>(
        is_max, outer, splits, static_cast<const A*>(part_v.data_ptr()), part_i.data<int64_t>(),
        val, indices.data<int64_t>());
  });
  KILN_CUDA_CHECK_LAUNCH(is_max ? "max" : "min");
}

// Element i of the flat [outer, n] input as its scan state (Note [Scan functors]).
template <typename T, typename Fn>
struct LoadState {
  const T* in;
  int64_t n;
  __host__ __device__ typename Fn::State operator()(int64_t i) const {
    return Fn::make(static_cast<acc_t<T>>(in[i]), i % n);
  }
};

template <typename T>
struct ToAcc {
  __host__ __device__ acc_t<T> operator()(T x) const { return static_cast<acc_t<T>>(x); }
};

// The row of flat element i: the key that restarts the scan at each row.
struct RowOf {
  int64_t n;
  __host__ __device__ int64_t operator()(int64_t i) const { return i / n; }
};

template <typename S, typename T>
__global__ void split_states(int64_t total, const S* states, T* values, int64_t* indices) {
  KILN_GRID_STRIDE(i, total) {
    values[i] = static_cast<T>(states[i].value);
    indices[i] = states[i].index;
  }
}

// CUB's device-wide scan (decoupled look-back: one pass, every SM busy, however few rows):
// a plain scan for one row, a scan by row key for several.
template <typename In, typename Out, typename Fn>
void cub_scan(In in, Out out, Fn fn, int64_t outer, int64_t n, const Tensor& like,
              cudaStream_t stream, const char* name) {
  const int64_t total = outer * n;
  size_t bytes = 0;
  auto run = [&](void* temp) {
    if (outer == 1) return cub::DeviceScan::InclusiveScan(temp, bytes, in, out, fn, total, stream);
    auto keys = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), RowOf{n});
    return cub::DeviceScan::InclusiveScanByKey(temp, bytes, keys, in, out, fn, total,
                                               ::cuda::std::equal_to<>(), stream);
  };
  KILN_CUDA_CHECK(run(nullptr), name);
  Tensor temp = scratch(like, bytes);
  KILN_CUDA_CHECK(run(temp.data_ptr()), name);
}

void scan_kernel(ScanOp op, const Tensor& out, const Tensor& indices, const Tensor& in) {
  const int64_t outer = in.size(0), n = in.size(1);
  if (outer == 0 || n == 0) return;
  LaunchContext ctx(out);
  const char* name = op_name(op);
  dispatch_all(in.dtype(), name, [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    using A = acc_t<T>;
    const T* src = static_cast<const T*>(in.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    math::visit_scan<A>(op, [&](auto fn) {
      using Fn = decltype(fn);
      if constexpr (math::is_unsupported_v<Fn>) {
        fail(ErrorKind::NotImplemented, "[", name, "] not implemented for dtype ", in.dtype());
      } else if constexpr (Fn::indexed) {
        // Value and index travel together; CUB writes the pairs, one pass splits them.
        using S = typename Fn::State;
        const int64_t total = outer * n;
        Tensor states = scratch(in, sizeof(S) * static_cast<size_t>(total));
        S* st = static_cast<S*>(states.data_ptr());
        auto load = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                                    LoadState<T, Fn>{src, n});
        cub_scan(load, st, fn, outer, n, in, ctx.stream, name);
        split_states<<<grid_for(total), kThreads, 0, ctx.stream>>>(total, st, dst,
                                                                   indices.data<int64_t>());
      } else if constexpr (std::is_same_v<T, A>) {
        cub_scan(src, dst, fn, outer, n, in, ctx.stream, name);
      } else {
        cub_scan(thrust::make_transform_iterator(src, ToAcc<T>{}), dst, fn, outer, n, in,
                 ctx.stream, name);
      }
    });
  });
  KILN_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void install_scan_kernels(Backend& b) {
  b.arg_reduce = arg_reduce_kernel;
  b.scan = scan_kernel;
}

}  // namespace kiln::cuda
