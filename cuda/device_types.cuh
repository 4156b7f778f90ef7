// kiln's C++ scalar types as CUDA device types, and the type device math
// accumulates in. Shared by every CUDA kernel file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <Eigen/Core>

namespace kiln::cuda {

// kiln stores float16/bfloat16 as Eigen types, bit-compatible with CUDA's.
template <typename T>
struct device_type {
  using type = T;
};
template <>
struct device_type<Eigen::half> {
  using type = __half;
};
template <>
struct device_type<Eigen::bfloat16> {
  using type = __nv_bfloat16;
};
template <typename T>
using device_t = typename device_type<T>::type;

// Half types compute in float.
template <typename T>
struct acc {
  using type = T;
};
template <>
struct acc<__half> {
  using type = float;
};
template <>
struct acc<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename acc<T>::type;

// V consecutive elements moved as one aligned access (16 bytes at most).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

}  // namespace kiln::cuda
