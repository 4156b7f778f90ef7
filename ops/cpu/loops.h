// Strided elementwise loops for CPU kernels. Operands arrive already
// broadcast to the output's shape (stride 0 on broadcast dims); dims that are
// contiguous across all operands are merged so a contiguous tensor is one
// flat loop the compiler can vectorize.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/coalesce.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Note [Parallel elementwise loops]
// An elementwise loop over `numel` elements is split into one contiguous range of element
// indices per OpenMP thread once it has kElementwiseGrain elements (below that, thread
// start-up costs more than the loop). Each range starts at its first element's multi-index and
// walks the merged dims like an odometer, calling `inner` on runs along the innermost dim (a
// run is cut where a range starts or ends). Element functors are pure, so the result does not
// depend on the thread count; an exception thrown by one (integer division by zero) is caught
// inside the parallel region and rethrown after it, since none may leave an OpenMP region.
constexpr int64_t kElementwiseGrain = int64_t{1} << 16;

// Calls inner(ptrs, byte_strides, len) over elements [begin, end) of the merged dims `dims`.
template <size_t N, typename Inner>
void strided_range(const CoalescedDims<N>& dims, std::array<char*, N> ptrs, int64_t begin,
                   int64_t end, Inner& inner) {
  const Shape& sizes = dims.sizes;
  const size_t nd = sizes.size();
  const int64_t* inner_strides = dims.strides(nd - 1);
  Shape counter(nd, 0);
  int64_t rest = begin;
  for (size_t d = nd; d-- > 0;) {
    counter[d] = rest % sizes[d];
    rest /= sizes[d];
    for (size_t k = 0; k < N; ++k) ptrs[k] += counter[d] * dims.strides(d)[k];
  }
  const int64_t n = sizes[nd - 1];
  for (int64_t i = begin; i < end;) {
    const int64_t len = std::min(n - counter[nd - 1], end - i);
    inner(ptrs.data(), inner_strides, len);
    i += len;
    if (i == end) return;
    // The run reached the end of the innermost dim: back to its start, then carry outwards.
    for (size_t k = 0; k < N; ++k) ptrs[k] -= counter[nd - 1] * inner_strides[k];
    counter[nd - 1] = 0;
    for (size_t d = nd - 1; d-- > 0;) {
      for (size_t k = 0; k < N; ++k) ptrs[k] += dims.strides(d)[k];
      if (++counter[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) ptrs[k] -= dims.strides(d)[k] * sizes[d];
      counter[d] = 0;
    }
  }
}

// Calls inner(ptrs, byte_strides, n) for runs of n elements along the innermost (merged) dim,
// on several threads for large loops (Note [Parallel elementwise loops]).
template <size_t N, typename Inner>
void strided_for_each(const Shape& shape, std::array<char*, N> ptrs,
                      const std::array<const Shape*, N>& strides, size_t (&itemsizes)[N],
                      Inner&& inner) {
  int64_t numel = 1;
  for (int64_t s : shape) {
    if (s == 0) return;
    numel *= s;
  }
  std::array<int64_t, N> scale;
  for (size_t k = 0; k < N; ++k) scale[k] = static_cast<int64_t>(itemsizes[k]);
  const CoalescedDims<N> dims = coalesce_dims<N>(shape, strides, scale);  // byte strides
  if (dims.sizes.empty()) {
    std::array<int64_t, N> none{};
    inner(ptrs.data(), none.data(), int64_t(1));
    return;
  }
  if (numel < kElementwiseGrain) {
    strided_range<N>(dims, ptrs, 0, numel, inner);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    // Ranges start on multiples of 16 elements so threads do not share cache lines.
    const int64_t per = ((numel + threads - 1) / threads + 15) / 16 * 16;
    const int64_t begin = std::min(numel, t * per), end = std::min(numel, begin + per);
    try {
      if (begin < end) strided_range<N>(dims, ptrs, begin, end, inner);
    } catch (...) {
#pragma omp critical(kiln_elementwise_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// out[i] = f(in[i]); `in` already has out's shape (possibly via stride 0). Runs contiguous in
// both go to run(out, in, n) whole, the others element by element through f: a kernel may pass
// a run function compiled for AVX2 (Note [AVX2 clones of hot loops], ops/cpu/vec_math.h) that
// computes exactly what f does.
template <typename Out, typename In, typename Run, typename F>
void unary_loop_runs(const Tensor& out, const Tensor& in, Run run, F f) {
  size_t sz[2] = {sizeof(Out), sizeof(In)};
  strided_for_each<2>(out.sizes(), {static_cast<char*>(out.data_ptr()), static_cast<char*>(in.data_ptr())},
                      {&out.strides(), &in.strides()}, sz,
                      [&](char** p, const int64_t* s, int64_t n) {
                        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
                          run(reinterpret_cast<Out*>(p[0]), reinterpret_cast<const In*>(p[1]), n);
                        } else {
                          for (int64_t i = 0; i < n; ++i)
                            *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                                f(*reinterpret_cast<const In*>(p[1] + i * s[1]));
                        }
                      });
}

template <typename Out, typename In, typename F>
void unary_loop(const Tensor& out, const Tensor& in, F f) {
  unary_loop_runs<Out, In>(
      out, in,
      [&](Out* o, const In* a, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
      },
      f);
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
