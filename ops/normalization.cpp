// layer_norm, rms_norm, normalize and cosine_similarity: compositions of
// differentiable kiln ops, so their double backward comes for free. layer_norm and rms_norm
// run through fused kernels where the device has them (Note [Fused nn kernels]).
#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/nn_functional.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// Checks shared by layer_norm and rms_norm; returns the normalized dims.
std::vector<int64_t> norm_dims(const Tensor& input, const Shape& normalized_shape,
                               const std::optional<Tensor>& weight,
                               const std::optional<Tensor>& bias, const char* op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  KILN_CHECK(k >= 1, Runtime, "[", op, "] normalized_shape must have at least one dim");
  bool fits = input.dim() >= k &&
              std::equal(normalized_shape.begin(), normalized_shape.end(), input.sizes().end() - k);
  if (!fits) {
    std::string dims = str_cat(normalized_shape);  // "[a, b]" -> "a, b" to print [*, a, b]
    fail(ErrorKind::Runtime, "[", op, "] Given normalized_shape=", normalized_shape,
         ", expected input with shape [*, ", dims.substr(1, dims.size() - 2),
         "], but got input of size ", input.sizes());
  }
  for (const auto* p : {&weight, &bias}) {
    KILN_CHECK(!*p || (*p)->sizes() == normalized_shape, Runtime, "[", op, "] Expected ",
               p == &weight ? "weight" : "bias", " of shape normalized_shape=", normalized_shape,
               ", but got ", (*p)->sizes());
  }
  KILN_CHECK(is_floating(input.dtype()), Runtime, "[", op,
             "] expected a floating-point input, got ", input.dtype());
  std::vector<int64_t> dims;
  for (int64_t i = input.dim() - k; i < input.dim(); ++i) dims.push_back(i);
  return dims;
}

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

double machine_epsilon(DType t) {
  switch (t) {
    case DType::Float64:
      return 2.220446049250313e-16;
    case DType::Float16:
      return 0.0009765625;
    case DType::BFloat16:
      return 0.0078125;
    default:
      return 1.1920928955078125e-07;
  }
}

// ||x||_p along dims (keepdim), finite p > 0; an all-zero slice gets norm 0
// and gradient 0 (the root's derivative is infinite there).
Tensor p_norm(const Tensor& x, double p, const std::vector<int64_t>& dims) {
  Tensor powered = p == 2.0 ? mul(x, x) : pow(abs(x), Scalar(p));
  Tensor total = sum(powered, dims, true);
  Tensor nonzero = gt(total, Scalar(0));
  Tensor safe = where(nonzero, total, ones_like(total));
  Tensor root = p == 2.0 ? sqrt(safe) : pow(safe, Scalar(1.0 / p));
  return where(nonzero, root, zeros_like(root));
}

// Whether an optional weight / bias can go to the fused kernels with `input` (same dtype and
// device); otherwise the composite handles promotion and raises device errors.
bool fused_operand(const std::optional<Tensor>& t, const Tensor& input) {
  return !t || (t->dtype() == input.dtype() && t->device() == input.device());
}

// Gradients of layer_norm (rms: rms_norm) with differentiable ops (for create_graph). Returns
// grads for input, weight and bias in full input shape; the engine sums them down.
std::vector<Tensor> layer_norm_backward_composite(const Tensor& g, const Tensor& input,
                                                  const Tensor& weight,
                                                  const std::vector<int64_t>& dims, double eps,
                                                  bool rms) {
  Tensor x = is_half(input.dtype()) ? to_dtype(input, DType::Float32) : input;
  Tensor gf = to_dtype(g, x.dtype());
  Tensor centered = rms ? x : sub(x, mean(x, dims, true));
  Tensor rstd = rsqrt(add(mean(mul(centered, centered), dims, true), Scalar(eps)));
  Tensor xhat = mul(centered, rstd);
  Tensor gy = weight.defined() ? mul(gf, weight) : gf;
  Tensor centered_gy = rms ? gy : sub(gy, mean(gy, dims, true));
  Tensor gx = mul(rstd, sub(centered_gy, mul(xhat, mean(mul(gy, xhat), dims, true))));
  return {gx, mul(gf, xhat), gf};
}

