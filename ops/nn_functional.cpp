#include "ops/nn_functional.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/determinism.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/linalg.h"
#include "ops/linear_backend.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// Gradient of softmax (log_softmax) over dim d from its output y, written with
// differentiable ops so create_graph works.
Tensor softmax_backward_composite(const Tensor& g, const Tensor& y, int64_t d, bool log) {
  std::vector<int64_t> dims{d};
  if (log) return sub(g, mul(exp(y), sum(g, dims, true)));
  Tensor gy = mul(g, y);
  return sub(gy, mul(y, sum(gy, dims, true)));
}

// Forward values of softmax / log_softmax over `dim` (no autograd).
Tensor softmax_values(const Tensor& x, int64_t dim, bool log, const char* op) {
  GradModeGuard no_grad(false);
  if (x.numel() == 0) return empty(x.sizes(), x.dtype(), x.device());
  Tensor xf = is_half(x.dtype()) ? to_dtype(x, DType::Float32) : x;
  std::vector<int64_t> dims{dim};
  Tensor shifted = sub(xf, reduce_compute(ReduceOp::Max, xf, dims, true, xf.dtype(), op));
  Tensor e = exp(shifted);
  Tensor s = sum(e, dims, true);
  Tensor y = log ? sub(shifted, kiln::log(s)) : div(e, s);
  return to_dtype(y, x.dtype());
}

// The input's dim `d` as the last dim of a contiguous [rows, cols] tensor.
Tensor rows_last(const Tensor& x, int64_t d) {
  Tensor moved = contiguous(d == x.dim() - 1 ? x : movedim(x, d, -1));
  const int64_t cols = moved.size(-1);
  return reshape(moved, {moved.numel() / cols, cols});
}

// Inverse of rows_last: [rows, cols] back to `shape` with the last dim at `d`, contiguous.
Tensor rows_back(const Tensor& rows, const Shape& shape, int64_t d) {
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (d == last) return reshape(rows, shape);
  Shape moved = shape;
  moved.erase(moved.begin() + d);
  moved.push_back(shape[d]);
  return contiguous(movedim(reshape(rows, moved), -1, d));
}

// Softmax through the fused kernels (Note [Fused nn kernels]); x is non-empty, d wrapped.
Tensor softmax_fused(const Tensor& x, int64_t d, bool log, const char* op) {
  const Backend& be = backend(x.device());
  Tensor y;
  {
    GradModeGuard no_grad(false);
    Tensor in = rows_last(x, d);
    Tensor out = make_tensor(in.sizes(), in.dtype(), in.device());
    be.softmax_lastdim(out, in, log);
    y = rows_back(out, x.sizes(), d);
  }
  if (needs_grad({x})) {
    record(op, {x}, {y},
           [d, log, sy = SavedTensor::output(y, 0)](const Grads& g, Node& self) -> Grads {
             Tensor yv = sy.unpack(self);
             if (GradMode::is_enabled()) return {softmax_backward_composite(g[0], yv, d, log)};
             Tensor go = rows_last(to_dtype(g[0], yv.dtype()), d), yr = rows_last(yv, d);
             Tensor gi = make_tensor(yr.sizes(), yr.dtype(), yr.device());
             const Backend& b = backend(yr.device());
             require_kernel(b.softmax_backward_lastdim, "softmax_backward", yr.device())(gi, go, yr,
                                                                                         log);
             return {rows_back(gi, yv.sizes(), d)};
           });
  }
  return y;
}

Tensor softmax_impl(const Tensor& input, int64_t dim, std::optional<DType> dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  Tensor x = dtype ? to_dtype(input, *dtype) : input;
  KILN_CHECK(is_floating(x.dtype()), NotImplemented, "[", op, "] not implemented for ", x.dtype(),
             " input (pass a floating dtype=)");
  if (x.dim() == 0) {
    wrap_dim(dim, 1, op);
    return reshape(softmax_impl(reshape(x, {1}), 0, std::nullopt, log), {});
  }
  const int64_t d = wrap_dim(dim, x.dim(), op);
  if (x.numel() > 0 && backend(x.device()).softmax_lastdim) return softmax_fused(x, d, log, op);
  Tensor y = softmax_values(x, d, log, op);
  if (needs_grad({x})) {
    record(op, {x}, {y},
           [d, log, sy = SavedTensor::output(y, 0)](const Grads& g, Node& self) -> Grads {
             return {softmax_backward_composite(g[0], sy.unpack(self), d, log)};
           });
  }
  return y;
}

