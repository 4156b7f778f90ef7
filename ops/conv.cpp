// Note [Convolution as GEMM]
// A convolution is im2col followed by one GEMM per group over the whole batch:
// the padded input is viewed as sliding windows (one `unfold` view per spatial
// dim, a strided slice for dilation) and copied once into columns
// [G, C/G * prod(K), N * L], which the weight, seen as [G, O/G, C/G * prod(K)],
// multiplies. Keeping the batch in the GEMM's columns (rather than
// broadcasting the weight over N) avoids a copy of the weight per sample and
// gives the weight gradient as one GEMM with no per-sample intermediate.
// The transposed convolution is the adjoint: weight^T @ input gives the
// columns, and col2im sums each column entry into its output position with
// one index_add over the flattened padded output. Each op records one autograd
// node whose backward (backward-data = col2im of a GEMM, backward-weight = a
// GEMM) is written with kiln ops, so double backward works, on any device that
// has the view, index and matmul kernels (cuBLAS on CUDA).
#include "ops/conv.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/conv_backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/memory_format.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

int64_t product(const Dims& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

void check_arg(const Dims& v, size_t n, const char* name, int64_t min, const char* op) {
  KILN_CHECK(v.size() == n, Runtime, "[", op, "] expected ", name, " to have ", n,
             " elements, got ", v);
  for (int64_t x : v)
    KILN_CHECK(x >= min, Runtime, "[", op, "] ", name, " must be >= ", min, ", got ", v);
}

// Pads (or crops, for negative amounts) dims 2.. of x by lo[i] / hi[i] with `value`.
Tensor pad_spatial(const Tensor& x, const Dims& lo, const Dims& hi, double value) {
  Tensor out = x;
  for (size_t i = 0; i < lo.size(); ++i) {
    int64_t d = 2 + static_cast<int64_t>(i);
    if (lo[i] < 0 || hi[i] < 0) {
      int64_t start = std::max<int64_t>(-lo[i], 0);
      int64_t stop = out.size(d) - std::max<int64_t>(-hi[i], 0);
      out = narrow(out, d, start, std::max<int64_t>(stop - start, 0));
    }
    if (lo[i] > 0 || hi[i] > 0) {
      std::vector<Tensor> seq;
      Shape s = out.sizes();
      if (lo[i] > 0) {
        s[d] = lo[i];
        seq.push_back(full(s, Scalar(value), out.dtype(), out.device()));
      }
      seq.push_back(out);
      if (hi[i] > 0) {
        s[d] = hi[i];
        seq.push_back(full(s, Scalar(value), out.dtype(), out.device()));
      }
      out = cat(seq, d);
    }
  }
  return out;
}

// [N, C, *S] -> [G, C / G, N * prod(S)] (a copy): the batch joins the GEMM's columns.
Tensor to_batch_last(const Tensor& t, int64_t groups) {
  const int64_t n = t.size(0), c = t.size(1), l = t.numel() / std::max<int64_t>(n * c, 1);
  return reshape(permute(reshape(t, {n, c, l}), {1, 0, 2}), {groups, c / groups, n * l});
}

// [G, Cg, N * L] -> [N, G * Cg, L] (a view).
Tensor from_batch_last(const Tensor& t, int64_t n) {
  const int64_t c = t.size(0) * t.size(1), l = n == 0 ? 0 : t.size(2) / n;
  return permute(reshape(t, {c, n, l}), {1, 0, 2});
}

// Exact window arithmetic: padding, dilation and kernel sizes come from users and may be
// anywhere in int64, so sums and products are formed in 128 bits (Note [Checked shape
// arithmetic]); a result outside int64 saturates, and the caller's size checks refuse it.
using Wide = __int128;
int64_t saturate(Wide v) {
  return static_cast<int64_t>(std::min<Wide>(std::max<Wide>(v, INT64_MIN), INT64_MAX));
}

// Output length of a sliding window over `padded` elements.
int64_t windows(Wide padded, int64_t k, int64_t d, int64_t s) {
  return saturate((padded - Wide(d) * (k - 1) - 1) / s + 1);
}

// [N, C, *S] -> columns [N, C * prod(K), prod(out)], out filled with the block counts.
// With batch_last the columns come as [C * prod(K), N * prod(out)] instead,
// the layout of one GEMM over the whole batch.
Tensor im2col_impl(const Tensor& x, const Dims& k, const Dims& dil, const Dims& lo, const Dims& hi,
                   const Dims& stride, Dims& out, const char* op, bool batch_last = false) {
  const size_t n = k.size();
  // The padded input is materialized, so its size must be one a tensor can have.
  Shape padded = x.sizes();
  for (size_t i = 0; i < n; ++i) {
    const Wide p = Wide(x.size(2 + static_cast<int64_t>(i))) + lo[i] + hi[i];
    KILN_CHECK(p <= INT64_MAX, Runtime, "[", op, "] padding ", lo, " / ", hi, " of input size ",
               x.sizes(), ": Storage size calculation overflowed");
    padded[2 + i] = std::max<int64_t>(saturate(p), 0);
  }
  checked_nbytes(padded, x.itemsize(), op);
  Tensor t = pad_spatial(x, lo, hi, 0.0);
  out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t d = 2 + static_cast<int64_t>(i);
    const Wide span = Wide(dil[i]) * (k[i] - 1) + 1;
    if (t.size(d) < span) {
      fail(ErrorKind::Runtime, "[", op, "] Calculated padded input size per channel: ",
           Shape(t.sizes().begin() + 2, t.sizes().end()), ". Kernel size: ", k, " (dilation ", dil,
           "). Kernel size can't be greater than actual input size");
    }
    out[i] = windows(t.size(d), k[i], dil[i], stride[i]);
    t = unfold(t, d, span, stride[i]);  // appends the window dim
    if (dil[i] > 1) t = slice(t, -1, 0, std::nullopt, dil[i]);
  }
  // [N, C, o1.., k1..] -> [N, C, k1.., o1..] or [C, k1.., N, o1..]
  std::vector<int64_t> perm = batch_last ? std::vector<int64_t>{1} : std::vector<int64_t>{0, 1};
  for (size_t i = 0; i < n; ++i) perm.push_back(static_cast<int64_t>(2 + n + i));
  if (batch_last) perm.push_back(0);
  for (size_t i = 0; i < n; ++i) perm.push_back(static_cast<int64_t>(2 + i));
  if (batch_last)
    return reshape(permute(t, perm), {x.size(1) * product(k), x.size(0) * product(out)});
  return reshape(permute(t, perm), {x.size(0), x.size(1) * product(k), product(out)});
}