// layer_norm (rms: rms_norm, no bias) through the fused kernels; weight and bias (if defined)
// have input's dtype.
Tensor layer_norm_fused(const Tensor& input, const std::vector<int64_t>& dims, const Tensor& weight,
                        const Tensor& bias, double eps, bool rms) {
  const Backend& be = backend(input.device());
  int64_t cols = 1;
  for (int64_t d : dims) cols *= input.size(d);
  const int64_t rows = input.numel() / cols;
  const DType stat_dtype = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor x, w, b, y, mean_t, rstd_t;
  {
    GradModeGuard no_grad(false);
    x = contiguous(reshape(input, {rows, cols}));
    if (weight.defined()) w = contiguous(reshape(weight, {cols}));
    if (bias.defined()) b = contiguous(reshape(bias, {cols}));
    Tensor out = make_tensor({rows, cols}, input.dtype(), input.device());
    if (!rms) mean_t = make_tensor({rows}, stat_dtype, input.device());
    rstd_t = make_tensor({rows}, stat_dtype, input.device());
    be.layer_norm_forward(out, mean_t, rstd_t, x, w, b, eps);
    y = reshape(out, input.sizes());
  }
  std::vector<Tensor> inputs{input};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  if (needs_grad(inputs)) {
    const bool has_w = weight.defined(), has_b = bias.defined();
    // The fused backward skips the gradients nobody wants (the column sums cost a pass).
    const bool want_x = input.requires_grad(), want_w = has_w && weight.requires_grad(),
               want_b = has_b && bias.requires_grad();
    record(rms ? "rms_norm" : "layer_norm", inputs, {y},
           [sx = SavedTensor(input), sw = has_w ? SavedTensor(weight) : SavedTensor(), mean_t,
            rstd_t, dims, eps, rms, has_w, has_b, want_x, want_w, want_b, rows,
            cols](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
             Tensor in = sx.unpack(), wv = has_w ? sw.unpack() : Tensor();
             std::vector<Tensor> grads;
             if (GradMode::is_enabled()) {
               grads = layer_norm_backward_composite(g[0], in, wv, dims, eps, rms);
             } else {
               const Device dev = in.device();
               Tensor go = contiguous(reshape(to_dtype(g[0], in.dtype()), {rows, cols}));
               Tensor gi = want_x ? make_tensor({rows, cols}, in.dtype(), dev) : Tensor();
               Tensor gw = want_w ? make_tensor({cols}, in.dtype(), dev) : Tensor();
               Tensor gb = want_b ? make_tensor({cols}, in.dtype(), dev) : Tensor();
               require_kernel(backend(dev).layer_norm_backward, "layer_norm_backward", dev)(
                   gi, gw, gb, go, contiguous(reshape(in, {rows, cols})), mean_t, rstd_t,
                   has_w ? contiguous(reshape(wv, {cols})) : Tensor());
               const Shape wshape(in.sizes().end() - dims.size(), in.sizes().end());
               grads = {want_x ? reshape(gi, in.sizes()) : gi, want_w ? reshape(gw, wshape) : gw,
                        want_b ? reshape(gb, wshape) : gb};
             }
             std::vector<Tensor> result{grads[0]};
             if (has_w) result.push_back(grads[1]);
             if (has_b) result.push_back(grads[2]);
             return result;
           });
  }
  return y;
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps) {
  tracing::OpScope scope("layer_norm");
  if (auto ac = autocast_args("layer_norm", {input, opt_arg(weight), opt_arg(bias)}))
    return scope.out(layer_norm((*ac)[0], normalized_shape, ac->opt(1), ac->opt(2), eps), input,
                     normalized_shape, weight, bias, eps);
  std::vector<int64_t> dims = norm_dims(input, normalized_shape, weight, bias, "layer_norm");
  if (input.numel() > 0 && backend(input.device()).layer_norm_forward &&
      fused_operand(weight, input) && fused_operand(bias, input))
    return scope.out(layer_norm_fused(input, dims, weight ? *weight : Tensor(),
                                      bias ? *bias : Tensor(), eps, false),
                     input, normalized_shape, weight, bias, eps);
  // Half inputs normalize in float32: their variance loses too many bits otherwise.
  Tensor x = is_half(input.dtype()) ? to_dtype(input, DType::Float32) : input;
  Tensor centered = sub(x, mean(x, dims, true));
  Tensor var = mean(mul(centered, centered), dims, true);
  Tensor y = to_dtype(mul(centered, rsqrt(add(var, Scalar(eps)))), input.dtype());
  if (weight) y = mul(y, *weight);
  if (bias) y = add(y, *bias);
  return scope.out(y, input, normalized_shape, weight, bias, eps);
}

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape,
                const std::optional<Tensor>& weight, std::optional<double> eps) {
  tracing::OpScope scope("rms_norm");
  // Not on the autocast lists (PyTorch 2.11 keeps rms_norm in its input's
  // dtype under CUDA autocast), and its inner ops must not autocast either;
  // half inputs still compute in float32 inside.
  AutocastSuspend keep_input_dtype;
  std::vector<int64_t> dims = norm_dims(input, normalized_shape, weight, std::nullopt, "rms_norm");
  const double e = eps ? *eps : machine_epsilon(input.dtype());
  if (input.numel() > 0 && backend(input.device()).layer_norm_forward &&
      fused_operand(weight, input))
    return scope.out(layer_norm_fused(input, dims, weight ? *weight : Tensor(), Tensor(), e, true),
                     input, normalized_shape, weight, eps);
  Tensor x = is_half(input.dtype()) ? to_dtype(input, DType::Float32) : input;
  Tensor y = to_dtype(mul(x, rsqrt(add(mean(mul(x, x), dims, true), Scalar(e)))), input.dtype());
  return scope.out(weight ? mul(y, *weight) : y, input, normalized_shape, weight, eps);
}