// Host copy (contiguous int64 on the CPU) of an index tensor.
Tensor host_int64(const Tensor& index) {
  GradModeGuard no_grad(false);
  return contiguous(to_dtype(to_device(index, Device()), DType::Int64));
}

// `index` (int32 or int64) as a contiguous 1-D int64 tensor on its device whose entries are
// in [0, n) or `allowed`. On the host an entry outside raises IndexError now, worded by
// `style`; on a GPU the index_check kernel replaces it by `invalid` and records it (Note
// [Deferred index errors] in ops/index.cpp).
Tensor checked_rows(const Tensor& index, int64_t n, const char* op, IndexErrorStyle style,
                    std::optional<int64_t> allowed, int64_t invalid) {
  GradModeGuard no_grad(false);
  Tensor flat = reshape(detach(index), {index.numel()});
  const Device dev = index.device();
  if (dev.is_cuda()) {
    IndexCheck check;
    check.op = op;
    check.style = style;
    check.size = n;
    check.has_allowed = allowed.has_value();
    check.allowed = allowed.value_or(0);
    check.invalid = invalid;
    Tensor out = make_tensor({flat.numel()}, DType::Int64, dev);
    if (out.numel() > 0)
      require_kernel(backend(dev).index_check, op, dev)(out, contiguous(flat), check);
    return out;
  }
  Tensor h = contiguous(to_dtype(flat, DType::Int64));
  const int64_t* p = h.data<int64_t>();
  for (int64_t i = 0, count = h.numel(); i < count; ++i) {
    if ((p[i] < 0 || p[i] >= n) && !(allowed && p[i] == *allowed))
      fail(ErrorKind::Index, index_error_message(op, style, p[i], n, 0));
  }
  return h;
}

Tensor row_gather_compute(const Tensor& src, const Tensor& index) {
  Tensor s = contiguous(src);
  Tensor out = make_tensor({index.numel(), s.size(1)}, s.dtype(), s.device());
  require_kernel(backend(s.device()).row_gather, "row_gather", s.device())(out, s, index);
  return out;
}

Tensor row_scatter_add_compute(const Tensor& src, const Tensor& index, int64_t rows) {
  Tensor s = contiguous(src);
  Tensor out = zeros({rows, s.size(1)}, s.dtype(), s.device());
  require_kernel(backend(s.device()).row_scatter_add, "row_scatter_add", s.device())(out, s, index);
  return out;
}

}  // namespace

int64_t implicit_softmax_dim(int64_t ndim) { return ndim == 0 || ndim == 1 || ndim == 3 ? 0 : 1; }

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  tracing::OpScope scope("softmax");
  if (!dtype)
    if (auto ac = autocast_args("softmax", {x}))
      return scope.out(softmax((*ac)[0], dim), x, dim, dtype);
  return scope.out(softmax_impl(x, dim, dtype, false), x, dim, dtype);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  tracing::OpScope scope("log_softmax");
  if (!dtype)
    if (auto ac = autocast_args("log_softmax", {x}))
      return scope.out(log_softmax((*ac)[0], dim), x, dim, dtype);
  return scope.out(softmax_impl(x, dim, dtype, true), x, dim, dtype);
}

Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  // Passing dtype on keeps an explicit dtype= winning over autocast in the inner softmax.
  return softmax(neg(dtype ? to_dtype(x, *dtype) : x), dim, dtype);
}

Tensor class_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const char* op) {
  return checked_rows(target, classes, op, IndexErrorStyle::Classes, ignore_index, ignore_index);
}

Tensor gather_rows(const Tensor& src, const Tensor& index) {
  Tensor out = row_gather_compute(src, index);
  if (needs_grad({src})) {
    const int64_t rows = src.size(0);
    record("gather_rows", {src}, {out}, [index, rows](const Grads& g, Node&) -> Grads {
      return {scatter_add_rows(g[0], index, rows)};
    });
  }
  return out;
}

Tensor scatter_add_rows(const Tensor& src, const Tensor& index, int64_t rows) {
  Tensor out = row_scatter_add_compute(src, index, rows);
  if (needs_grad({src})) {
    record("scatter_add_rows", {src}, {out},
           [index](const Grads& g, Node&) -> Grads { return {gather_rows(g[0], index)}; });
  }
  return out;
}