// Sums columns [N, C * prod(K), prod(blocks)] into [N, C, *out_size]; the
// blocks start every `stride` in the output padded by `pad` on both sides.
Tensor col2im_impl(const Tensor& cols, const Dims& out_size, const Dims& k, const Dims& dil,
                   const Dims& pad, const Dims& stride, const Dims& blocks) {
  const size_t n = k.size();
  const int64_t K = product(k), L = product(blocks), C = cols.size(1) / K;
  Dims padded(n), pstride(n, 1);
  for (size_t i = 0; i < n; ++i) padded[i] = out_size[i] + 2 * pad[i];
  for (size_t i = n - 1; i > 0; --i) pstride[i - 1] = pstride[i] * padded[i];
  std::vector<int64_t> idx(static_cast<size_t>(K * L));
  Dims kk(n, 0), bb(n, 0);
  for (int64_t a = 0; a < K; ++a) {
    for (int64_t r = a, i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
      kk[i] = r % k[i];
      r /= k[i];
    }
    for (int64_t b = 0; b < L; ++b) {
      int64_t pos = 0;
      for (int64_t r = b, i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
        pos += ((r % blocks[i]) * stride[i] + kk[i] * dil[i]) * pstride[i];
        r /= blocks[i];
      }
      idx[static_cast<size_t>(a * L + b)] = pos;
    }
  }
  const int64_t N = cols.size(0);
  Tensor acc = zeros({N, C, product(padded)}, cols.dtype(), cols.device());
  acc = index_add(acc, 2, index_table(idx, {K * L}, cols.device()), reshape(cols, {N, C, K * L}));
  Shape shape = {N, C};
  shape.insert(shape.end(), padded.begin(), padded.end());
  Tensor out = reshape(acc, shape);
  for (size_t i = 0; i < n; ++i)
    if (pad[i] > 0) out = narrow(out, 2 + static_cast<int64_t>(i), pad[i], out_size[i]);
  return out;
}

// Adds the batch dim to an unbatched input; returns whether it did.
bool batchify(Tensor& x, size_t spatial, const char* op) {
  int64_t nd = static_cast<int64_t>(spatial);
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, Runtime, "[", op, "] Expected ", nd + 1,
             "D (unbatched) or ", nd + 2, "D (batched) input to ", op,
             ", but got input of size: ", x.sizes());
  if (x.dim() == nd + 2) return false;
  x = unsqueeze(x, 0);
  return true;
}

void check_operands(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                    int64_t channels, const char* op) {
  KILN_CHECK(weight.dtype() == input.dtype(), Runtime, "[", op, "] Input type (", input.dtype(),
             ") and weight type (", weight.dtype(), ") should be the same");
  KILN_CHECK(weight.device() == input.device(), Runtime, "[", op, "] Input on ", input.device(),
             " and weight on ", weight.device(), " should be on the same device");
  KILN_CHECK(is_floating(input.dtype()), Runtime, "[", op,
             "] expected a floating-point input, got ", input.dtype());
  if (bias) {
    KILN_CHECK(bias->dim() == 1 && bias->size(0) == channels, Runtime, "[", op,
               "] Given weight of size ", weight.sizes(),
               ", expected bias to be 1-dimensional with ", channels,
               " elements, but got bias of size ", bias->sizes(), " instead");
    KILN_CHECK(bias->dtype() == input.dtype() && bias->device() == input.device(), Runtime, "[", op,
               "] bias (", bias->dtype(), " on ", bias->device(),
               ") should have the input's dtype and device (", input.dtype(), " on ",
               input.device(), ")");
  }
}

Tensor add_bias(const Tensor& out, const std::optional<Tensor>& bias) {
  if (!bias) return out;
  Shape s(static_cast<size_t>(out.dim()), 1);
  s[1] = bias->size(0);
  return add(out, reshape(*bias, s));
}

