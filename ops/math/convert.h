// Scalar conversion between any two of kiln's element types, with PyTorch's rules: to bool
// means != 0; half types go through float. One definition for the CPU (Eigen::half,
// Eigen::bfloat16) and CUDA (__half, __nv_bfloat16), so casts agree on both devices.
#pragma once

#include <Eigen/Core>
#include <type_traits>

#include "ops/math/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace kiln::math {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>
#if defined(__CUDACC__)
                           || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>
#endif
    ;

template <typename To, typename From>
KILN_HD To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kiln::math