// Note [Fused linear]
// PyTorch's linear is addmm: one cuBLASLt GEMM whose epilogue adds the bias. Composed as
// matmul then add, the bias costs a second kernel that reads and writes the whole output
// again. The device's LinearBackend (ops/linear_backend.h) does both in one call
// (cuda/blas_lt.cpp; Eigen on the CPU), and its weight-gradient entry folds the bias gradient,
// the column sums of the output gradient, into the weight gradient's GEMM (cuBLASLt's BGRADB
// epilogue), so the backward is two GEMMs and nothing else. One autograd node "linear" holds
// it all and computes only the gradients whose edges are live.
//
// What falls back to matmul + add, the composite that defines the semantics: 1-D input or
// weight, empty operands, mixed dtypes or devices (its errors are the ones users see), a bias
// that is not a contiguous [out_features], a device without a LinearBackend, operands the
// device's library declines (cuBLASLt wants 16-byte aligned pointers and leading dims, and
// kiln sends it no float64). An input whose rows do not fold into a matrix without a copy is
// copied first, as matmul would. A backward that is itself recorded (create_graph=True) is
// written with mm and sum, so it can be differentiated again.

namespace {

Tensor linear_composite(const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias) {
  Tensor out = matmul(input, t(weight));
  return bias ? add(out, *bias) : out;
}

// The fused path takes these operands (Note [Fused linear]).
bool fusable_linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (input.dim() < 2 || weight.dim() != 2 || input.numel() == 0 || weight.numel() == 0)
    return false;
  if (!is_floating(input.dtype()) || weight.dtype() != input.dtype() ||
      weight.device() != input.device() || !linear_backend(input.device().type))
    return false;
  if (!bias) return true;
  return bias->dim() == 1 && bias->size(0) == weight.size(0) && bias->is_contiguous() &&
         bias->dtype() == input.dtype() && bias->device() == input.device();
}

// x as the [rows, in_features] matrix a GEMM reads: a view when x's rows fold without a copy
// (any contiguous x, or a 2-D one with a unit stride in either dim), else a contiguous copy.
// Recorded like any reshape when grad mode is on, so the backward can differentiate through it.
Tensor linear_rows(const Tensor& x) {
  const int64_t k = x.size(-1);
  if (x.dim() == 2) {
    const int64_t s0 = x.stride(0), s1 = x.stride(1);
    if ((s1 == 1 && s0 >= k && s0 > 0) || (s0 == 1 && s1 >= x.size(0) && s1 > 0)) return x;
  }
  return reshape(contiguous(x), {x.numel() / k, k});
}

struct LinearGradArgs {
  Shape input_shape;
  DType dtype;
  int64_t n, k;
  bool has_bias;
  // The weight is a transposed view (stored column by column): its gradient is made in that
  // layout too, so the view's own backward hands its base a contiguous one, as bmm does.
  bool weight_transposed;
  bool want[3];  // by edge: input, weight, bias
};

// The gradients linear_fused's node is asked for, from the output's gradient: x (the input,
// needed for the weight's) and w (needed for the input's) are defined where needed.
Grads linear_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                      const LinearGradArgs& a) {
  const Tensor g = reshape(grad, {grad.numel() / a.n, a.n});
  const bool both = a.want[1] && a.want[2];
  Tensor gi, gw, gb;
  if (a.want[0]) gi = reshape(mm(g, w), a.input_shape);
  bool fused = false;  // the weight's GEMM has computed the bias's gradient too
  if (a.want[1]) {
    const Tensor rows = linear_rows(x);
    bool done = false;
    if (!GradMode::is_enabled()) {
      const Tensor grows = linear_rows(g);
      const LinearBackend* kernels = linear_backend(g.device().type);
      if (a.weight_transposed) {
        // gw^T = rows^T @ g is the same GEMM with the operands' roles swapped; the bias's
        // gradient is then summed apart.
        Tensor gwt = make_tensor({a.k, a.n}, g.dtype(), g.device());
        done = kernels->weight_grad(gwt, Tensor(), rows, grows);
        gw = t(gwt);
      } else {
        gw = make_tensor({a.n, a.k}, g.dtype(), g.device());
        if (both) gb = make_tensor({a.n}, g.dtype(), g.device());
        done = fused = kernels->weight_grad(gw, gb, grows, rows);
      }
    }
    if (!done) gw = a.weight_transposed ? t(mm(t(rows), g)) : mm(t(g), rows);
  }
  if (a.want[2] && !fused) gb = sum(g, std::vector<int64_t>{0});
  Grads grads{gi, gw};
  if (a.has_bias) grads.push_back(gb);
  return grads;
}