// The composed gradients of conv (Note [Convolution as GEMM]) for the inputs
// asked for; the others stay undefined.
Grads conv_backward(const Tensor& xv, const Tensor& wv, const Tensor& grad, bool want_x,
                    bool want_w, const Dims& k, const Dims& out, const Dims& stride, const Dims& lo,
                    const Dims& hi, const Dims& dilation, int64_t G, const char* op) {
  const int64_t N = xv.size(0), O = wv.size(0), CK = wv.size(1) * product(k);
  const int64_t L = product(out);
  const size_t n = k.size();
  Tensor gy = to_batch_last(grad, G);  // [G, O / G, N * L]
  Tensor gx, gw;
  if (want_x) {
    Tensor wt = transpose(reshape(wv, {G, O / G, CK}), -1, -2);
    Dims padded(n);
    for (size_t i = 0; i < n; ++i) padded[i] = xv.size(2 + static_cast<int64_t>(i)) + lo[i] + hi[i];
    gx = col2im_impl(from_batch_last(matmul(wt, gy), N), padded, k, dilation, Dims(n, 0), stride,
                     out);
    for (size_t i = 0; i < n; ++i) {
      int64_t d = 2 + static_cast<int64_t>(i);
      if (lo[i] > 0 || hi[i] > 0) gx = narrow(gx, d, lo[i], xv.size(d));
    }
  }
  if (want_w) {
    Dims blocks;
    Tensor cols = im2col_impl(xv, k, dilation, lo, hi, stride, blocks, op, true);
    cols = reshape(cols, {G, CK, N * L});
    gw = reshape(matmul(gy, transpose(cols, -1, -2)), wv.sizes());
  }
  return {gx, gw};
}

// The composed gradients of conv_transpose: im2col of the output gradient (the
// padding after each dim, `hi`, is shrunk by output_padding so exactly
// `blocks` windows fit), then one GEMM per input.
Grads conv_transpose_backward(const Tensor& xv, const Tensor& wv, const Tensor& grad, bool want_x,
                              bool want_w, const Dims& k, const Dims& blocks, const Dims& stride,
                              const Dims& padding, const Dims& hi, const Dims& dilation, int64_t G,
                              const char* op) {
  const int64_t N = xv.size(0), Cg = wv.size(0) / G, OK = wv.size(1) * product(k);
  const int64_t L = product(blocks);
  Dims got;
  Tensor cols =
      reshape(im2col_impl(grad, k, dilation, padding, hi, stride, got, op, true), {G, OK, N * L});
  Tensor gx, gw;
  if (want_x) gx = reshape(from_batch_last(matmul(reshape(wv, {G, Cg, OK}), cols), N), xv.sizes());
  if (want_w) gw = reshape(matmul(to_batch_last(xv, G), transpose(cols, -1, -2)), wv.sizes());
  return {gx, gw};
}

// Note [Accelerated convolution]
// Where the device registered a ConvBackend (cuDNN on CUDA, oneDNN on the CPU:
// ops/conv_backend.h) and its flag (kiln.backends.cudnn.enabled / mkldnn.enabled) is on, conv runs the library's forward and
// conv_transpose its backward-data, each as one autograd node whose backward
// calls the other two passes (conv_transpose's input gradient is a forward
// conv). Under create_graph the backward composes instead, so the gradients
// are themselves differentiable (double backward). Problems the library
// cannot take (empty or over 2^31 elements, an output_padding reaching past
// the stride) or declines (an undefined result) compose as before.
const ConvBackend* accelerated(const Tensor& x) {
  const ConvBackend* b = conv_backend(x.device().type);
  const bool on = x.device().type == DeviceType::CPU ? cpu_conv_enabled()
                                                     : backend_flags().cudnn_enabled;
  if (!b || !on || b->version() == 0) return nullptr;
  const DType d = x.dtype();
  const bool floating =
      d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
  return floating ? b : nullptr;
}

// Non-empty and indexable with 32-bit integers, as the libraries' descriptors require.
bool int32_sized(std::initializer_list<Shape> shapes) {
  for (const Shape& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    if (n <= 0 || n > INT32_MAX) return false;
  }
  return true;
}

// Whether t is [N, C, *S] laid out densely as [N, *S, C] but not contiguous (a
// tensor with C == 1 or S == 1 is both and stays NCHW).
bool channels_last(const Tensor& t) {
  // PyTorch's rule: float64 convolutions keep NCHW (cuDNN has few NHWC double kernels).
  return t.dtype() != DType::Float64 && suggest_memory_format(t) != MemoryFormat::Contiguous;
}

// The accelerated node's inputs: x, weight and the bias when there is one.
std::vector<Tensor> node_inputs(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  return b ? std::vector<Tensor>{x, w, *b} : std::vector<Tensor>{x, w};
}

// Adds the bias to a fresh accelerated result, in place, outside autograd (the
// node's backward sums the bias gradient): one pass, and the result keeps its
// layout (an out-of-place add would return it contiguous, not channels_last).
void add_bias_in_place(const Tensor& y, const std::optional<Tensor>& bias) {
  if (!bias) return;
  GradModeGuard no_grad(false);
  Shape s(static_cast<size_t>(y.dim()), 1);
  s[1] = bias->size(0);
  add_(y, reshape(*bias, s), Scalar(1));
}

// The bias gradient: the output gradient summed over the batch and spatial dims.
Tensor bias_grad(const Tensor& g) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < g.dim(); ++d) dims.push_back(d);
  return sum(g, dims);
}

