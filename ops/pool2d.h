// Note [Direct pooling kernels]: max_pool2d, avg_pool2d and adaptive_avg_pool2d (and their 1-d
// forms, as H = 1) run as direct kernels: one thread per output element in the forward and, on
// CUDA, one per input element in the backward, gathering from the outputs whose window can
// hold it (no atomics, deterministic, any dtype); the CPU backward scatters plane by plane.
// Max pooling with windows that cannot overlap (stride >= span, e.g. 2x2/2) scatters on CUDA
// too: a zero fill and one store per output, no input takes two gradients.
// The window arithmetic below is shared by the CPU kernels (ops/cpu/pooling_kernels.cpp) and
// the CUDA ones (cuda/pooling.cu), so both devices pick the same windows, maxima and divisors.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/math/host_device.h"

namespace kiln {

// Geometry of a 2-d pooling: input [N, C, H, W] -> output [N, C, OH, OW], both contiguous in
// NCHW order, or NHWC when channels_last.
struct Pool2dParams {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool channels_last = false;
  // Average pooling: divide by the padded window size (else by the in-bounds count), or by
  // divisor when it is non-zero.
  bool count_include_pad = true;
  int64_t divisor = 0;
  // Adaptive average pooling: output o of a dim averages [o * in / out, ceil((o + 1) * in / out)).
  bool adaptive = false;

  // Element offset of (n, c, h, w) in a tensor laid out like the input (h, w < H, W) or
  // output (OH, OW).
  KILN_HD int64_t in_offset(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return channels_last ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
  }
  KILN_HD int64_t out_offset(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return channels_last ? ((n * OH + h) * OW + w) * C + c : ((n * C + c) * OH + h) * OW + w;
  }
};

// Splits a flat NCHW- or NHWC-ordered index over [N, C, A, B] into its coordinates. I is the
// division type: the CUDA kernels use 32 bits when the index fits (64-bit division is slow).
template <typename I>
KILN_HD void unflatten_index(int64_t flat, int64_t C_, int64_t A_, int64_t B_, bool channels_last,
                             int64_t& n, int64_t& c, int64_t& a, int64_t& b) {
  I i = static_cast<I>(flat);
  const I C = static_cast<I>(C_), A = static_cast<I>(A_), B = static_cast<I>(B_);
  if (channels_last) {
    c = i % C;
    i /= C;
    b = i % B;
    i /= B;
    a = i % A;
    n = i / A;
  } else {
    b = i % B;
    i /= B;
    a = i % A;
    i /= A;
    c = i % C;
    n = i / C;
  }
}

// The averaging window of output o along one dim of input size `in`: [start, end) clipped to
// the input, and the (unclipped, padded) size count_include_pad divides by.
struct AvgWindow {
  int64_t start, end, padded;
};

KILN_HD AvgWindow avg_window(int64_t o, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
                             bool adaptive) {
  if (adaptive) {
    const int64_t a = o * in / out, b = ((o + 1) * in + out - 1) / out;
    return {a, b, b - a};
  }
  int64_t a = o * s - p;
  int64_t b = a + k < in + p ? a + k : in + p;
  const int64_t padded = b - a;
  if (a < 0) a = 0;
  if (b > in) b = in;
  return {a, b, padded};
}

KILN_HD int64_t avg_divisor(const Pool2dParams& p, const AvgWindow& wh, const AvgWindow& ww) {
  if (p.divisor != 0) return p.divisor;
  if (p.count_include_pad && !p.adaptive) return wh.padded * ww.padded;
  return (wh.end - wh.start) * (ww.end - ww.start);
}

// The maximum of output (oh, ow)'s window and its flat h * W + w position in the
// plane; read(h, w) gives an input value in the accumulation type A. The first
// maximum wins; a NaN beats everything and then stays (CPU and CUDA alike).
template <typename A, typename Read>
KILN_HD void window_max(const Pool2dParams& p, int64_t oh, int64_t ow, Read read, A& best,
                        int64_t& arg) {
  arg = -1;
  best = -static_cast<A>(INFINITY);
  for (int64_t a = 0; a < p.kh; ++a) {
    const int64_t h = oh * p.sh - p.ph + a * p.dh;
    if (h < 0 || h >= p.H) continue;
    for (int64_t b = 0; b < p.kw; ++b) {
      const int64_t w = ow * p.sw - p.pw + b * p.dw;
      if (w < 0 || w >= p.W) continue;
      const A v = read(h, w);
      const bool best_nan = best != best, v_nan = v != v;
      if (arg < 0 || (!best_nan && (v > best || v_nan))) {
        best = v;
        arg = h * p.W + w;
      }
    }
  }
}

// The outputs [first, last] along one dim whose window can contain input position i.
struct OutRange {
  int64_t first, last;
};

KILN_HD OutRange avg_outputs_of(int64_t i, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
                                bool adaptive) {
  if (adaptive) return {i * out / in, ((i + 1) * out + in - 1) / in - 1};
  const int64_t first = i + p < k ? 0 : (i + p - k) / s + 1;
  const int64_t last = (i + p) / s < out - 1 ? (i + p) / s : out - 1;
  return {first, last};
}

// Max pooling windows span (k - 1) * d + 1 positions. I is the arithmetic type: the CUDA
// backward uses 32 bits when every index fits (its two divisions dominate the kernel in 64).
template <typename I = int64_t>
KILN_HD OutRange max_outputs_of(I i, I out, I k, I s, I p, I d) {
  const I span = (k - 1) * d;
  const I first = i + p < span ? I(0) : (i + p - span + s - 1) / s;
  const I last = (i + p) / s < out - 1 ? (i + p) / s : out - 1;
  return {static_cast<int64_t>(first), static_cast<int64_t>(last)};
}

}  // namespace kiln