Tensor normalize(const Tensor& input, double p, int64_t dim, double eps) {
  if (auto ac = autocast_args("normalize", {input})) return normalize((*ac)[0], p, dim, eps);
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[normalize] expected a floating-point input, got ", input.dtype());
  std::vector<int64_t> dims{wrap_dim(dim, std::max<int64_t>(input.dim(), 1), "normalize")};
  Tensor x = input.dim() == 0 ? reshape(input, {1}) : input;
  // p = 0 (the count of nonzeros), +-inf and negative p are Tensor.norm's, as in PyTorch.
  Tensor norm = p > 0 && std::isfinite(p)
                    ? p_norm(x, p, dims)
                    : vector_norm(x, p, dims, true, std::nullopt, "normalize");
  Tensor y = div(x, clamp(norm, Scalar(eps), std::nullopt));
  return input.dim() == 0 ? reshape(y, {}) : y;
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  if (auto ac = autocast_args("cosine_similarity", {x1, x2}))
    return cosine_similarity((*ac)[0], (*ac)[1], dim, eps);
  KILN_CHECK(is_floating(x1.dtype()) && is_floating(x2.dtype()), Runtime,
             "[cosine_similarity] expected floating-point inputs, got ", x1.dtype(), " and ",
             x2.dtype());
  Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), "cosine_similarity");
  KILN_CHECK(!shape.empty(), Runtime, "[cosine_similarity] inputs must have at least one dim");
  std::vector<int64_t> dims{wrap_dim(dim, static_cast<int64_t>(shape.size()), "cosine_similarity")};
  // Each side is scaled to unit norm first (norms clamped at eps), which keeps
  // the product of two large norms from overflowing.
  Tensor a = expand(x1, shape), b = expand(x2, shape);
  Tensor unit_a = div(a, clamp(p_norm(a, 2.0, dims), Scalar(eps), std::nullopt));
  Tensor unit_b = div(b, clamp(p_norm(b, 2.0, dims), Scalar(eps), std::nullopt));
  return sum(mul(unit_a, unit_b), dims);
}

}  // namespace kiln
