// Note [Window tables]
// Every pooling and resampling op here reads, for each output element, a small
// set of input positions: a pooling window, an adaptive bin, the 1, 2 or 4
// neighbours of an interpolation. The front end builds that set on the host as
// a table of flat input positions [O, KK] with a weight per entry (0 marks
// padding and ceil_mode overhang), separably per spatial dim and combined by
// product. The device work is then one index_select of [N, C, O * KK] and a
// weighted sum (average pooling, interpolation) or an argmax whose winning
// position feeds a gather (max pooling, so the gradient goes to one element,
// as in PyTorch). Tables cost O(out * window) host work, like im2col's copy.
// 1-d and 2-d max / average / adaptive average pooling skip the tables where the device has
// direct kernels (Note [Direct pooling kernels] in ops/pool2d.h); the tables serve the rest.
#include "ops/pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/index.h"
#include "ops/memory_format.h"
#include "ops/pool2d.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// One spatial dim: out positions with k entries each (pos, weight).
struct DimTable {
  int64_t out = 0, k = 0;
  std::vector<int64_t> pos;
  std::vector<double> w;
};

struct Table {
  int64_t out = 1, k = 1;
  std::vector<int64_t> pos;
  std::vector<double> w;
};

Table combine(const std::vector<DimTable>& dims, const Shape& in) {
  Table t;
  for (const auto& d : dims) {
    t.out *= d.out;
    t.k *= d.k;
  }
  t.pos.assign(static_cast<size_t>(t.out * t.k), 0);
  t.w.assign(t.pos.size(), 1.0);
  const size_t n = dims.size();
  std::vector<int64_t> o(n), kk(n);
  for (int64_t a = 0; a < t.out; ++a) {
    for (int64_t r = a, i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
      o[i] = r % dims[i].out;
      r /= dims[i].out;
    }
    for (int64_t b = 0; b < t.k; ++b) {
      int64_t pos = 0;
      double w = 1.0;
      for (int64_t r = b, i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
        kk[i] = r % dims[i].k;
        r /= dims[i].k;
      }
      for (size_t i = 0; i < n; ++i) {
        size_t e = static_cast<size_t>(o[i] * dims[i].k + kk[i]);
        pos = pos * in[i] + dims[i].pos[e];
        w *= dims[i].w[e];
      }
      t.pos[static_cast<size_t>(a * t.k + b)] = pos;
      t.w[static_cast<size_t>(a * t.k + b)] = w;
    }
  }
  return t;
}

Tensor weight_table(const std::vector<double>& w, const Shape& shape, const Tensor& like) {
  Tensor t = empty(shape, DType::Float64);
  std::copy(w.begin(), w.end(), t.data<double>());
  return device_table(to_dtype(t, like.dtype()), like.device());
}

// Adds the batch dim to an unbatched input and checks the dims and dtype (floating, or any
// but bool where `integers` is set); returns whether it added the dim.
bool batchify(Tensor& x, size_t spatial, const char* op, bool integers = false) {
  int64_t nd = static_cast<int64_t>(spatial);
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, Runtime, "[", op, "] Expected ", nd + 1,
             "D or ", nd + 2, "D (batch mode) tensor for input, got input of size ", x.sizes());
  for (int64_t d = x.dim() - nd; d < x.dim(); ++d)
    KILN_CHECK(x.size(d) > 0, Runtime, "[", op,
               "] Expected input's non-batch dimensions to have "
               "positive length, but input has a shape of ",
               x.sizes());
  KILN_CHECK(is_floating(x.dtype()) || (integers && x.dtype() != DType::Bool), NotImplemented,
             "[", op, "] not implemented for ", x.dtype());
  if (x.dim() == nd + 2) return false;
  x = unsqueeze(x, 0);
  return true;
}

// [N, C, *S] -> [N, C, O, KK] window values.
Tensor gather_windows(const Tensor& x, const Table& t) {
  Tensor flat = flatten(x, 2);
  Tensor idx = index_table(t.pos, {t.out * t.k}, x.device());
  return reshape(index_select(flat, 2, idx), {x.size(0), x.size(1), t.out, t.k});
}

