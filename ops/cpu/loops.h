// Strided elementwise loops for CPU kernels. Operands arrive already
// broadcast to the output's shape (stride 0 on broadcast dims); dims that are
// contiguous across all operands are merged so a contiguous tensor is one
// flat loop the compiler can vectorize.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/coalesce.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Calls inner(ptrs, byte_strides, n) for runs of n elements along the
// innermost (merged) dim.
template <size_t N, typename Inner>
void strided_for_each(const Shape& shape, std::array<char*, N> ptrs,
                      const std::array<const Shape*, N>& strides, size_t (&itemsizes)[N],
                      Inner&& inner) {
  for (int64_t s : shape)
    if (s == 0) return;
  std::array<int64_t, N> scale;
  for (size_t k = 0; k < N; ++k) scale[k] = static_cast<int64_t>(itemsizes[k]);
  const CoalescedDims<N> dims = coalesce_dims<N>(shape, strides, scale);  // byte strides
  const Shape& sizes = dims.sizes;
  std::array<int64_t, N> inner_strides{};
  if (sizes.empty()) {
    inner(ptrs.data(), inner_strides.data(), int64_t(1));
    return;
  }
  const size_t nd = sizes.size();
  std::copy(dims.strides(nd - 1), dims.strides(nd - 1) + N, inner_strides.begin());
  const int64_t n = sizes[nd - 1];
  Shape counter(nd, 0);
  while (true) {
    inner(ptrs.data(), inner_strides.data(), n);
    // Advance the outer dims like an odometer.
    size_t d = nd - 1;
    while (d-- > 0) {
      ++counter[d];
      for (size_t k = 0; k < N; ++k) ptrs[k] += dims.strides(d)[k];
      if (counter[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) ptrs[k] -= dims.strides(d)[k] * sizes[d];
      counter[d] = 0;
      if (d == 0) return;
    }
    if (nd == 1) return;
  }
}

// out[i] = f(in[i]); `in` already has out's shape (possibly via stride 0).
template <typename Out, typename In, typename F>
void unary_loop(const Tensor& out, const Tensor& in, F f) {
  size_t sz[2] = {sizeof(Out), sizeof(In)};
  strided_for_each<2>(out.sizes(), {static_cast<char*>(out.data_ptr()), static_cast<char*>(in.data_ptr())},
                      {&out.strides(), &in.strides()}, sz,
                      [&](char** p, const int64_t* s, int64_t n) {
                        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
                          Out* o = reinterpret_cast<Out*>(p[0]);
                          const In* a = reinterpret_cast<const In*>(p[1]);
                          for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                                f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                        }
                      });
}

// out[i] = f(a[i], b[i]).
template <typename Out, typename A, typename B, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  size_t sz[3] = {sizeof(Out), sizeof(A), sizeof(B)};
  strided_for_each<3>(
      out.sizes(),
      {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
       static_cast<char*>(b.data_ptr())},
      {&out.strides(), &a.strides(), &b.strides()}, sz,
      [&](char** p, const int64_t* s, int64_t n) {
        if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
          Out* o = reinterpret_cast<Out*>(p[0]);
          const A* x = reinterpret_cast<const A*>(p[1]);
          const B* y = reinterpret_cast<const B*>(p[2]);
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        } else if (s[0] == sizeof(Out) && s[1] == sizeof(A) && s[2] == 0) {
          Out* o = reinterpret_cast<Out*>(p[0]);
          const A* x = reinterpret_cast<const A*>(p[1]);
          const B y = *reinterpret_cast<const B*>(p[2]);
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y);
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                  *reinterpret_cast<const B*>(p[2] + i * s[2]));
        }
      });
}

// out[i] = f(a[i], b[i], c[i]).
template <typename Out, typename A, typename B, typename C, typename F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  size_t sz[4] = {sizeof(Out), sizeof(A), sizeof(B), sizeof(C)};
  strided_for_each<4>(
      out.sizes(),
      {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
       static_cast<char*>(b.data_ptr()), static_cast<char*>(c.data_ptr())},
      {&out.strides(), &a.strides(), &b.strides(), &c.strides()}, sz,
      [&](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<Out*>(p[0] + i * s[0]) =
              f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                *reinterpret_cast<const B*>(p[2] + i * s[2]),
                *reinterpret_cast<const C*>(p[3] + i * s[3]));
      });
}

}  // namespace kiln::cpu
