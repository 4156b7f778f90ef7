// Dims of an elementwise iteration over N operands of one shape: size-1 dims
// dropped and neighbours merged wherever every operand's strides allow, so a
// contiguous tensor becomes one flat dim. Shared by the CPU loops
// (ops/cpu/loops.h) and the CUDA offset calculator (cuda/elementwise.cuh).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/shape.h"

namespace kiln {

template <size_t N>
struct CoalescedDims {
  Shape sizes;
  // N strides per merged dim, each times scale[k]; flat so that one or two
  // dims need no allocation.
  Shape flat_strides;
  // Operand k's stride along merged dim d is strides(d)[k].
  const int64_t* strides(size_t d) const { return flat_strides.data() + d * N; }
};

// `scale` multiplies the element strides (item sizes for byte strides, 1 otherwise).
template <size_t N>
CoalescedDims<N> coalesce_dims(const Shape& shape, const std::array<const Shape*, N>& strides,
                               const std::array<int64_t, N>& scale) {
  CoalescedDims<N> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s{};
    for (size_t k = 0; k < N; ++k) s[k] = (*strides[k])[d] * scale[k];
    if (!c.sizes.empty()) {
      int64_t* last = c.flat_strides.data() + (c.sizes.size() - 1) * N;
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && last[k] == s[k] * shape[d];
      if (merge) {
        c.sizes.back() *= shape[d];
        std::copy(s.begin(), s.end(), last);
        continue;
      }
    }
    c.sizes.push_back(shape[d]);
    c.flat_strides.insert(c.flat_strides.end(), s.begin(), s.end());
  }
  return c;
}

}  // namespace kiln
