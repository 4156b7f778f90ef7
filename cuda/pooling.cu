// Direct 2-d pooling kernels (Note [Direct pooling kernels] in ops/pool2d.h): one thread per
// output element in the forward, one per input element gathering from the outputs that can
// hold it in the backward (for max pooling over disjoint windows, one store per output).
// Threads run over the layout's memory order (NCHW or NHWC), so neighbouring threads touch
// neighbouring elements.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "ops/dispatch.h"
#include "ops/pool2d.h"

namespace kiln::cuda {

namespace {

template <typename T, typename I>
__global__ void max_pool2d_kernel(T* out, int64_t* indices, const T* in, Pool2dParams p) {
  using A = acc_t<T>;
  const int64_t total = p.N * p.C * p.OH * p.OW;
  KILN_GRID_STRIDE(i, total) {
    int64_t n, c, oh, ow;
    unflatten_index<I>(i, p.C, p.OH, p.OW, p.channels_last, n, c, oh, ow);
    A best;
    int64_t arg;
    window_max<A>(
        p, oh, ow,
        [&](int64_t h, int64_t w) { return static_cast<A>(in[p.in_offset(n, c, h, w)]); }, best,
        arg);
    out[i] = static_cast<T>(best);
    indices[i] = arg;
  }
}

template <typename T, typename I>
__global__ void max_pool2d_backward_kernel(T* grad_in, const T* grad_out, const int64_t* indices,
                                           Pool2dParams p) {
  using A = acc_t<T>;
  const int64_t total = p.N * p.C * p.H * p.W;
  KILN_GRID_STRIDE(i, total) {
    int64_t n, c, h, w;
    unflatten_index<I>(i, p.C, p.H, p.W, p.channels_last, n, c, h, w);
    const OutRange rh = max_outputs_of<I>(static_cast<I>(h), static_cast<I>(p.OH),
                                          static_cast<I>(p.kh), static_cast<I>(p.sh),
                                          static_cast<I>(p.ph), static_cast<I>(p.dh));
    const OutRange rw = max_outputs_of<I>(static_cast<I>(w), static_cast<I>(p.OW),
                                          static_cast<I>(p.kw), static_cast<I>(p.sw),
                                          static_cast<I>(p.pw), static_cast<I>(p.dw));
    const int64_t self = h * p.W + w;
    A s = 0;
    for (int64_t oh = rh.first; oh <= rh.last; ++oh) {
      for (int64_t ow = rw.first; ow <= rw.last; ++ow) {
        const int64_t o = p.out_offset(n, c, oh, ow);
        if (indices[o] == self) s += static_cast<A>(grad_out[o]);
      }
    }
    grad_in[i] = static_cast<T>(s);
  }
}

// Windows that cannot overlap (stride >= window span in both dims, the usual 2x2/2 pooling):
// every input position takes at most one output's gradient, so the backward is a zero fill
// plus one store per output, instead of a search per input.
bool windows_disjoint(const Pool2dParams& p) {
  return p.sh > (p.kh - 1) * p.dh && p.sw > (p.kw - 1) * p.dw;
}

template <typename T, typename I>
__global__ void max_pool2d_scatter_kernel(T* grad_in, const T* grad_out, const int64_t* indices,
                                          Pool2dParams p) {
  const int64_t total = p.N * p.C * p.OH * p.OW;
  const I plane_out = static_cast<I>(p.OH * p.OW), C = static_cast<I>(p.C);
  KILN_GRID_STRIDE(i, total) {
    const int64_t arg = indices[i];  // h * W + w within the (n, c) plane
    if (arg < 0) continue;
    const I flat = static_cast<I>(i);
    const int64_t offset =
        p.channels_last
            ? (static_cast<int64_t>(flat / (plane_out * C)) * p.H * p.W + arg) * p.C + flat % C
            : static_cast<int64_t>(flat / plane_out) * p.H * p.W + arg;
    grad_in[offset] = grad_out[i];
  }
}

template <typename T, typename I>
__global__ void avg_pool2d_kernel(T* out, const T* in, Pool2dParams p) {
  using A = acc_t<T>;
  const int64_t total = p.N * p.C * p.OH * p.OW;
  KILN_GRID_STRIDE(i, total) {
    int64_t n, c, oh, ow;
    unflatten_index<I>(i, p.C, p.OH, p.OW, p.channels_last, n, c, oh, ow);
    const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
    const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
    A s = 0;
    for (int64_t h = wh.start; h < wh.end; ++h)
      for (int64_t w = ww.start; w < ww.end; ++w) s += static_cast<A>(in[p.in_offset(n, c, h, w)]);
    out[i] = static_cast<T>(s / static_cast<A>(avg_divisor(p, wh, ww)));
  }
}

template <typename T, typename I>
__global__ void avg_pool2d_backward_kernel(T* grad_in, const T* grad_out, Pool2dParams p) {
  using A = acc_t<T>;
  const int64_t total = p.N * p.C * p.H * p.W;
  KILN_GRID_STRIDE(i, total) {
    int64_t n, c, h, w;
    unflatten_index<I>(i, p.C, p.H, p.W, p.channels_last, n, c, h, w);
    const OutRange rh = avg_outputs_of(h, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
    const OutRange rw = avg_outputs_of(w, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
    A s = 0;
    for (int64_t oh = rh.first; oh <= rh.last; ++oh) {
      const AvgWindow wh = avg_window(oh, p.H, p.OH, p.kh, p.sh, p.ph, p.adaptive);
      for (int64_t ow = rw.first; ow <= rw.last; ++ow) {
        const AvgWindow ww = avg_window(ow, p.W, p.OW, p.kw, p.sw, p.pw, p.adaptive);
        s += static_cast<A>(grad_out[p.out_offset(n, c, oh, ow)]) /
             static_cast<A>(avg_divisor(p, wh, ww));
      }
    }
    grad_in[i] = static_cast<T>(s);
  }
}

// Calls f(I{}) with the kernels' index arithmetic type: uint32_t when every flat index of
// the input and output fits (64-bit division dominates these kernels), else int64_t.
template <typename F>
void with_index_type(const Pool2dParams& p, F&& f) {
  const int64_t big = p.N * p.C * std::max(p.H * p.W, p.OH * p.OW);
  if (big < (int64_t{1} << 31)) {
    f(uint32_t{});
  } else {
    f(int64_t{});
  }
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& in,
                        const Pool2dParams& p) {
  const int64_t total = out.numel();
  if (total == 0) return;
  LaunchContext ctx(in);
  dispatch_floating(in.dtype(), "max_pool2d", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    with_index_type(p, [&](auto index) {
      max_pool2d_kernel<T, decltype(index)><<<grid_for(total), kThreads, 0, ctx.stream>>>(
          ptr<T>(out), ptr<int64_t>(indices), ptr<T>(in), p);
    });
  });
  KILN_CUDA_CHECK_LAUNCH("max_pool2d");
}

void max_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& indices,
                         const Pool2dParams& p) {
  const int64_t total = grad_in.numel(), outputs = grad_out.numel();
  if (total == 0) return;
  LaunchContext ctx(grad_in);
  const bool disjoint = windows_disjoint(p);
  if (disjoint)
    KILN_CUDA_CHECK(cudaMemsetAsync(grad_in.data_ptr(), 0, total * grad_in.itemsize(), ctx.stream),
                    "max_pool2d_backward");
  if (disjoint && outputs == 0) return;
  dispatch_floating(grad_in.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    with_index_type(p, [&](auto index) {
      using I = decltype(index);
      if (disjoint) {
        max_pool2d_scatter_kernel<T, I><<<grid_for(outputs), kThreads, 0, ctx.stream>>>(
            ptr<T>(grad_in), ptr<T>(grad_out), ptr<int64_t>(indices), p);
      } else {
        max_pool2d_backward_kernel<T, I><<<grid_for(total), kThreads, 0, ctx.stream>>>(
            ptr<T>(grad_in), ptr<T>(grad_out), ptr<int64_t>(indices), p);
      }
    });
  });
  KILN_CUDA_CHECK_LAUNCH("max_pool2d_backward");
}

void avg_pool2d_forward(const Tensor& out, const Tensor& in, const Pool2dParams& p) {
  const int64_t total = out.numel();
  if (total == 0) return;
  LaunchContext ctx(in);
  dispatch_floating(in.dtype(), "avg_pool2d", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    with_index_type(p, [&](auto index) {
      avg_pool2d_kernel<T, decltype(index)>
          <<<grid_for(total), kThreads, 0, ctx.stream>>>(ptr<T>(out), ptr<T>(in), p);
    });
  });
  KILN_CUDA_CHECK_LAUNCH("avg_pool2d");
}

void avg_pool2d_backward(const Tensor& grad_in, const Tensor& grad_out, const Pool2dParams& p) {
  const int64_t total = grad_in.numel();
  if (total == 0) return;
  LaunchContext ctx(grad_in);
  dispatch_floating(grad_in.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = device_t<typename decltype(tag)::type>;
    with_index_type(p, [&](auto index) {
      avg_pool2d_backward_kernel<T, decltype(index)>
          <<<grid_for(total), kThreads, 0, ctx.stream>>>(ptr<T>(grad_in), ptr<T>(grad_out), p);
    });
  });
  KILN_CUDA_CHECK_LAUNCH("avg_pool2d_backward");
}

}  // namespace

void install_pooling_kernels(Backend& b) {
  b.max_pool2d_forward = max_pool2d_forward;
  b.max_pool2d_backward = max_pool2d_backward;
  b.avg_pool2d_forward = avg_pool2d_forward;
  b.avg_pool2d_backward = avg_pool2d_backward;
}

}  // namespace kiln::cuda