// The library computes on dense operands in the geometry's layout (ConvBackend's contract);
// these lay the operands out and allocate the result, under no_grad, so that no kernel layer
// calls a front end. A 1-d problem is always NCHW (cuDNN runs it as 2-d with H = 1).
bool dense_channels_last(const ConvGeometry& g) { return g.channels_last && g.stride.size() > 1; }

// `t` itself when contiguous and on a 16-byte boundary (a view into the middle of a tensor may
// not be, and cuDNN's vectorized kernels assume it), else a contiguous copy.
Tensor dense(const Tensor& t) {
  if (t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) return t;
  return clone(t);
}

Tensor in_layout(const Tensor& t, bool cl) {
  if (!cl) return dense(t);
  const std::vector<int64_t> order = memory_order(MemoryFormat::ChannelsLast, t.dim());
  return permute(dense(permute(t, order)), inverse_permutation(order));
}

Tensor empty_in_layout(const Shape& sizes, const Tensor& like, bool cl) {
  if (!cl) return empty(sizes, like.dtype(), like.device());
  return empty_in_memory_order(
      sizes, like.dtype(), like.device(),
      memory_order(MemoryFormat::ChannelsLast, static_cast<int64_t>(sizes.size())));
}

// Each pass's result, or an undefined tensor where the library declines the problem.
Tensor accelerated_forward(const ConvBackend& cb, const Tensor& x, const Tensor& w,
                           const ConvGeometry& g, const char* op) {
  GradModeGuard no_grad(false);
  const bool cl = dense_channels_last(g);
  Tensor y = empty_in_layout(conv_output_sizes(x.sizes(), w.sizes(), g), x, cl);
  return cb.forward(y, in_layout(x, cl), in_layout(w, cl), g, op) ? y : Tensor();
}

Tensor accelerated_backward_data(const ConvBackend& cb, const Tensor& grad_output, const Tensor& w,
                                 const Shape& input_sizes, const ConvGeometry& g, const char* op) {
  GradModeGuard no_grad(false);
  const bool cl = dense_channels_last(g);
  Tensor gx = empty_in_layout(input_sizes, w, cl);
  return cb.backward_data(gx, in_layout(grad_output, cl), in_layout(w, cl), g, op) ? gx : Tensor();
}

Tensor accelerated_backward_filter(const ConvBackend& cb, const Tensor& grad_output,
                                   const Tensor& x, const Shape& weight_sizes,
                                   const ConvGeometry& g, const char* op) {
  GradModeGuard no_grad(false);
  const bool cl = dense_channels_last(g);
  Tensor gw = empty_in_layout(weight_sizes, x, cl);
  return cb.backward_filter(gw, in_layout(grad_output, cl), in_layout(x, cl), g, op) ? gw
                                                                                     : Tensor();
}

Tensor accelerated_conv(const ConvBackend& cb, const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias, const Dims& stride, const Dims& lo,
                        const Dims& hi, const Dims& dilation, int64_t groups, const Dims& k,
                        const char* op) {
  const size_t n = k.size();
  Shape y_size = {input.size(0), weight.size(0)};
  for (size_t i = 0; i < n; ++i) {
    const Wide padded = Wide(input.size(2 + static_cast<int64_t>(i))) + lo[i] + hi[i];
    if (padded < Wide(dilation[i]) * (k[i] - 1) + 1) return Tensor();  // the composition says why
    y_size.push_back(windows(padded, k[i], dilation[i], stride[i]));
  }
  if (!int32_sized({input.sizes(), weight.sizes(), y_size})) return Tensor();
  // The libraries pad symmetrically: the extra element of an odd 'same' padding
  // joins the input (differentiably, ahead of the node).
  const bool cl = channels_last(input) || channels_last(weight);
  Tensor x = input;
  if (lo != hi) {
    Dims extra(n);
    for (size_t i = 0; i < n; ++i) extra[i] = hi[i] - lo[i];
    x = pad_spatial(input, Dims(n, 0), extra, 0.0);
  }
  const ConvGeometry geo{stride, lo, dilation, groups, cl};
  Tensor y = accelerated_forward(cb, x, weight, geo, op);
  if (!y.defined()) return y;
  add_bias_in_place(y, bias);
  const std::vector<Tensor> inputs = node_inputs(x, weight, bias);
  if (!needs_grad(inputs)) return y;
  const Dims out(y.sizes().begin() + 2, y.sizes().end());
  record(op, inputs, {y},
         [sx = SavedTensor(x), sw = SavedTensor(weight), cb = &cb, geo, k, out, op](
             const Grads& g, Node& self) -> Grads {
           Tensor xv = sx.unpack(self), wv = sw.unpack(self);
           const bool want_x = self.next_edges[0].valid(), want_w = self.next_edges[1].valid();
           Grads grads;
           if (self.next_edges.size() > 2)
             grads.push_back(self.next_edges[2].valid() ? bias_grad(g[0]) : Tensor());
           const Dims& p = geo.padding;
           if (GradMode::is_enabled()) {
             Grads c = conv_backward(xv, wv, g[0], want_x, want_w, k, out, geo.stride, p, p,
                                     geo.dilation, geo.groups, op);
             grads.insert(grads.begin(), c.begin(), c.end());
             return grads;
           }
           Tensor gx =
               want_x ? accelerated_backward_data(*cb, g[0], wv, xv.sizes(), geo, op) : Tensor();
           Tensor gw =
               want_w ? accelerated_backward_filter(*cb, g[0], xv, wv.sizes(), geo, op) : Tensor();
           if ((want_x && !gx.defined()) || (want_w && !gw.defined())) {
             Grads c = conv_backward(xv, wv, g[0], want_x && !gx.defined(), want_w && !gw.defined(),
                                     k, out, geo.stride, p, p, geo.dilation, geo.groups, op);
             if (!gx.defined()) gx = c[0];
             if (!gw.defined()) gw = c[1];
           }
           grads.insert(grads.begin(), {gx, gw});
           return grads;
         });
  return y;
}