// linear as one kernel call and one autograd node (Note [Fused linear]); an undefined result
// when the backend declines the operands.
Tensor linear_fused(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  const int64_t n = weight.size(0);
  Shape out_shape(input.sizes().begin(), input.sizes().end() - 1);
  out_shape.push_back(n);
  Tensor out = make_tensor(out_shape, input.dtype(), input.device());
  {
    GradModeGuard no_grad(false);
    const Tensor rows = linear_rows(input);
    const LinearBackend* kernels = linear_backend(input.device().type);
    if (!kernels->forward(reshape(out, {rows.size(0), n}), rows, weight, bias ? *bias : Tensor()))
      return Tensor();
  }
  std::vector<Tensor> inputs{input, weight};
  if (bias) inputs.push_back(*bias);
  if (needs_grad(inputs)) {
    // Each operand is kept only for the gradient that reads it.
    SavedTensor sx = weight.requires_grad() ? SavedTensor(input) : SavedTensor();
    SavedTensor sw = input.requires_grad() ? SavedTensor(weight) : SavedTensor();
    const bool weight_transposed =
        weight.size(0) > 1 && weight.size(1) > 1 && weight.stride(0) == 1 && weight.stride(1) != 1;
    const LinearGradArgs args{input.sizes(),    input.dtype(),     n, weight.size(1),
                              bias.has_value(), weight_transposed, {}};
    record("linear", inputs, {out}, [sx, sw, args](const Grads& g, Node& self) -> Grads {
      LinearGradArgs live = args;
      for (size_t i = 0; i < self.next_edges.size(); ++i) live.want[i] = self.next_edges[i].valid();
      return linear_backward(to_dtype(g[0], live.dtype), sx.defined() ? sx.unpack() : Tensor(),
                             sw.defined() ? sw.unpack() : Tensor(), live);
    });
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  tracing::OpScope scope("linear");
  if (auto ac = autocast_args("linear", {input, weight, opt_arg(bias)}))
    return scope.out(linear((*ac)[0], (*ac)[1], ac->opt(2)), input, weight, bias);
  KILN_CHECK(weight.dim() == 1 || weight.dim() == 2, Runtime,
             "[linear] weight must be 1-D or 2-D [out_features, in_features], got shape ",
             weight.sizes());
  KILN_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(-1), Runtime,
             "[linear] input's last dim must equal weight's in_features: input ", input.sizes(),
             ", weight ", weight.sizes());
  if (fusable_linear(input, weight, bias)) {
    Tensor out = linear_fused(input, weight, bias);
    if (out.defined()) return scope.out(out, input, weight, bias);
  }
  return scope.out(linear_composite(input, weight, bias), input, weight, bias);
}

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx,
                 bool scale_grad_by_freq) {
  tracing::OpScope scope("embedding");
  KILN_CHECK(input.dtype() == DType::Int64 || input.dtype() == DType::Int32, Runtime,
             "[embedding] indices must be int64 or int32, got ", input.dtype());
  KILN_CHECK(weight.dim() == 2, Runtime, "[embedding] weight must be 2-D, got shape ",
             weight.sizes());
  const int64_t rows = weight.size(0), width = weight.size(1);
  if (padding_idx) {
    KILN_CHECK(*padding_idx >= -rows && *padding_idx < rows, Value, "[embedding] padding_idx ",
               *padding_idx, " must be within num_embeddings (", rows, ")");
    if (*padding_idx < 0) *padding_idx += rows;
  }
  // A bad index becomes -1 on a GPU: a zero row forward, no gradient backward.
  Tensor index = checked_rows(input, rows, "embedding", IndexErrorStyle::Rows, std::nullopt, -1);
  if (index.device() != weight.device()) {
    GradModeGuard no_grad(false);
    index = to_device(index, weight.device());
  }
  Shape out_shape = input.sizes();
  out_shape.push_back(width);
  Tensor out = reshape(row_gather_compute(weight, index), out_shape);
  if (needs_grad({weight})) {
    record("embedding", {weight}, {out},
           [index, rows, width, padding_idx, scale_grad_by_freq](const Grads& g, Node&) -> Grads {
             // Repeated indices are the norm here, and CUDA sums their rows with float
             // atomics in arrival order. (nll_loss's gather_rows indices are distinct, so
             // scatter_add_rows itself does not alert.)
             if (g[0].device().is_cuda() && !is_integral(g[0].dtype(), true))
               alert_not_deterministic("embedding_backward", g[0].device());
             Tensor rows_grad = reshape(g[0], {index.numel(), width});
             if (padding_idx) {
               Tensor keep = to_dtype(ne(index, Scalar(*padding_idx)), rows_grad.dtype());
               rows_grad = mul(rows_grad, unsqueeze(keep, 1));
             }
             if (scale_grad_by_freq) {
               GradModeGuard no_grad(false);
               Tensor ones_col = ones({index.numel(), 1}, rows_grad.dtype(), rows_grad.device());
               Tensor freq =
                   row_gather_compute(row_scatter_add_compute(ones_col, index, rows), index);
               rows_grad = div(rows_grad, freq);
             }
             return {scatter_add_rows(rows_grad, index, rows)};
           });
  }
  return scope.out(out, input, weight, padding_idx, scale_grad_by_freq);
}

