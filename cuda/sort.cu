// CUDA sorting family (sort, unique of sorted data, row gather/scatter) and
// nonzero, on CUB. Scratch memory comes from kiln's caching allocator.
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

// Sort keys are unsigned integers whose order is the value order PyTorch
// uses: every NaN above +inf, -0.0 equal to +0.0, signed integers offset so
// negatives come first. CUB's segmented sort compares keys (small segments
// take a merge-sort path), and NaN breaks float comparisons, so floats are
// never sorted as floats. Values are gathered from the input afterwards.
template <typename T>
struct sort_key {
  using type = std::make_unsigned_t<T>;
};
template <>
struct sort_key<bool> {
  using type = uint8_t;
};
template <>
struct sort_key<float> {
  using type = uint32_t;
};
template <>
struct sort_key<double> {
  using type = uint64_t;
};
template <>
struct sort_key<__half> {
  using type = uint16_t;
};
template <>
struct sort_key<__nv_bfloat16> {
  using type = uint16_t;
};

template <typename T>
__device__ typename sort_key<T>::type ordered_bits(T v) {
  using U = typename sort_key<T>::type;
  constexpr U kSign = U(1) << (sizeof(U) * 8 - 1);
  if constexpr (std::is_integral_v<T>) {
    U bits = static_cast<U>(v);
    return std::is_signed_v<T> ? U(bits ^ kSign) : bits;
  } else {
    const auto x = static_cast<acc_t<T>>(v);
    if (isnan(x)) return ~U(0);
    if (x == 0) return kSign;  // -0.0 sorts with +0.0
    U bits;
    memcpy(&bits, &v, sizeof(U));
    return (bits & kSign) ? U(~bits) : U(bits | kSign);
  }
}

template <typename T>
__global__ void prepare_sort_kernel(int64_t total, int64_t n, const T* in,
                                    typename sort_key<T>::type* keys, int64_t* idx,
                                    int64_t* offsets, int64_t outer) {
  KILN_GRID_STRIDE(i, total) {
    keys[i] = ordered_bits(in[i]);
    idx[i] = i % n;
  }
  KILN_GRID_STRIDE(r, outer + 1) { offsets[r] = r * n; }
}

template <typename T>
__global__ void take_columns_kernel(int64_t total, int64_t n, int64_t k, const int64_t* idx,
                                    const T* in, T* values, int64_t* indices) {
  KILN_GRID_STRIDE(i, total) {
    const int64_t row = i / k, col = i % k;
    const int64_t j = idx[row * n + col];
    indices[i] = j;
    values[i] = in[row * n + j];  // the original value (NaN bits kept)
  }
}

// Sorts rows of unsigned keys carrying their column indices.
template <typename K>
void sort_keys(const K* keys_in, K* keys_out, const int64_t* idx_in, int64_t* idx_out,
               const int64_t* offsets, int64_t total, int64_t outer, bool descending,
               const Tensor& like, cudaStream_t stream) {
  auto run = [&](void* temp, size_t& bytes) {
    if (descending) {
      return cub::DeviceSegmentedSort::StableSortPairsDescending(
          temp, bytes, keys_in, keys_out, idx_in, idx_out, total, outer, offsets, offsets + 1,
          stream);
    }
    return cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys_in, keys_out, idx_in,
                                                     idx_out, total, outer, offsets,
                                                     offsets + 1, stream);
  };
  size_t bytes = 0;
  KILN_CUDA_CHECK(run(nullptr, bytes), "sort");
  Tensor temp = scratch(like, bytes);
  KILN_CUDA_CHECK(run(temp.data_ptr(), bytes), "sort");
}