Tensor accelerated_conv_transpose(const ConvBackend& cb, const Tensor& x, const Tensor& weight,
                                  const std::optional<Tensor>& bias, const Dims& stride,
                                  const Dims& padding, const Dims& hi, const Dims& dilation,
                                  int64_t groups, const Dims& k, const Dims& out,
                                  const Dims& blocks, const char* op) {
  const size_t n = k.size();
  Shape y_size = {x.size(0), weight.size(1) * groups};
  for (size_t i = 0; i < n; ++i) {
    // The library sizes the result from the forward conv's formula, which an
    // output_padding of at least the stride (allowed when below the dilation) breaks.
    if (windows(Wide(out[i]) + 2 * Wide(padding[i]), k[i], dilation[i], stride[i]) != blocks[i])
      return Tensor();
    y_size.push_back(out[i]);
  }
  if (!int32_sized({x.sizes(), weight.sizes(), y_size})) return Tensor();
  const ConvGeometry geo{stride, padding, dilation, groups,
                         channels_last(x) || channels_last(weight)};
  Tensor y = accelerated_backward_data(cb, x, weight, y_size, geo, op);
  if (!y.defined()) return y;
  add_bias_in_place(y, bias);
  const std::vector<Tensor> inputs = node_inputs(x, weight, bias);
  if (!needs_grad(inputs)) return y;
  record(op, inputs, {y},
         [sx = SavedTensor(x), sw = SavedTensor(weight), cb = &cb, geo, k, blocks, hi, op](
             const Grads& g, Node& self) -> Grads {
           Tensor xv = sx.unpack(self), wv = sw.unpack(self);
           const bool want_x = self.next_edges[0].valid(), want_w = self.next_edges[1].valid();
           Grads grads;
           if (self.next_edges.size() > 2)
             grads.push_back(self.next_edges[2].valid() ? bias_grad(g[0]) : Tensor());
           auto composed = [&](bool cx, bool cw) {
             return conv_transpose_backward(xv, wv, g[0], cx, cw, k, blocks, geo.stride,
                                            geo.padding, hi, geo.dilation, geo.groups, op);
           };
           if (GradMode::is_enabled()) {
             Grads c = composed(want_x, want_w);
             grads.insert(grads.begin(), c.begin(), c.end());
             return grads;
           }
           // In the conv whose backward-data this op is, g is the input and x the output gradient.
           Tensor gx = want_x ? accelerated_forward(*cb, g[0], wv, geo, op) : Tensor();
           Tensor gw =
               want_w ? accelerated_backward_filter(*cb, xv, g[0], wv.sizes(), geo, op) : Tensor();
           if ((want_x && !gx.defined()) || (want_w && !gw.defined())) {
             Grads c = composed(want_x && !gx.defined(), want_w && !gw.defined());
             if (!gx.defined()) gx = c[0];
             if (!gw.defined()) gw = c[1];
           }
           grads.insert(grads.begin(), {gx, gw});
           return grads;
         });
  return y;
}

// The composition computes NCHW; a channels-last input or weight gets a
// channels-last result, as the cuDNN path (and PyTorch) gives.
Tensor keep_layout(const Tensor& y, const Tensor& x, const Tensor& weight) {
  if (!(channels_last(x) || channels_last(weight))) return y;
  return contiguous(y, y.dim() == 5 ? MemoryFormat::ChannelsLast3d : MemoryFormat::ChannelsLast);
}

