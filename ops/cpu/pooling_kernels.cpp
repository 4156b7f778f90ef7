// CPU twins of the direct 2-d pooling kernels (Note [Direct pooling kernels] in ops/pool2d.h),
// one (n, c) plane per task. Unlike the CUDA kernels the backward scatters: a plane belongs to
// one thread, so adding each output's gradient into its window needs no atomics and skips
// the search for the outputs that cover an input. Half types accumulate in float.
#include <cmath>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/pool2d.h"

namespace kiln::cpu {

namespace {

// A plane (n, c) of a pooling input or output: element (a, b) of an [A, B] plane sits at
// base + (a * B + b) * step, step 1 for NCHW and C for NHWC.
struct Plane {
  int64_t base, step;
};

Plane in_plane(const Pool2dParams& p, int64_t plane) {
  const int64_t n = plane / p.C, c = plane % p.C;
  return {p.in_offset(n, c, 0, 0), p.channels_last ? p.C : 1};
}

Plane out_plane(const Pool2dParams& p, int64_t plane) {
  const int64_t n = plane / p.C, c = plane % p.C;
  return {p.out_offset(n, c, 0, 0), p.channels_last ? p.C : 1};
}

// f(plane) for the N * C planes in parallel; a thread's planes are consecutive, so with NHWC
// they share one image in cache.
template <typename F>
void for_each_plane(const Pool2dParams& p, F f) {
  const int64_t planes = p.N * p.C;
#pragma omp parallel for schedule(static) if (planes > 1 && planes * p.H * p.W > (1 << 14))
  for (int64_t plane = 0; plane < planes; ++plane) f(plane);
}

template <typename T>
void max_forward(const Tensor& out, const Tensor& indices, const Tensor& in,
                 const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* x_all = in.data<T>();
  T* y_all = out.data<T>();
  int64_t* idx_all = indices.data<int64_t>();
  for_each_plane(p, [&](int64_t plane) {
    const Plane pi = in_plane(p, plane), po = out_plane(p, plane);
    const T* x = x_all + pi.base;
    for (int64_t oh = 0; oh < p.OH; ++oh) {
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        A best;
        int64_t arg;
        window_max<A>(
            p, oh, ow, [&](int64_t h, int64_t w) { return A(x[(h * p.W + w) * pi.step]); }, best,
            arg);
        const int64_t o = po.base + (oh * p.OW + ow) * po.step;
        y_all[o] = T(best);
        idx_all[o] = arg;
      }
    }
  });
}

// Backward kernels scatter each output's gradient into a per-plane accumulator in A (so half
// types add in float), then write the plane once.
template <typename T, typename F>
void scatter_backward(const Tensor& grad_in, const Pool2dParams& p, F scatter) {
  using A = acc_t<T>;
  T* gi_all = grad_in.data<T>();
  for_each_plane(p, [&](int64_t plane) {
    thread_local std::vector<A> acc;
    acc.assign(static_cast<size_t>(p.H * p.W), A(0));
    scatter(plane, acc.data());
    const Plane pi = in_plane(p, plane);
    for (int64_t i = 0; i < p.H * p.W; ++i) gi_all[pi.base + i * pi.step] = T(acc[i]);
  });
}

template <typename T>
void max_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                  const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* g = grad_out.data<T>();
  const int64_t* idx = indices.data<int64_t>();
  scatter_backward<T>(grad_in, p, [&](int64_t plane, A* acc) {
    const Plane po = out_plane(p, plane);
    for (int64_t o = 0; o < p.OH * p.OW; ++o) {
      const int64_t at = po.base + o * po.step;
      // -1: a window of padding only (possible with dilation), which took no input.
      if (idx[at] >= 0) acc[idx[at]] += A(g[at]);
    }
  });
}

template <typename T>
void avg_forward(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* x_all = in.data<T>();
  T* y_all = out.data<T>();
  for_each_plane(p, [&](int64_t plane) {
    const Plane pi = in_plane(p, plane), po = out_plane(p, plane);
    const T* x = x_all + pi.base;
    for (int64_t oh = 0; oh < p.OH; ++oh) {
      const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
        A s = 0;
        for (int64_t h = wh.start; h < wh.end; ++h)
          for (int64_t w = ww.start; w < ww.end; ++w) s += A(x[(h * p.W + w) * pi.step]);
        y_all[po.base + (oh * p.OW + ow) * po.step] = T(s / A(avg_divisor(p, wh, ww)));
      }
    }
  });
}

template <typename T>
void avg_backward(const Tensor& grad_in, const Tensor& grad_out, const Pool2dParams& p) {
  using A = acc_t<T>;
  const T* g = grad_out.data<T>();
  scatter_backward<T>(grad_in, p, [&](int64_t plane, A* acc) {
    const Plane po = out_plane(p, plane);
    for (int64_t oh = 0; oh < p.OH; ++oh) {
      const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
      for (int64_t ow = 0; ow < p.OW; ++ow) {
        const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
        const A v = A(g[po.base + (oh * p.OW + ow) * po.step]) / A(avg_divisor(p, wh, ww));
        for (int64_t h = wh.start; h < wh.end; ++h)
          for (int64_t w = ww.start; w < ww.end; ++w) acc[h * p.W + w] += v;
      }
    }
  });
}

}  // namespace

void max_pool2d_forward_kernel(const Tensor& out, const Tensor& indices, const Tensor& in,
                               const Pool2dParams& p) {
  dispatch_floating(in.dtype(), "max_pool2d", [&](auto tag) {
    max_forward<typename decltype(tag)::type>(out, indices, in, p);
  });
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