Tensor one_hot(const Tensor& input, int64_t num_classes) {
  KILN_CHECK(input.dtype() == DType::Int64, Runtime,
             "[one_hot] one_hot is only applicable to index tensor of type int64, got ",
             input.dtype());
  KILN_CHECK(num_classes >= -1, Runtime, "[one_hot] num_classes must be -1 or non-negative, got ",
             num_classes);
  if (input.numel() > 0) {
    Tensor h = host_int64(input);
    const int64_t* p = h.data<int64_t>();
    auto [lo, hi] = std::minmax_element(p, p + h.numel());
    KILN_CHECK(*lo >= 0, Runtime, "[one_hot] Class values must be non-negative, got ", *lo);
    if (num_classes == -1) num_classes = *hi + 1;
    KILN_CHECK(*hi < num_classes, Runtime, "[one_hot] Class values must be smaller than ",
               "num_classes (", num_classes, "), got ", *hi);
  } else {
    KILN_CHECK(num_classes != -1, Runtime,
               "[one_hot] Can not infer total number of classes from empty tensor of shape ",
               input.sizes());
  }
  Tensor classes = arange(0, num_classes, 1, DType::Int64, input.device());
  return to_dtype(eq(unsqueeze(input, -1), classes), DType::Int64);
}

Tensor logsigmoid(const Tensor& x) {
  AutocastSuspend keep_dtypes;  // built from table ops, but keeps its input dtype like PyTorch's
  Tensor out;
  {
    GradModeGuard no_grad(false);
    // -softplus(-x) = min(x, 0) - log1p(exp(-|x|)) never overflows exp.
    out = sub(neg(relu(neg(x))), log1p(exp(neg(abs(x)))));
  }
  if (needs_grad({x})) {
    record("logsigmoid", {x}, {out}, [sx = SavedTensor(x)](const Grads& g, Node&) -> Grads {
      return {mul(g[0], sigmoid(neg(sx.unpack())))};
    });
  }
  return out;
}

Tensor softsign(const Tensor& x) { return div(x, add(abs(x), Scalar(1))); }

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  KILN_CHECK(min_val <= max_val, Value, "[hardtanh] min_val (", min_val,
             ") cannot be greater than max_val (", max_val, ")");
  return clamp(x, Scalar(min_val), Scalar(max_val));
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

Tensor hardsigmoid(const Tensor& x) { return div(relu6(add(x, Scalar(3))), Scalar(6)); }

Tensor hardswish(const Tensor& x) { return mul(x, hardsigmoid(x)); }

Tensor mish(const Tensor& x) {
  AutocastSuspend keep_dtypes;  // built from table ops, but keeps its input dtype like PyTorch's
  return mul(x, tanh(softplus(x)));
}

Tensor glu(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.dim() > 0, Runtime,
             "[glu] glu does not support scalars because halving size must be even");
  const int64_t d = wrap_dim(dim, x.dim(), "glu");
  const int64_t half = x.size(d) / 2;
  KILN_CHECK(x.size(d) % 2 == 0, Runtime, "[glu] Halving dimension must be even, but dimension ", d,
             " is size ", x.size(d), " (input ", x.sizes(), ")");
  return mul(narrow(x, d, 0, half), sigmoid(narrow(x, d, half, half)));
}

const Tensor& activation_inplace(const Tensor& x, const char* op,
                                 const std::function<Tensor(const Tensor&)>& fn) {
  return assign_inplace(x, {}, op, fn);
}

const Tensor& hardtanh_(const Tensor& x, double min_val, double max_val) {
  KILN_CHECK(min_val <= max_val, Value, "[hardtanh_] min_val (", min_val,
             ") cannot be greater than max_val (", max_val, ")");
  UnaryParams p;
  p.a = min_val;
  p.b = max_val;
  p.has_a = p.has_b = true;
  return unary_(UnaryOp::clamp, x, p);
}

}  // namespace kiln