Tensor conv_impl(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                 const Dims& stride, const Dims& lo, const Dims& hi, const Dims& dilation,
                 int64_t groups, const char* op) {
  if (auto ac = autocast_args(op, {input, weight, bias ? *bias : Tensor()}))
    return conv_impl((*ac)[0], (*ac)[1], ac->opt(2), stride, lo, hi, dilation, groups, op);
  const size_t n = stride.size();
  Tensor x = input;
  bool unbatched = batchify(x, n, op);
  KILN_CHECK(weight.dim() == static_cast<int64_t>(n) + 2, Runtime, "[", op, "] Expected ", n + 2,
             "D weight, got weight of size ", weight.sizes());
  check_arg(stride, n, "stride", 1, op);
  check_arg(dilation, n, "dilation", 1, op);
  KILN_CHECK(groups > 0, Runtime, "[", op, "] non-positive groups is not supported, got ", groups);
  const int64_t O = weight.size(0);
  KILN_CHECK(O % groups == 0, Runtime, "[", op, "] Given groups=", groups,
             ", expected weight to be divisible by ", groups,
             " at dimension 0, but got weight of shape ", weight.sizes(), " instead");
  KILN_CHECK(x.size(1) == weight.size(1) * groups, Runtime, "[", op, "] Given groups=", groups,
             ", weight of size ", weight.sizes(), ", expected input", x.sizes(), " to have ",
             weight.size(1) * groups, " channels, but got ", x.size(1), " channels instead");
  check_operands(x, weight, bias, O, op);
  Dims k(weight.sizes().begin() + 2, weight.sizes().end()), out;
  if (const ConvBackend* cb = accelerated(x)) {
    Tensor y = accelerated_conv(*cb, x, weight, bias, stride, lo, hi, dilation, groups, k, op);
    if (y.defined()) return unbatched ? squeeze(y, std::vector<int64_t>{0}) : y;
  }
  const int64_t N = x.size(0), G = groups, CK = weight.size(1) * product(k);
  Tensor y;
  {
    // One node below owns the backward (Note [Convolution as GEMM]).
    GradModeGuard no_grad(false);
    Tensor cols = im2col_impl(x, k, dilation, lo, hi, stride, out, op, true);
    y = matmul(reshape(weight, {G, O / G, CK}), reshape(cols, {G, CK, N * product(out)}));
  }
  Shape shape = {N, O};
  shape.insert(shape.end(), out.begin(), out.end());
  y = reshape(from_batch_last(y, N), shape);
  if (needs_grad({x, weight})) {
    record(op, {x, weight}, {y},
           [sx = SavedTensor(x), sw = SavedTensor(weight), k, out, stride, lo, hi, dilation, G, op](
               const Grads& g, Node& self) -> Grads {
             return conv_backward(sx.unpack(self), sw.unpack(self), g[0],
                                  self.next_edges[0].valid(), self.next_edges[1].valid(), k, out,
                                  stride, lo, hi, dilation, G, op);
           });
  }
  y = add_bias(keep_layout(y, x, weight), bias);
  return unbatched ? squeeze(y, std::vector<int64_t>{0}) : y;
}

}  // namespace

Tensor conv_nd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               const Dims& stride, const Dims& padding, const Dims& dilation, int64_t groups,
               const char* op) {
  tracing::OpScope scope("conv_nd");
  check_arg(padding, stride.size(), "padding", 0, op);
  return scope.out(conv_impl(input, weight, bias, stride, padding, padding, dilation, groups, op),
                   input, weight, bias, stride, padding, dilation, groups, op);
}

Tensor conv_nd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
               const Dims& stride, const std::string& padding, const Dims& dilation, int64_t groups,
               const char* op) {
  tracing::OpScope scope("conv_nd_padding_mode");
  const size_t n = stride.size();
  if (padding == "valid")
    return scope.out(conv_impl(input, weight, bias, stride, Dims(n), Dims(n), dilation, groups, op),
                     input, weight, bias, stride, padding, dilation, groups, op);
  KILN_CHECK(padding == "same", Value, "[", op, "] Invalid padding string '", padding,
             "', expected 'same' or 'valid'");
  for (int64_t s : stride)
    KILN_CHECK(s == 1, Value, "[", op,
               "] padding='same' is not supported for strided convolutions, got stride ", stride);
  check_arg(dilation, n, "dilation", 1, op);
  KILN_CHECK(weight.dim() == static_cast<int64_t>(n) + 2, Runtime, "[", op, "] Expected ", n + 2,
             "D weight, got weight of size ", weight.sizes());
  Dims lo(n), hi(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t total = dilation[i] * (weight.size(2 + static_cast<int64_t>(i)) - 1);
    lo[i] = total / 2;
    hi[i] = total - lo[i];
  }
  return scope.out(conv_impl(input, weight, bias, stride, lo, hi, dilation, groups, op), input,
                   weight, bias, stride, padding, dilation, groups, op);
}

