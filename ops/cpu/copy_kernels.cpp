// copy (with dtype conversion), fill and where.
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/dispatch.h"
#include "ops/math/convert.h"

namespace kiln::cpu {

void copy_kernel(const Tensor& dst, const Tensor& src) {
  dispatch_all(dst.dtype(), "copy_", [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    dispatch_all(src.dtype(), "copy_", [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      unary_loop<To, From>(dst, src, [](From v) { return math::convert<To>(v); });
    });
  });
}

void fill_kernel(const Tensor& dst, Scalar value) {
  dispatch_all(dst.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.is_floating() ? math::convert<T>(value.to_double())
                                    : math::convert<T>(value.to_int());
    size_t sz[1] = {sizeof(T)};
    strided_for_each<1>(dst.sizes(), {static_cast<char*>(dst.data_ptr())}, {&dst.strides()}, sz,
                        [&](char** p, const int64_t* s, int64_t n) {
                          for (int64_t i = 0; i < n; ++i)
                            *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
                        });
  });
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    ternary_loop<T, bool, T, T>(out, cond, a, b, [](bool c, T x, T y) { return c ? x : y; });
  });
}

}  // namespace kiln::cpu