Tensor finish(const Tensor& y, const Tensor& x, const std::vector<DimTable>& dims, bool unbatched) {
  Shape s = {x.size(0), x.size(1)};
  for (const auto& d : dims) s.push_back(d.out);
  Tensor out = reshape(y, s);
  return unbatched ? squeeze(out, std::vector<int64_t>{0}) : out;
}

Tensor weighted_sum(const Tensor& input, const std::vector<DimTable>& dims, bool unbatched) {
  Shape in(input.sizes().begin() + 2, input.sizes().end());
  Table t = combine(dims, in);
  Tensor win = gather_windows(input, t);
  Tensor y = t.k == 1 ? win : sum(mul(win, weight_table(t.w, {t.out, t.k}, input)), {{3}});
  return finish(y, input, dims, unbatched);
}

std::pair<Tensor, Tensor> windowed_max(const Tensor& input, const std::vector<DimTable>& dims,
                                       bool unbatched) {
  Shape in(input.sizes().begin() + 2, input.sizes().end());
  Table t = combine(dims, in);
  const int64_t N = input.size(0), C = input.size(1);
  Tensor idx;
  {
    GradModeGuard no_grad(false);
    Tensor win = gather_windows(input, t);
    Tensor invalid = empty({t.out, t.k}, DType::Bool);
    bool* m = invalid.data<bool>();
    for (size_t i = 0; i < t.w.size(); ++i) m[i] = t.w[i] == 0.0;
    // Integer windows need no mask: their padded slots repeat a valid element of the
    // same window (max_pool_nd), which cannot change the max or the first argmax.
    if (is_floating(input.dtype()))
      win = masked_fill(win, device_table(invalid, input.device()),
                        Scalar(-std::numeric_limits<double>::infinity()));
    Tensor arg = argmax(win, 3, true);
    Tensor table =
        expand(index_table(t.pos, {1, 1, t.out, t.k}, input.device()), {N, C, t.out, t.k});
    idx = reshape(gather(table, 3, arg), {N, C, t.out});
  }
  Tensor y = gather(flatten(input, 2), 2, idx);
  return {finish(y, input, dims, unbatched), finish(idx, input, dims, unbatched)};
}

// Exact in 128 bits: kernel, padding, stride and dilation come from users and may be anywhere
// in int64 (Note [Checked shape arithmetic]). A size outside int64 saturates, and pool_out's
// checks or the allocation refuse it.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  using Wide = __int128;
  const Wide num =
      Wide(in) + 2 * Wide(pad) - Wide(dil) * (Wide(k) - 1) - 1 + (ceil ? stride - 1 : 0);
  Wide out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= Wide(in) + pad) --out;
  return static_cast<int64_t>(std::min<Wide>(std::max<Wide>(out, INT64_MIN), INT64_MAX));
}

Dims expand_stride(const Dims& stride, const Dims& kernel) {
  return stride.empty() ? kernel : stride;
}

void check_pool_args(const Dims& k, const Dims& s, const Dims& p, const Dims& d, bool avg,
                     const char* op) {
  const size_t n = k.size();
  auto check = [&](const Dims& v, const char* name, int64_t min) {
    KILN_CHECK(v.size() == n, Runtime, "[", op, "] ", name, " must have ", n, " elements, got ", v);
    for (int64_t e : v)
      KILN_CHECK(e >= min, Runtime, "[", op, "] ", name, " must be ",
                 min == 0 ? "non-negative" : "greater than zero", ", but got ", name, "=", v);
  };
  check(k, "kernel_size", 1);
  check(s, "stride", 1);
  check(p, "padding", 0);
  check(d, "dilation", 1);
  for (size_t i = 0; i < n; ++i) {
    if (avg) {
      KILN_CHECK(p[i] <= k[i] / 2, Runtime, "[", op,
                 "] pad should be at most half of kernel "
                 "size, but got pad=",
                 p[i], " and kernel_size=", k[i]);
    } else {
      KILN_CHECK(p[i] <= (__int128(d[i]) * (k[i] - 1) + 1) / 2, Runtime, "[", op,
                 "] pad should be at most "
                 "half of effective kernel size, but got pad=",
                 p[i], ", kernel_size=", k[i], " and dilation=", d[i]);
    }
  }
}