Tensor conv_transpose_nd(const Tensor& input, const Tensor& weight,
                         const std::optional<Tensor>& bias, const Dims& stride, const Dims& padding,
                         const Dims& output_padding, int64_t groups, const Dims& dilation,
                         const char* op) {
  if (auto ac = autocast_args(op, {input, weight, bias ? *bias : Tensor()}))
    return conv_transpose_nd((*ac)[0], (*ac)[1], ac->opt(2), stride, padding, output_padding,
                             groups, dilation, op);
  const size_t n = stride.size();
  Tensor x = input;
  bool unbatched = batchify(x, n, op);
  KILN_CHECK(weight.dim() == static_cast<int64_t>(n) + 2, Runtime, "[", op, "] Expected ", n + 2,
             "D weight, got weight of size ", weight.sizes());
  check_arg(stride, n, "stride", 1, op);
  check_arg(dilation, n, "dilation", 1, op);
  check_arg(padding, n, "padding", 0, op);
  check_arg(output_padding, n, "output_padding", 0, op);
  KILN_CHECK(groups > 0, Runtime, "[", op, "] non-positive groups is not supported, got ", groups);
  const int64_t C = x.size(1);
  KILN_CHECK(weight.size(0) == C && C % groups == 0, Runtime, "[", op,
             "] Given transposed=1, weight of size ", weight.sizes(), ", expected input", x.sizes(),
             " to have ", weight.size(0), " channels (divisible by groups=", groups, "), but got ",
             C, " channels instead");
  const int64_t O = weight.size(1) * groups;
  check_operands(x, weight, bias, O, op);
  Dims k(weight.sizes().begin() + 2, weight.sizes().end()), out(n), blocks(n), hi(n);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(output_padding[i] < stride[i] || output_padding[i] < dilation[i], Runtime, "[", op,
               "] output padding must be smaller than either stride or dilation, but got "
               "output_padding ",
               output_padding, ", stride ", stride, ", dilation ", dilation);
    blocks[i] = x.size(2 + static_cast<int64_t>(i));
    const Wide wide_out = Wide(blocks[i] - 1) * stride[i] - 2 * Wide(padding[i]) +
                          Wide(dilation[i]) * (k[i] - 1) + output_padding[i] + 1;
    KILN_CHECK(wide_out <= INT64_MAX, Runtime, "[", op, "] stride ", stride, ", dilation ",
               dilation, " and output_padding ", output_padding,
               " give an output size past int64: Storage size calculation overflowed");
    out[i] = saturate(wide_out);
    KILN_CHECK(out[i] > 0, Runtime, "[", op, "] Given input size ",
               Shape(x.sizes().begin() + 2, x.sizes().end()), ", the calculated output size ", out,
               " is too small");
    hi[i] = padding[i] - output_padding[i];
  }
  if (const ConvBackend* cb = accelerated(x)) {
    Tensor y = accelerated_conv_transpose(*cb, x, weight, bias, stride, padding, hi, dilation,
                                          groups, k, out, blocks, op);
    if (y.defined()) return unbatched ? squeeze(y, std::vector<int64_t>{0}) : y;
  }
  const int64_t N = x.size(0), G = groups, Cg = C / groups, Og = weight.size(1), K = product(k);
  Tensor y;
  {
    GradModeGuard no_grad(false);
    Tensor w = transpose(reshape(weight, {G, Cg, Og * K}), -1, -2);
    Tensor cols = from_batch_last(matmul(w, to_batch_last(x, G)), N);  // [N, O * K, L]
    y = col2im_impl(cols, out, k, dilation, padding, stride, blocks);
  }
  if (needs_grad({x, weight})) {
    record(op, {x, weight}, {y},
           [sx = SavedTensor(x), sw = SavedTensor(weight), k, blocks, stride, padding, hi, dilation,
            G, op](const Grads& g, Node& self) -> Grads {
             return conv_transpose_backward(sx.unpack(self), sw.unpack(self), g[0],
                                            self.next_edges[0].valid(), self.next_edges[1].valid(),
                                            k, blocks, stride, padding, hi, dilation, G, op);
           });
  }
  y = add_bias(keep_layout(y, x, weight), bias);
  return unbatched ? squeeze(y, std::vector<int64_t>{0}) : y;
}

Tensor im2col(const Tensor& input, const Dims& kernel_size, const Dims& dilation,
              const Dims& padding, const Dims& stride) {
  const char* op = "unfold";
  KILN_CHECK(input.dim() == 3 || input.dim() == 4, Runtime,
             "[unfold] Expected 3D or 4D (batch mode) tensor for input, got input of size ",
             input.sizes());
  Tensor x = input.dim() == 3 ? unsqueeze(input, 0) : input;
  check_arg(kernel_size, 2, "kernel_size", 1, op);
  check_arg(dilation, 2, "dilation", 1, op);
  check_arg(padding, 2, "padding", 0, op);
  check_arg(stride, 2, "stride", 1, op);
  Dims out;
  Tensor cols = im2col_impl(x, kernel_size, dilation, padding, padding, stride, out, op);
  return input.dim() == 3 ? squeeze(cols, std::vector<int64_t>{0}) : cols;
}

Tensor col2im(const Tensor& input, const Dims& output_size, const Dims& kernel_size,
              const Dims& dilation, const Dims& padding, const Dims& stride) {
  const char* op = "fold";
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, Runtime,
             "[fold] Expected 2D or 3D (batch mode) tensor for input, got input of size ",
             input.sizes());
  Tensor x = input.dim() == 2 ? unsqueeze(input, 0) : input;
  check_arg(output_size, 2, "output_size", 1, op);
  check_arg(kernel_size, 2, "kernel_size", 1, op);
  check_arg(dilation, 2, "dilation", 1, op);
  check_arg(padding, 2, "padding", 0, op);
  check_arg(stride, 2, "stride", 1, op);
  const int64_t K = product(kernel_size);
  KILN_CHECK(x.size(1) % K == 0, Runtime,
             "[fold] Expected size of input's dimension 1 to be "
             "divisible by the product of kernel_size ",
             kernel_size, ", but got input.size(1)=", x.size(1));
  Dims blocks(2);
  for (size_t i = 0; i < 2; ++i) {
    blocks[i] = windows(Wide(output_size[i]) + 2 * Wide(padding[i]), kernel_size[i], dilation[i],
                        stride[i]);
    KILN_CHECK(blocks[i] > 0, Runtime, "[fold] kernel_size ", kernel_size, " with dilation ",
               dilation, " does not fit output_size ", output_size, " with padding ", padding);
  }
  KILN_CHECK(x.size(2) == product(blocks), Runtime, "[fold] Given output_size=", output_size,
             ", kernel_size=", kernel_size, ", dilation=", dilation, ", padding=", padding,
             ", stride=", stride,
             ", expected size of input's dimension 2 to match the calculated "
             "number of sliding blocks ",
             blocks[0], " * ", blocks[1], " = ", product(blocks),
             ", but got input.size(2)=", x.size(2));
  Tensor y = col2im_impl(x, output_size, kernel_size, dilation, padding, stride, blocks);
  return input.dim() == 2 ? squeeze(y, std::vector<int64_t>{0}) : y;
}

