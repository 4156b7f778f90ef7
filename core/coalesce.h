// Dims of an elementwise iteration over N operands of one shape: size-1 dims
// dropped and neighbours merged wherever every operand's strides allow, so a
// contiguous tensor becomes one flat dim. Shared by the CPU loops
// (ops/cpu/loops.h) and the CUDA offset calculator (cuda/elementwise.cuh).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace kiln {

template <size_t N>
struct CoalescedDims {
  std::vector<int64_t> sizes;
  // strides[d][k]: operand k's stride along merged dim d, times scale[k].
  std::vector<std::array<int64_t, N>> strides;
};

// `scale` multiplies the element strides (item sizes for byte strides, 1 otherwise).
template <size_t N>
CoalescedDims<N> coalesce_dims(const std::vector<int64_t>& shape,
                               const std::array<const std::vector<int64_t>*, N>& strides,
                               const std::array<int64_t, N>& scale) {
  CoalescedDims<N> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s{};
    for (size_t k = 0; k < N; ++k) s[k] = (*strides[k])[d] * scale[k];
    if (!c.sizes.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && c.strides.back()[k] == s[k] * shape[d];
      if (merge) {
        c.sizes.back() *= shape[d];
        c.strides.back() = s;
        continue;
      }
    }
    c.sizes.push_back(shape[d]);
    c.strides.push_back(s);
  }
  return c;
}

}  // namespace kiln