template <typename T>
void sort_typed(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending,
                int64_t k, cudaStream_t stream) {
  using K = typename sort_key<T>::type;
  const int64_t outer = in.size(0), n = in.size(1), total = outer * n;
  const DType key_dtype = sizeof(K) == 8 ? DType::Int64
                          : sizeof(K) == 4 ? DType::Int32
                          : sizeof(K) == 2 ? DType::Int16
                                           : DType::UInt8;
  Tensor keys_in = make_tensor(in.sizes(), key_dtype, in.device());
  Tensor keys_out = make_tensor(in.sizes(), key_dtype, in.device());
  Tensor idx_in = make_tensor(in.sizes(), DType::Int64, in.device());
  Tensor idx_out = make_tensor(in.sizes(), DType::Int64, in.device());
  Tensor offsets = make_tensor({outer + 1}, DType::Int64, in.device());
  const T* src = static_cast<const T*>(in.data_ptr());
  K* keys = static_cast<K*>(keys_in.data_ptr());
  prepare_sort_kernel<T><<<grid_for(std::max(total, outer + 1)), kThreads, 0, stream>>>(
      total, n, src, keys, idx_in.data<int64_t>(), offsets.data<int64_t>(), outer);
  KILN_CUDA_CHECK_LAUNCH("sort");
  sort_keys<K>(keys, static_cast<K*>(keys_out.data_ptr()), idx_in.data<int64_t>(),
               idx_out.data<int64_t>(), offsets.data<int64_t>(), total, outer, descending, in,
               stream);
  const int64_t taken = outer * k;
  if (taken == 0) return;
  take_columns_kernel<T><<<grid_for(taken), kThreads, 0, stream>>>(
      taken, n, k, idx_out.data<int64_t>(), src, static_cast<T*>(values.data_ptr()),
      indices.data<int64_t>());
  KILN_CUDA_CHECK_LAUNCH("sort");
}

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending,
                 int64_t k) {
  if (in.numel() == 0) return;
  LaunchContext ctx(in);
  switch (in.dtype()) {
    case DType::Float32: return sort_typed<float>(values, indices, in, descending, k, ctx.stream);
    case DType::Float64: return sort_typed<double>(values, indices, in, descending, k, ctx.stream);
    case DType::Float16: return sort_typed<__half>(values, indices, in, descending, k, ctx.stream);
    case DType::BFloat16:
      return sort_typed<__nv_bfloat16>(values, indices, in, descending, k, ctx.stream);
    case DType::Int64: return sort_typed<int64_t>(values, indices, in, descending, k, ctx.stream);
    case DType::Int32: return sort_typed<int32_t>(values, indices, in, descending, k, ctx.stream);
    case DType::Int16: return sort_typed<int16_t>(values, indices, in, descending, k, ctx.stream);
    case DType::Int8: return sort_typed<int8_t>(values, indices, in, descending, k, ctx.stream);
    case DType::Bool:
    case DType::UInt8: return sort_typed<uint8_t>(values, indices, in, descending, k, ctx.stream);
    default: break;
  }
  fail(ErrorKind::NotImplemented, "[sort] not implemented on CUDA for dtype ", in.dtype());
}

template <typename T>
__global__ void gather_rows_kernel(int64_t total, int64_t k, int64_t n, bool scatter, T* out,
                                   const T* src, const int64_t* index) {
  KILN_GRID_STRIDE(i, total) {
    const int64_t row = i / k;
    if (scatter) {
      out[row * n + index[i]] = src[i];
    } else {
      out[i] = src[row * n + index[i]];
    }
  }
}

void gather_rows_host(const Tensor& out, const Tensor& src, const Tensor& index, bool scatter) {
  const int64_t total = index.numel();
  if (total == 0) return;
  LaunchContext ctx(out);
  const int64_t k = index.size(1), n = scatter ? out.size(1) : src.size(1);
  dispatch_all(out.dtype(), "gather_rows", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    gather_rows_kernel<T><<<grid_for(total), kThreads, 0, ctx.stream>>>(
        total, k, n, scatter, static_cast<T*>(out.data_ptr()),
        static_cast<const T*>(src.data_ptr()), index.data<int64_t>());
  });
  KILN_CUDA_CHECK_LAUNCH("gather_rows");
}

// flags[i] = 1 where sorted[i] starts a group (NaN != NaN: each NaN is its own).
template <typename T>
__global__ void group_starts_kernel(int64_t n, const T* s, int64_t* flags) {
  KILN_GRID_STRIDE(i, n) {
    flags[i] = (i == 0 || !(static_cast<acc_t<T>>(s[i]) == static_cast<acc_t<T>>(s[i - 1]))) ? 1 : 0;
  }
}

template <typename T>
__global__ void unique_write_kernel(int64_t n, const T* s, const int64_t* perm,
                                    const int64_t* group_plus_one, T* out, int64_t* inverse,
                                    unsigned long long* counts) {
  KILN_GRID_STRIDE(i, n) {
    const int64_t g = group_plus_one[i] - 1;
    if (i == 0 || group_plus_one[i] != group_plus_one[i - 1]) out[g] = s[i];
    inverse[perm[i]] = g;
    atomicAdd(counts + g, 1ull);
  }
}