Dims pool_out(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, const Dims& d,
              bool ceil, const char* op) {
  const size_t n = k.size();
  Dims out(n);
  Shape in(x.sizes().end() - static_cast<int64_t>(n), x.sizes().end());
  for (size_t i = 0; i < n; ++i) out[i] = pooled_size(in[i], k[i], p[i], s[i], d[i], ceil);
  for (int64_t o : out)
    KILN_CHECK(o > 0, Runtime, "[", op, "] Given input size: ", x.sizes(),
               ". Calculated output size: ", out, ". Output size is too small");
  return out;
}

// --- Direct 2-d kernels (Note [Direct pooling kernels]) -------------------------------------

// t [N, C, A, B] with the memory layout the kernels read: NCHW-contiguous, or NHWC-dense when
// channels_last; copies only when t is in neither.
Tensor in_layout(const Tensor& t, bool channels_last) {
  return contiguous(t, channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
}

// An uninitialized [N, C, A, B] tensor in the kernels' layout.
Tensor alloc_layout(const Shape& nchw, DType dtype, Device device, bool channels_last) {
  if (!channels_last) return make_tensor(nchw, dtype, device);
  return empty_in_memory_order(nchw, dtype, device, memory_order(MemoryFormat::ChannelsLast, 4));
}

Shape in_shape(const Pool2dParams& p) { return {p.N, p.C, p.H, p.W}; }
Shape out_shape(const Pool2dParams& p) { return {p.N, p.C, p.OH, p.OW}; }

// The pooling gradients are linear in grad_out, so each backward op's own gradient is the
// forward (average) or a gather at the saved indices (max): double backward through the same
// kernels, to any order.
Tensor avg_pool2d_direct(const Tensor& x, const Pool2dParams& p);

Tensor avg_pool2d_backward_direct(const Tensor& grad_out, const Pool2dParams& p, DType dtype) {
  Tensor g = in_layout(to_dtype(grad_out, dtype), p.channels_last);
  Tensor gi = alloc_layout(in_shape(p), dtype, g.device(), p.channels_last);
  if (gi.numel() > 0)
    require_kernel(backend(g.device()).avg_pool2d_backward, "avg_pool2d_backward", g.device())(
        gi, g, p);
  if (needs_grad({g}))
    record("avg_pool2d_backward", {g}, {gi},
           [p](const std::vector<Tensor>& gg, Node&) -> std::vector<Tensor> {
             return {avg_pool2d_direct(gg[0], p)};
           });
  return gi;
}

Tensor avg_pool2d_direct(const Tensor& input, const Pool2dParams& p) {
  Tensor x = in_layout(input, p.channels_last);
  Tensor y = alloc_layout(out_shape(p), x.dtype(), x.device(), p.channels_last);
  if (y.numel() > 0)
    require_kernel(backend(x.device()).avg_pool2d_forward, "avg_pool2d", x.device())(y, x, p);
  if (needs_grad({x}))
    record(p.adaptive ? "adaptive_avg_pool2d" : "avg_pool2d", {x}, {y},
           [p, dtype = x.dtype()](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
             return {avg_pool2d_backward_direct(g[0], p, dtype)};
           });
  return y;
}

Tensor max_pool2d_backward_direct(const Tensor& grad_out, const Tensor& indices,
                                  const Pool2dParams& p, DType dtype) {
  Tensor g = in_layout(to_dtype(grad_out, dtype), p.channels_last);
  Tensor gi = alloc_layout(in_shape(p), dtype, g.device(), p.channels_last);
  if (gi.numel() > 0)
    require_kernel(backend(g.device()).max_pool2d_backward, "max_pool2d_backward", g.device())(
        gi, g, indices, p);
  if (needs_grad({g}))
    record("max_pool2d_backward", {g}, {gi},
           [indices, p](const std::vector<Tensor>& gg, Node&) -> std::vector<Tensor> {
             Tensor flat = gather(flatten(gg[0], 2), 2, flatten(indices, 2));
             return {reshape(flat, out_shape(p))};
           });
  return gi;
}

std::pair<Tensor, Tensor> max_pool2d_direct(const Tensor& input, const Pool2dParams& p) {
  Tensor x = in_layout(input, p.channels_last);
  Tensor y = alloc_layout(out_shape(p), x.dtype(), x.device(), p.channels_last);
  Tensor idx = alloc_layout(out_shape(p), DType::Int64, x.device(), p.channels_last);
  if (y.numel() > 0)
    require_kernel(backend(x.device()).max_pool2d_forward, "max_pool2d", x.device())(y, idx, x, p);
  if (needs_grad({x}))
    record("max_pool2d", {x}, {y},
           [idx, p, dtype = x.dtype()](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
             return {max_pool2d_backward_direct(g[0], idx, p, dtype)};
           });
  return {y, idx};
}

// Parameters for x [N, C, *S] with 1 or 2 spatial dims (1-d pools as H = 1) and output sizes
// `out`; window arguments 1-d or 2-d like S.
Pool2dParams pool_params(const Tensor& x, const Dims& out, const Dims& k, const Dims& s,
                         const Dims& pad, const Dims& d) {
  const bool one = out.size() == 1;
  auto at = [one](const Dims& v, size_t i, int64_t unit) {
    return one ? (i == 0 ? unit : v[0]) : v[i];
  };
  Pool2dParams p;
  p.N = x.size(0);
  p.C = x.size(1);
  p.H = one ? 1 : x.size(2);
  p.W = x.size(x.dim() - 1);
  p.OH = at(out, 0, 1);
  p.OW = at(out, 1, 1);
  p.kh = at(k, 0, 1), p.kw = at(k, 1, 1);
  p.sh = at(s, 0, 1), p.sw = at(s, 1, 1);
  p.ph = at(pad, 0, 0), p.pw = at(pad, 1, 0);
  p.dh = at(d, 0, 1), p.dw = at(d, 1, 1);
  return p;
}

// x [N, C, L] or [N, C, H, W] as the 4-d view the kernels take; sets p.channels_last when its
// memory is channels-last (else it goes NCHW-contiguous, copied if needed).
Tensor as_4d(const Tensor& x, Pool2dParams& p) {
  Tensor x4 = x.dim() == 3 ? unsqueeze(x, 2) : x;
  p.channels_last = !x4.is_contiguous() && is_contiguous(x4, MemoryFormat::ChannelsLast);
  return x4;
}

// y [N, C, OH, OW] back to x's rank (1-d: drop H) and batchedness.
Tensor from_4d(const Tensor& y, const Tensor& x, bool unbatched) {
  Tensor r = x.dim() == 3 ? squeeze(y, std::vector<int64_t>{2}) : y;
  return unbatched ? squeeze(r, std::vector<int64_t>{0}) : r;
}

bool has_direct_kernels(const Tensor& x, size_t spatial) {
  return spatial <= 2 && backend(x.device()).max_pool2d_forward != nullptr;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool_nd(const Tensor& input, const Dims& kernel_size,
                                      const Dims& stride_arg, const Dims& padding,
                                      const Dims& dilation, bool ceil_mode, const char* op) {
  tracing::OpScope scope("max_pool_nd");
  const size_t n = kernel_size.size();
  KILN_CHECK(input.dtype() != DType::Bool, NotImplemented, "[", op,
             "] not implemented for 'Bool'");
  Tensor x = input;
  bool unbatched = batchify(x, n, op, true);
  Dims stride = expand_stride(stride_arg, kernel_size);
  check_pool_args(kernel_size, stride, padding, dilation, false, op);
  Dims out = pool_out(x, kernel_size, stride, padding, dilation, ceil_mode, op);
  // The direct kernels are floating point; integer inputs take the window tables.
  if (has_direct_kernels(x, n) && is_floating(x.dtype())) {
    Pool2dParams p = pool_params(x, out, kernel_size, stride, padding, dilation);
    Tensor x4 = as_4d(x, p);
    auto [y, idx] = max_pool2d_direct(x4, p);
    return scope.out(
        std::pair<Tensor, Tensor>{from_4d(y, x, unbatched), from_4d(idx, x, unbatched)}, input,
        kernel_size, stride_arg, padding, dilation, ceil_mode, op);
  }
  std::vector<DimTable> dims(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.size(2 + static_cast<int64_t>(i));
    DimTable& t = dims[i];
    t.out = out[i];
    t.k = kernel_size[i];
    for (int64_t o = 0; o < t.out; ++o) {
      // Padded slots read the window's first valid element (every window has one: the
      // padding is at most half the kernel), so integer windows need no -inf fill.
      int64_t first_valid = 0;
      for (int64_t k = t.k - 1; k >= 0; --k) {
        int64_t p = o * stride[i] - padding[i] + k * dilation[i];
        if (p >= 0 && p < in) first_valid = p;
      }
      for (int64_t k = 0; k < t.k; ++k) {
        int64_t p = o * stride[i] - padding[i] + k * dilation[i];
        bool valid = p >= 0 && p < in;
        t.pos.push_back(valid ? p : first_valid);
        t.w.push_back(valid ? 1.0 : 0.0);
      }
    }
  }
  return scope.out(windowed_max(x, dims, unbatched), input, kernel_size, stride_arg, padding,
                   dilation, ceil_mode, op);
}

Tensor avg_pool_nd(const Tensor& input, const Dims& kernel_size, const Dims& stride_arg,
                   const Dims& padding, bool ceil_mode, bool count_include_pad,
                   std::optional<int64_t> divisor_override, const char* op) {
  tracing::OpScope scope("avg_pool_nd");
  const size_t n = kernel_size.size();
  Tensor x = input;
  bool unbatched = batchify(x, n, op);
  Dims stride = expand_stride(stride_arg, kernel_size);
  check_pool_args(kernel_size, stride, padding, Dims(n, 1), true, op);
  KILN_CHECK(!divisor_override || *divisor_override != 0, Runtime, "[", op,
             "] divisor must be not zero");
  Dims out = pool_out(x, kernel_size, stride, padding, Dims(n, 1), ceil_mode, op);
  if (has_direct_kernels(x, n)) {
    Pool2dParams p = pool_params(x, out, kernel_size, stride, padding, Dims(n, 1));
    p.count_include_pad = count_include_pad;
    p.divisor = divisor_override.value_or(0);
    Tensor x4 = as_4d(x, p);
    return scope.out(from_4d(avg_pool2d_direct(x4, p), x, unbatched), input, kernel_size,
                     stride_arg, padding, ceil_mode, count_include_pad, divisor_override, op);
  }
  // The divisor of a window is a product over dims, so each dim's table
  // carries its own factor: the count of (padded or real) elements it covers.
  std::vector<DimTable> dims(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.size(2 + static_cast<int64_t>(i));
    DimTable& t = dims[i];
    t.out = out[i];
    t.k = kernel_size[i];
    for (int64_t o = 0; o < t.out; ++o) {
      int64_t start = o * stride[i] - padding[i];
      int64_t end = std::min(start + t.k, in + padding[i]);
      int64_t count =
          count_include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0);
      double divisor = divisor_override ? (i == 0 ? static_cast<double>(*divisor_override) : 1.0)
                                        : static_cast<double>(count);
      double scale = 1.0 / divisor;
      for (int64_t k = 0; k < t.k; ++k) {
        int64_t p = start + k;
        bool valid = p >= 0 && p < in;
        t.pos.push_back(valid ? p : 0);
        t.w.push_back(valid ? scale : 0.0);
      }
    }
  }
  return scope.out(weighted_sum(x, dims, unbatched), input, kernel_size, stride_arg, padding,
                   ceil_mode, count_include_pad, divisor_override, op);
}

namespace {

Dims adaptive_out(const Tensor& x, const Dims& output_size, size_t n, const char* op) {
  KILN_CHECK(output_size.size() == n, Runtime, "[", op, "] output_size must have ", n,
             " elements, got ", output_size);
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = output_size[i] < 0 ? x.size(x.dim() - static_cast<int64_t>(n - i)) : output_size[i];
    KILN_CHECK(output_size[i] >= -1, Runtime, "[", op, "] output_size must be non-negative, got ",
               output_size);
  }
  return out;
}

std::vector<DimTable> adaptive_dims(const Tensor& x, const Dims& out, bool average) {
  std::vector<DimTable> dims(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t in = x.size(2 + static_cast<int64_t>(i));
    DimTable& t = dims[i];
    t.out = out[i];
    for (int64_t o = 0; o < t.out; ++o)
      t.k = std::max(t.k, (o + 1) * in / t.out + ((o + 1) * in % t.out != 0) - o * in / t.out);
    for (int64_t o = 0; o < t.out; ++o) {
      int64_t start = o * in / t.out, end = ((o + 1) * in + t.out - 1) / t.out;
      for (int64_t k = 0; k < t.k; ++k) {
        bool valid = start + k < end;
        t.pos.push_back(valid ? start + k : start);
        t.w.push_back(valid ? (average ? 1.0 / static_cast<double>(end - start) : 1.0) : 0.0);
      }
    }
  }
  return dims;
}

}  // namespace

