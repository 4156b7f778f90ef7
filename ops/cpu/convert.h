// Scalar conversion between any two kiln C++ types, with PyTorch's rules:
// to bool means != 0; half types go through float.
#pragma once

#include <type_traits>

#include "core/dtype.h"

namespace kiln::cpu {

template <typename T>
constexpr bool is_half_v =
    std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>;

template <typename To, typename From>
inline To convert(From v) {
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

}  // namespace kiln::cpu