Tensor pad(const Tensor& input, const Dims& pads, const std::string& mode,
           std::optional<double> value) {
  KILN_CHECK(pads.size() % 2 == 0, Runtime, "[pad] Padding length must be divisible by 2, got ",
             pads);
  const int64_t n = static_cast<int64_t>(pads.size()) / 2;
  KILN_CHECK(n <= input.dim(), Runtime, "[pad] Padding length too large: ", pads,
             " pads more dims than the input's ", input.sizes());
  if (mode == "constant") {
    // pad_spatial works on dims 2..; view the input as [1, 1, *dims].
    Shape s = {1, 1};
    s.insert(s.end(), input.sizes().begin(), input.sizes().end());
    Dims lo(static_cast<size_t>(input.dim()), 0), hi = lo;
    for (int64_t i = 0; i < n; ++i) {
      lo[static_cast<size_t>(input.dim() - 1 - i)] = pads[static_cast<size_t>(2 * i)];
      hi[static_cast<size_t>(input.dim() - 1 - i)] = pads[static_cast<size_t>(2 * i + 1)];
      int64_t d = input.dim() - 1 - i, size;
      KILN_CHECK(!add_overflows(input.size(d), pads[static_cast<size_t>(2 * i)], &size) &&
                     !add_overflows(size, pads[static_cast<size_t>(2 * i + 1)], &size),
                 Runtime, "[pad] Storage size calculation overflowed padding dimension ", d,
                 " of input ", input.sizes(), " by ", pads);
      KILN_CHECK(
          size >= 0, Runtime, "[pad] The input size ", input.size(d), ", plus negative padding ",
          pads[static_cast<size_t>(2 * i)], " and ", pads[static_cast<size_t>(2 * i + 1)],
          " resulted in a negative output size at dimension ", d, " of input ", input.sizes());
    }
    Tensor y = pad_spatial(reshape(input, s), lo, hi, value.value_or(0.0));
    return reshape(y, Shape(y.sizes().begin() + 2, y.sizes().end()));
  }
  KILN_CHECK(mode == "reflect" || mode == "replicate" || mode == "circular", NotImplemented,
             "[pad] Unsupported padding mode: ", mode);
  KILN_CHECK(!value || *value == 0.0, Runtime, "[pad] Padding mode \"", mode,
             "\" doesn't take in value argument");
  KILN_CHECK(input.dim() >= n + 1, NotImplemented, "[pad] ", mode, " padding of ", n,
             " dims expects an input with at least ", n + 1, " dims, got ", input.sizes());
  Tensor out = input;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = input.dim() - 1 - i, size = input.size(d);
    int64_t lo = pads[static_cast<size_t>(2 * i)], hi = pads[static_cast<size_t>(2 * i + 1)];
    if (mode == "reflect") {
      KILN_CHECK(lo < size && hi < size, Runtime,
                 "[pad] Padding size should be less than the "
                 "corresponding input dimension, but got: padding (",
                 lo, ", ", hi, ") at dimension ", d, " of input ", input.sizes());
    } else {
      KILN_CHECK(size > 0 || (lo <= 0 && hi <= 0), Runtime, "[pad] ", mode,
                 " padding needs a non-empty dimension ", d, " in input ", input.sizes());
      if (mode == "circular")
        KILN_CHECK(lo <= size && hi <= size, Runtime,
                   "[pad] Padding value causes wrapping "
                   "around more than once: padding (",
                   lo, ", ", hi, ") at dimension ", d, " of input ", input.sizes());
    }
    int64_t len = size + lo + hi;
    KILN_CHECK(len >= 0, Runtime, "[pad] padding (", lo, ", ", hi,
               ") gives a negative size at "
               "dimension ",
               d, " of input ", input.sizes());
    // Note [Circular padding with negative pads]: a negative pad crops first and the
    // positive pads then wrap around what is left (PyTorch copies the wrapped borders from
    // the cropped output), so the period is the cropped length, not the input's.
    const int64_t crop_lo = std::max<int64_t>(-lo, 0);
    const int64_t kept = size - crop_lo - std::max<int64_t>(-hi, 0);
    if (mode == "circular")
      KILN_CHECK(kept > 0 || len == kept, Runtime, "[pad] circular padding (", lo, ", ", hi,
                 ") crops dimension ", d, " of input ", input.sizes(), " to nothing to wrap");
    std::vector<int64_t> idx(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      int64_t p = j - lo;
      if (mode == "reflect") {
        p = p < 0 ? -p : (p >= size ? 2 * (size - 1) - p : p);
      } else if (mode == "replicate") {
        p = std::min(std::max<int64_t>(p, 0), size - 1);
      } else {
        const int64_t q = j - std::max<int64_t>(lo, 0);
        p = crop_lo + ((q % kept) + kept) % kept;
      }
      idx[static_cast<size_t>(j)] = p;
    }
    out = index_select(out, d, index_table(idx, {len}, input.device()));
  }
  return out;
}

}  // namespace kiln