Tensor adaptive_avg_pool_nd(const Tensor& input, const Dims& output_size, const char* op) {
  tracing::OpScope scope("adaptive_avg_pool_nd");
  const size_t n = output_size.size();
  Tensor x = input;
  bool unbatched = batchify(x, n, op);
  Dims out = adaptive_out(x, output_size, n, op);
  if (has_direct_kernels(x, n) && x.numel() > 0) {
    // Global average pooling (the usual CNN head) is a plain mean over the spatial dims.
    if (std::all_of(out.begin(), out.end(), [](int64_t o) { return o == 1; })) {
      std::vector<int64_t> spatial;
      for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
      Tensor y = mean(x, spatial, true);
      return scope.out(unbatched ? squeeze(y, std::vector<int64_t>{0}) : y, input, output_size, op);
    }
    Pool2dParams p = pool_params(x, out, Dims(n, 1), Dims(n, 1), Dims(n, 0), Dims(n, 1));
    p.adaptive = true;
    Tensor x4 = as_4d(x, p);
    return scope.out(from_4d(avg_pool2d_direct(x4, p), x, unbatched), input, output_size, op);
  }
  return scope.out(weighted_sum(x, adaptive_dims(x, out, true), unbatched), input, output_size, op);
}

std::pair<Tensor, Tensor> adaptive_max_pool_nd(const Tensor& input, const Dims& output_size,
                                               const char* op) {
  const size_t n = output_size.size();
  Tensor x = input;
  bool unbatched = batchify(x, n, op);
  Dims out = adaptive_out(x, output_size, n, op);
  for (int64_t o : out)
    KILN_CHECK(o > 0, Runtime, "[", op, "] output_size must be positive, got ", output_size);
  return windowed_max(x, adaptive_dims(x, out, false), unbatched);
}