int64_t unique_sorted_host(const Tensor& out, const Tensor& inverse, const Tensor& counts,
                           const Tensor& sorted, const Tensor& perm) {
  const int64_t n = sorted.numel();
  if (n == 0) return 0;
  LaunchContext ctx(sorted);
  Tensor groups = make_tensor({n}, DType::Int64, sorted.device());
  KILN_CUDA_CHECK(cudaMemsetAsync(counts.data_ptr(), 0, counts.numel() * sizeof(int64_t),
                                  ctx.stream),
                  "unique");
  dispatch_all(sorted.dtype(), "unique", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    const T* s = static_cast<const T*>(sorted.data_ptr());
    group_starts_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(n, s, groups.data<int64_t>());
    KILN_CUDA_CHECK_LAUNCH("unique");
    size_t bytes = 0;
    int64_t* g = groups.data<int64_t>();
    KILN_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, g, g, n, ctx.stream), "unique");
    Tensor temp = scratch(sorted, bytes);
    KILN_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp.data_ptr(), bytes, g, g, n, ctx.stream),
                    "unique");
    unique_write_kernel<T><<<grid_for(n), kThreads, 0, ctx.stream>>>(
        n, s, perm.data<int64_t>(), g, static_cast<T*>(out.data_ptr()), inverse.data<int64_t>(),
        reinterpret_cast<unsigned long long*>(counts.data_ptr()));
    KILN_CUDA_CHECK_LAUNCH("unique");
  });
  // The number of groups sizes the result: a host value, so this syncs.
  int64_t count = 0;
  copy_to_host_and_wait(&count, groups.data<int64_t>() + (n - 1), sizeof(int64_t), ctx.stream,
                        sorted.device().index, "unique",
                        "the number of distinct values sizes the result and is read on the host");
  return count;
}

__global__ void coordinates_kernel(int64_t n, int ndim, OffsetCalc<1> shape, const int64_t* linear,
                                   int64_t* out) {
  KILN_GRID_STRIDE(i, n) {
    int64_t rest = linear[i];
    for (int d = ndim - 1; d >= 0; --d) {
      out[i * ndim + d] = rest % shape.sizes[d];
      rest /= shape.sizes[d];
    }
  }
}

void nonzero_host(const Tensor& out, const Tensor& mask) {
  const int64_t numel = mask.numel(), n = out.size(0);
  if (n == 0 || numel == 0) return;
  LaunchContext ctx(mask);
  Tensor linear = make_tensor({n}, DType::Int64, mask.device());
  Tensor selected = make_tensor({1}, DType::Int64, mask.device());
  thrust::counting_iterator<int64_t> counter(0);
  size_t bytes = 0;
  const bool* flags = mask.data<bool>();
  KILN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, counter, flags,
                                             linear.data<int64_t>(), selected.data<int64_t>(),
                                             numel, ctx.stream),
                  "nonzero");
  Tensor temp = scratch(mask, bytes);
  KILN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data_ptr(), bytes, counter, flags,
                                             linear.data<int64_t>(), selected.data<int64_t>(),
                                             numel, ctx.stream),
                  "nonzero");
  const int ndim = static_cast<int>(mask.dim());
  if (ndim == 0) return;  // out is [n, 0]
  KILN_CHECK(ndim <= kMaxDims, NotImplemented, "[nonzero] CUDA supports up to ", kMaxDims,
             " dims, got ", ndim);
  OffsetCalc<1> shape;
  shape.ndim = ndim;
  for (int d = 0; d < ndim; ++d) shape.sizes[d] = mask.sizes()[d];
  coordinates_kernel<<<grid_for(n), kThreads, 0, ctx.stream>>>(n, ndim, shape,
                                                               linear.data<int64_t>(),
                                                               out.data<int64_t>());
  KILN_CUDA_CHECK_LAUNCH("nonzero");
}

}  // namespace

void install_sort_kernels(Backend& b) {
  b.sort = sort_kernel;
  b.gather_rows = gather_rows_host;
  b.unique_sorted = unique_sorted_host;
  b.nonzero = nonzero_host;
}

}  // namespace kiln::cuda
