// CPU twins of the direct 2-d pooling kernels (Note [Direct pooling kernels] in ops/pool2d.h).
// Work is split over (n, row) pairs; within a row the loops follow the memory order of the
// layout (w then c for NHWC, c then w for NCHW). Half types accumulate in float.
#include <cmath>
#include <limits>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/pool2d.h"

namespace kiln::cpu {

namespace {

// f(n, c, a, b) for every position of an [N, C, A, B] tensor, rows (n, a) in parallel.
template <typename F>
void for_each_position(int64_t N, int64_t C, int64_t A, int64_t B, bool channels_last, F f) {
  const int64_t rows = N * A;
#pragma omp parallel for if (rows > 1 && rows * B * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / A, a = r % A;
    if (channels_last) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) f(n, c, a, b);
    } else {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t b = 0; b < B; ++b) f(n, c, a, b);
    }
  }
}

template <typename T>
void max_forward(const Tensor& out, const Tensor& indices, const Tensor& in,
                 const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* x = in.data<T>();
  T* y = out.data<T>();
  int64_t* idx = indices.data<int64_t>();
  for_each_position(p.N, p.C, p.OH, p.OW, p.channels_last,
                    [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
                      A best = -std::numeric_limits<A>::infinity();
                      int64_t arg = -1;
                      for (int64_t i = 0; i < p.kh; ++i) {
                        const int64_t h = oh * p.sh - p.ph + i * p.dh;
                        if (h < 0 || h >= p.H) continue;
                        for (int64_t j = 0; j < p.kw; ++j) {
                          const int64_t w = ow * p.sw - p.pw + j * p.dw;
                          if (w < 0 || w >= p.W) continue;
                          const A v = A(x[p.in_offset(n, c, h, w)]);
                          // The first maximum wins; a NaN beats everything and then stays.
                          if (arg < 0 || (!std::isnan(best) && (v > best || std::isnan(v)))) {
                            best = v;
                            arg = h * p.W + w;
                          }
                        }
                      }
                      const int64_t o = p.out_offset(n, c, oh, ow);
                      y[o] = T(best);
                      idx[o] = arg;
                    });
}

template <typename T>
void max_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                  const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* g = grad_out.data<T>();
  const int64_t* idx = indices.data<int64_t>();
  T* gi = grad_in.data<T>();
  for_each_position(p.N, p.C, p.H, p.W, p.channels_last,
                    [&](int64_t n, int64_t c, int64_t h, int64_t w) {
                      const OutRange rh = max_outputs_of(h, p.OH, p.kh, p.sh, p.ph, p.dh);
                      const OutRange rw = max_outputs_of(w, p.OW, p.kw, p.sw, p.pw, p.dw);
                      const int64_t self = h * p.W + w;
                      A s = 0;
                      for (int64_t oh = rh.first; oh <= rh.last; ++oh) {
                        for (int64_t ow = rw.first; ow <= rw.last; ++ow) {
                          const int64_t o = p.out_offset(n, c, oh, ow);
                          if (idx[o] == self) s += A(g[o]);
                        }
                      }
                      gi[p.in_offset(n, c, h, w)] = T(s);
                    });
}

template <typename T>
void avg_forward(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* x = in.data<T>();
  T* y = out.data<T>();
  for_each_position(p.N, p.C, p.OH, p.OW, p.channels_last,
                    [&](int64_t n, int64_t c, int64_t oh, int64_t ow) {
                      const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
                      const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
                      A s = 0;
                      for (int64_t h = wh.start; h < wh.end; ++h)
                        for (int64_t w = ww.start; w < ww.end; ++w)
                          s += A(x[p.in_offset(n, c, h, w)]);
                      y[p.out_offset(n, c, oh, ow)] = T(s / A(avg_divisor(p, wh, ww)));
                    });
}

template <typename T>
void avg_backward(const Tensor& grad_in, const Tensor& grad_out, const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* g = grad_out.data<T>();
  T* gi = grad_in.data<T>();
  for_each_position(
      p.N, p.C, p.H, p.W, p.channels_last, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
        const OutRange rh = avg_outputs_of(h, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
        const OutRange rw = avg_outputs_of(w, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
        A s = 0;
        for (int64_t oh = rh.first; oh <= rh.last; ++oh) {
          const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
          for (int64_t ow = rw.first; ow <= rw.last; ++ow) {
            const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
            s += A(g[p.out_offset(n, c, oh, ow)]) / A(avg_divisor(p, wh, ww));
          }
        }
        gi[p.in_offset(n, c, h, w)] = T(s);
      });
}

}  // namespace

void max_pool2d_forward_kernel(const Tensor& out, const Tensor& indices, const Tensor& in,
                               const Pool2dParams& p) {
  dispatch_floating(in.dtype(), "max_pool2d",
                    [&](auto tag) { max_forward<typename decltype(tag)::type>(out, indices, in, p); });
}

void max_pool2d_backward_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                const Tensor& indices, const Pool2dParams& p) {
  dispatch_floating(grad_in.dtype(), "max_pool2d_backward", [&](auto tag) {
    max_backward<typename decltype(tag)::type>(grad_in, grad_out, indices, p);
  });
}

void avg_pool2d_forward_kernel(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  dispatch_floating(in.dtype(), "avg_pool2d",
                    [&](auto tag) { avg_forward<typename decltype(tag)::type>(out, in, p); });
}

void avg_pool2d_backward_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                const Pool2dParams& p) {
  dispatch_floating(grad_in.dtype(), "avg_pool2d_backward", [&](auto tag) {
    avg_backward<typename decltype(tag)::type>(grad_in, grad_out, p);
  });
}

}  // namespace kiln::cpu