Tensor interpolate(const Tensor& input, const std::optional<Dims>& size,
                   const std::optional<std::vector<double>>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, bool recompute_scale_factor) {
  const char* op = "interpolate";
  // The input rank each interpolating mode needs; the nearest modes take any of them.
  int64_t rank = mode == "linear" ? 3 : mode == "bilinear" ? 4 : mode == "trilinear" ? 5 : 0;
  const bool exact = mode == "nearest-exact";
  KILN_CHECK(rank > 0 || mode == "nearest" || exact, NotImplemented, "[", op, "] mode '", mode,
             "' is not supported; expected nearest, nearest-exact, linear, bilinear or trilinear");
  const bool linear = rank > 0;
  // As in PyTorch, uint8 images interpolate too (linear modes round back to uint8); other
  // integer dtypes do not.
  KILN_CHECK(is_floating(input.dtype()) || input.dtype() == DType::UInt8, NotImplemented, "[",
             op, "] not implemented for dtype ", input.dtype(), " (floating point and uint8 only)");
  if (linear && input.dtype() == DType::UInt8) {
    Tensor y = interpolate(to_dtype(input, DType::Float32), size, scale_factor, mode,
                           align_corners, recompute_scale_factor);
    return to_dtype(clamp(round(y), Scalar(0.0), Scalar(255.0)), DType::UInt8);
  }
  KILN_CHECK(linear || !align_corners, Value, "[", op,
             "] align_corners option can only be set "
             "with the interpolating modes: linear | bilinear | bicubic | trilinear");
  KILN_CHECK(input.dim() >= 3 && input.dim() <= 5, NotImplemented, "[", op,
             "] Input Error: Only 3D, 4D and 5D input Tensors supported (got ", input.dim(),
             "D) for the modes: nearest | linear | bilinear | trilinear (got ", mode, ")");
  KILN_CHECK(rank == 0 || input.dim() == rank, NotImplemented, "[", op, "] Got ", input.dim(),
             "D input, but ", mode, " mode needs ", rank, "D input");
  KILN_CHECK(size.has_value() != scale_factor.has_value(), Value, "[", op, "] ",
             size ? "only one of size or scale_factor should be defined"
                  : "either size or scale_factor should be defined");
  const size_t n = static_cast<size_t>(input.dim()) - 2;
  Tensor x = input;
  batchify(x, n, op, true);
  std::vector<DimTable> dims(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.size(2 + static_cast<int64_t>(i)), out;
    double scale;  // input coordinate step per output element
    if (size) {
      KILN_CHECK(size->size() == n, Value, "[", op,
                 "] Input and output must have the same number "
                 "of spatial dimensions, but got input with spatial dimensions of ",
                 Shape(x.sizes().begin() + 2, x.sizes().end()), " and output size of ", *size);
      out = (*size)[i];
      scale = static_cast<double>(in) / static_cast<double>(out);
    } else {
      KILN_CHECK(scale_factor->size() == n, Value, "[", op,
                 "] Input and scale_factor must have "
                 "the same number of spatial dimensions, got ",
                 scale_factor->size());
      double sf = (*scale_factor)[i];
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * sf));
      scale =
          recompute_scale_factor ? static_cast<double>(in) / static_cast<double>(out) : 1.0 / sf;
    }
    KILN_CHECK(out > 0, Runtime, "[", op,
               "] Input and output sizes should be greater than 0, but "
               "got input ",
               Shape(x.sizes().begin() + 2, x.sizes().end()), " and output size ", out);
    DimTable& t = dims[i];
    t.out = out;
    t.k = linear ? 2 : 1;
    for (int64_t o = 0; o < out; ++o) {
      if (!linear) {
        // nearest takes floor(o * scale) (PyTorch's legacy rule, shifted left);
        // nearest-exact the pixel whose centre is nearest: floor((o + 0.5) * scale).
        const double src = exact ? (static_cast<double>(o) + 0.5) * scale : o * scale;
        t.pos.push_back(std::min(static_cast<int64_t>(std::floor(src)), in - 1));
        t.w.push_back(1.0);
        continue;
      }
      double src;
      if (align_corners.value_or(false)) {
        src = out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) / (out - 1) : 0.0;
      } else {
        src = std::max((o + 0.5) * scale - 0.5, 0.0);
      }
      int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
      int64_t i1 = std::min(i0 + 1, in - 1);
      double l1 = src - static_cast<double>(i0);
      t.pos.insert(t.pos.end(), {i0, i1});
      t.w.insert(t.w.end(), {1.0 - l1, l1});
    }
  }
  return weighted_sum(x, dims, false);
}

}  // namespace kiln
