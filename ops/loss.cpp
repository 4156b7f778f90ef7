// Loss functions of kiln.nn.functional, written as compositions of
// differentiable kiln ops (binary_cross_entropy has its own backward, see there;
// cross_entropy with class targets uses fused kernels where the device has them,
// Note [Fused nn kernels]).
#include <vector>

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/nn_functional.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

Tensor apply_reduction(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::Mean:
      return mean(loss);
    case Reduction::Sum:
      return sum(loss);
    case Reduction::None:
      break;
  }
  return loss;
}

Tensor zero_like_scalar(const Tensor& t) {
  return scalar_tensor(Scalar(0.0), t.dtype(), t.device());
}

// Per-target terms of nll_loss, flattened to [M] (M = number of targets):
// loss[i] = -weight[t_i] * input[i, t_i] and the weight itself, both 0 where
// t_i == ignore_index.
struct NllTerms {
  Tensor loss;
  Tensor weight;
  Tensor valid;  // bool [M]: target != ignore_index
};

// Shapes, dtypes and devices of nll_loss / cross_entropy with class targets (the targets'
// values are checked where they are used: class_targets, or the fused kernels).
void check_nll_args(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                    int64_t ignore_index, const char* op) {
  KILN_CHECK(input.dim() >= 1, Value, "[", op, "] Expected 1 or more dimensions (got 0)");
  KILN_CHECK(is_floating(input.dtype()), Runtime, "[", op,
             "] expected a floating-point input, got ", input.dtype());
  KILN_CHECK(target.dtype() == DType::Int64, Runtime, "[", op,
             "] expected target of dtype int64 (class indices), got ", target.dtype());
  if (input.dim() == 1) {
    KILN_CHECK(target.dim() == 0, Runtime, "[", op, "] unbatched input of shape ", input.sizes(),
               " expects a 0-D target, got shape ", target.sizes());
  } else {
    KILN_CHECK(target.dim() >= 1 && input.size(0) == target.size(0), Value, "[", op,
               "] Expected input batch_size (", input.size(0), ") to match target batch_size (",
               target.dim() >= 1 ? target.size(0) : 0, "): input ", input.sizes(), ", target ",
               target.sizes());
    Shape expected = input.sizes();
    expected.erase(expected.begin() + 1);
    KILN_CHECK(target.sizes() == expected, Runtime, "[", op, "] Expected target size ", expected,
               ", got ", target.sizes(), " (input ", input.sizes(), ")");
  }
  const int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  KILN_CHECK(!weight || (weight->dim() == 1 && weight->numel() == classes), Runtime, "[", op,
             "] weight tensor should be defined either for all ", classes,
             " classes or no classes but got weight tensor of shape: ", weight->sizes());
  KILN_CHECK(target.device() == input.device() && (!weight || weight->device() == input.device()),
             Runtime, "[", op, "] expected all tensors on one device: input on ", input.device(),
             ", target on ", target.device(), weight ? ", weight on " : "",
             weight ? str_cat(weight->device()) : std::string());
}

// Per-target weight [m] of input's dtype: weight[t] (or 1), 0 where t == ignore_index.
// `t` is the flat [m] target; also returns the valid mask and the targets with ignored
// ones replaced by class 0 (safe to index with).
struct RowWeights {
  Tensor weight, valid, safe_target;
};

RowWeights row_weights(const Tensor& t, const std::optional<Tensor>& weight, int64_t ignore_index,
                       int64_t classes, DType dtype) {
  Tensor valid = ne(t, Scalar(ignore_index));
  Tensor safe_t = contiguous(mul(t, to_dtype(valid, DType::Int64)));
  Tensor w = to_dtype(valid, dtype);
  if (weight) w = mul(w, reshape(gather_rows(reshape(*weight, {classes, 1}), safe_t), {t.numel()}));
  return {w, valid, safe_t};
}

NllTerms nll_terms(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                   int64_t ignore_index, const char* op) {
  check_nll_args(input, target, weight, ignore_index, op);
  const int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  const int64_t m = target.numel();
  // Classes last, one row per target.
  Tensor rows = input.dim() >= 3 ? movedim(input, 1, -1) : input;
  Tensor flat_input = reshape(rows, {m * classes, 1});
  // Ignored targets read class 0 and are masked out below (on a GPU, so are bad ones).
  auto [w, valid, safe_t] = row_weights(class_targets(target, classes, ignore_index, op), weight,
                                        ignore_index, classes, input.dtype());
  Tensor flat_index =
      contiguous(add(mul(arange(0, m, 1, DType::Int64, input.device()), Scalar(classes)), safe_t));
  Tensor picked = reshape(gather_rows(flat_input, flat_index), {m});
  Tensor loss = where(valid, neg(mul(picked, w)), zero_like_scalar(picked));
  return {loss, w, valid};
}

// Unreduced cross_entropy [m] of class targets through the fused kernels, and the summed
// weight of the non-ignored targets ("mean"'s denominator). Classes go last, one row per target.
// The loss (and weight) are of loss_dtype: the input's, or float32 for half logits under
// autocast (Note [Cross entropy under autocast]).
std::pair<Tensor, Tensor> cross_entropy_fused(const Tensor& input, const Tensor& target,
                                              const std::optional<Tensor>& weight,
                                              int64_t ignore_index, DType loss_dtype) {
  const int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  const int64_t m = target.numel();
  const Device dev = input.device();
  const Shape rows_shape = input.dim() >= 3 ? movedim(input, 1, -1).sizes() : input.sizes();
  Tensor x, t, w, loss, lse, weight_sum;
  {
    GradModeGuard no_grad(false);
    x = contiguous(reshape(input.dim() >= 3 ? movedim(input, 1, -1) : input, {m, classes}));
    // A GPU kernel checks its targets itself (ops/backend.h); a class weight is gathered at
    // them first, so then they are checked (and bad ones ignored) before.
    t = weight || !dev.is_cuda() ? class_targets(target, classes, ignore_index, "cross_entropy")
                                 : contiguous(reshape(target, {m}));
    if (weight) w = contiguous(to_dtype(*weight, loss_dtype));
    loss = make_tensor({m}, loss_dtype, dev);
    lse = make_tensor({m}, input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32, dev);
    backend(dev).cross_entropy_forward(loss, lse, x, t, w, ignore_index);
    std::optional<Tensor> w_opt = w.defined() ? std::optional<Tensor>(w) : std::nullopt;
    weight_sum = sum(row_weights(t, w_opt, ignore_index, classes, loss_dtype).weight);
  }
  if (needs_grad({input})) {
    const bool batched_dims = input.dim() >= 3;
    record("cross_entropy", {input}, {loss},
           [sx = SavedTensor(input), t, w, lse, ignore_index, classes, rows_shape, batched_dims,
            loss_dtype](const Grads& g, Node&) -> Grads {
             Tensor in = sx.unpack();
             Tensor x = reshape(batched_dims ? movedim(in, 1, -1) : in, {t.numel(), classes});
             Tensor grad;
             if (GradMode::is_enabled()) {
               // d loss / d x = weight[t] * (softmax(x) - onehot(t)), with differentiable ops.
               RowWeights rw = row_weights(t, w.defined() ? std::optional<Tensor>(w) : std::nullopt,
                                           ignore_index, classes, loss_dtype);
               // one_hot would read the targets on the host to check them; these are safe.
               Tensor classes_row = arange(0, classes, 1, DType::Int64, x.device());
               Tensor onehot = to_dtype(eq(unsqueeze(rw.safe_target, 1), classes_row), loss_dtype);
               Tensor scale = unsqueeze(mul(g[0], rw.weight), 1);
               grad = to_dtype(mul(scale, sub(softmax(to_dtype(x, loss_dtype), 1), onehot)),
                               x.dtype());
             } else {
               const Device d = x.device();
               grad = make_tensor(x.sizes(), x.dtype(), d);
               require_kernel(backend(d).cross_entropy_backward, "cross_entropy_backward", d)(
                   grad, contiguous(to_dtype(g[0], loss_dtype)), contiguous(x), lse, t, w,
                   ignore_index);
             }
             grad = reshape(grad, rows_shape);
             return {batched_dims ? movedim(grad, -1, 1) : grad};
           });
  }
  return {loss, weight_sum};
}

// Note [label smoothing]: with smoothing eps and C classes, cross_entropy is
// (1 - eps) * (the unsmoothed loss) + eps / C * sum_c -w_c * log p_c.
// For class-index targets the second term is 0 at ignored targets and, under
// "mean", is divided by the same denominator as nll_loss (the summed weight of
// the non-ignored targets). For probability targets it is the same as mixing
// the targets with the uniform distribution, and "mean" divides by the number
// of targets regardless of weights.
Tensor cross_entropy_probs(const Tensor& logp, const Tensor& target, const Tensor& weight_b,
                           int64_t class_dim, Reduction red, double eps) {
  KILN_CHECK(is_floating(target.dtype()), Runtime,
             "[cross_entropy] Expected floating point type for target with class probabilities,",
             " got ", target.dtype());
  const int64_t classes = logp.size(class_dim);
  Tensor probs = target;
  if (eps > 0) probs = add(mul(target, Scalar(1.0 - eps)), Scalar(eps / classes));
  Tensor prod = mul(logp, probs);
  if (weight_b.defined()) prod = mul(prod, weight_b);
  Tensor loss = neg(sum(prod, std::vector<int64_t>{class_dim}));
  if (red != Reduction::Mean) return apply_reduction(loss, red);
  return div(sum(loss), Scalar(static_cast<double>(loss.numel())));
}

}  // namespace

Reduction parse_reduction(const std::string& reduction, const char* op) {
  if (reduction == "mean") return Reduction::Mean;
  if (reduction == "sum") return Reduction::Sum;
  if (reduction == "none") return Reduction::None;
  fail(ErrorKind::Value, "[", op, "] '", reduction,
       "' is not a valid value for reduction (expected 'none', 'mean' or 'sum')");
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                int64_t ignore_index, const std::string& reduction) {
  profiler::RecordScope profile("nll_loss");
  profile.inputs(input, target);
  if (auto ac = autocast_args("nll_loss", {input, target, opt_arg(weight)}))
    return nll_loss((*ac)[0], (*ac)[1], ac->opt(2), ignore_index, reduction);
  Reduction red = parse_reduction(reduction, "nll_loss");
  NllTerms terms = nll_terms(input, target, weight, ignore_index, "nll_loss");
  if (red == Reduction::None) return reshape(terms.loss, target.sizes());
  if (red == Reduction::Sum) return sum(terms.loss);
  return div(sum(terms.loss), sum(terms.weight));
}

// Note [Cross entropy under autocast]: autocast runs cross_entropy in float32. Casting half
// logits first would write a float32 copy of [rows, classes] (at a 50k vocabulary the largest
// tensor of a GPT step) and read it twice, and turn its float32 gradient back to half. The
// fused kernels instead read the half logits in place and compute in float32, the same
// arithmetic as on a cast copy (every half value is exact in float32); the loss and the
// class weight are float32, the logits' gradient is rounded to half once, as the cast's
// backward would round it.
namespace {

bool fused_cross_entropy_applies(const Tensor& input, const Tensor& target,
                                 const std::optional<Tensor>& weight, double label_smoothing) {
  return input.sizes() != target.sizes() && label_smoothing == 0.0 && input.numel() > 0 &&
         !(weight && weight->requires_grad()) && backend(input.device()).cross_entropy_forward;
}

Tensor reduce_cross_entropy(const Tensor& input, const Tensor& target,
                            const std::optional<Tensor>& weight, int64_t ignore_index,
                            Reduction red, DType loss_dtype) {
  check_nll_args(input, target, weight, ignore_index, "cross_entropy");
  auto [loss, weight_sum] = cross_entropy_fused(input, target, weight, ignore_index, loss_dtype);
  if (red == Reduction::Sum) return sum(loss);
  if (red == Reduction::Mean) return div(sum(loss), weight_sum);
  return reshape(loss, target.sizes());
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  profiler::RecordScope profile("cross_entropy");
  profile.inputs(input, target);
  if (autocast_active() && (input.dtype() == DType::Float16 || input.dtype() == DType::BFloat16) &&
      autocast_state(input.device().type).enabled &&
      fused_cross_entropy_applies(input, target, weight, label_smoothing)) {
    Reduction red = parse_reduction(reduction, "cross_entropy");
    AutocastSuspend suspend;
    return reduce_cross_entropy(input, target, weight, ignore_index, red, DType::Float32);
  }
  if (auto ac = autocast_args("cross_entropy", {input, target, opt_arg(weight)}))
    return cross_entropy((*ac)[0], (*ac)[1], ac->opt(2), ignore_index, reduction,
                         label_smoothing);
  Reduction red = parse_reduction(reduction, "cross_entropy");
  KILN_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, Runtime,
             "[cross_entropy] label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  KILN_CHECK(input.dim() >= 1, Value, "[cross_entropy] Expected 1 or more dimensions (got 0)");
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[cross_entropy] expected a floating-point input, got ", input.dtype());
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const int64_t classes = input.size(class_dim);
  KILN_CHECK(!weight || (weight->dim() == 1 && weight->numel() == classes), Runtime,
             "[cross_entropy] weight tensor should be defined either for all ", classes,
             " classes or no classes but got weight tensor of shape: ", weight->sizes());
  Tensor weight_b;  // weight shaped to broadcast along the class dim
  if (weight) {
    Shape shape(input.dim(), 1);
    shape[class_dim] = classes;
    weight_b = reshape(*weight, shape);
  }
  if (input.sizes() == target.sizes())
    return cross_entropy_probs(log_softmax(input, class_dim), target, weight_b, class_dim, red,
                               label_smoothing);
  // Label smoothing and a weight that wants a gradient keep the composite path.
  if (fused_cross_entropy_applies(input, target, weight, label_smoothing))
    return reduce_cross_entropy(input, target, weight, ignore_index, red, input.dtype());
  Tensor logp = log_softmax(input, class_dim);

  NllTerms terms = nll_terms(logp, target, weight, ignore_index, "cross_entropy");
  Tensor nll = terms.loss;
  if (red == Reduction::Sum) nll = sum(nll);
  if (red == Reduction::Mean) nll = div(sum(nll), sum(terms.weight));
  if (red == Reduction::None) nll = reshape(nll, target.sizes());
  if (label_smoothing == 0.0) return nll;

  Tensor prod = weight_b.defined() ? mul(logp, weight_b) : logp;
  Tensor smooth = reshape(neg(sum(prod, std::vector<int64_t>{class_dim})), {target.numel()});
  smooth = where(terms.valid, smooth, zero_like_scalar(smooth));
  if (red == Reduction::Sum) smooth = sum(smooth);
  if (red == Reduction::Mean) smooth = div(sum(smooth), sum(terms.weight));
  if (red == Reduction::None) smooth = reshape(smooth, target.sizes());
  return add(mul(nll, Scalar(1.0 - label_smoothing)),
             mul(smooth, Scalar(label_smoothing / classes)));
}

namespace {

// PyTorch's weighted pointwise losses: weight has input's shape and "mean"
// divides by the summed weight.
Tensor reduce_weighted(const Tensor& loss, const Tensor& input, const std::optional<Tensor>& weight,
                       Reduction red, const char* op) {
  if (!weight) return apply_reduction(loss, red);
  KILN_CHECK(weight->sizes() == input.sizes(), Value, "[", op,
             "] Weights and input must have the same size: weight ", weight->sizes(), ", input ",
             input.sizes());
  Tensor weighted = mul(loss, *weight);
  if (red == Reduction::Mean) return div(sum(weighted), sum(*weight));
  return apply_reduction(weighted, red);
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                const std::optional<Tensor>& weight) {
  profiler::RecordScope profile("mse_loss");
  profile.inputs(input, target);
  if (auto ac = autocast_args("mse_loss", {input, target, opt_arg(weight)}))
    return mse_loss((*ac)[0], (*ac)[1], reduction, ac->opt(2));
  Reduction red = parse_reduction(reduction, "mse_loss");
  Tensor diff = sub(input, target);
  return reduce_weighted(mul(diff, diff), input, weight, red, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
               const std::optional<Tensor>& weight) {
  profiler::RecordScope profile("l1_loss");
  profile.inputs(input, target);
  if (auto ac = autocast_args("l1_loss", {input, target, opt_arg(weight)}))
    return l1_loss((*ac)[0], (*ac)[1], reduction, ac->opt(2));
  Reduction red = parse_reduction(reduction, "l1_loss");
  return reduce_weighted(abs(sub(input, target)), input, weight, red, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  profiler::RecordScope profile("smooth_l1_loss");
  profile.inputs(input, target);
  if (auto ac = autocast_args("smooth_l1_loss", {input, target}))
    return smooth_l1_loss((*ac)[0], (*ac)[1], reduction, beta);
  Reduction red = parse_reduction(reduction, "smooth_l1_loss");
  KILN_CHECK(beta >= 0, Runtime,
             "[smooth_l1_loss] smooth_l1_loss does not support negative values for beta, got ",
             beta);
  Tensor d = abs(sub(input, target));
  if (beta == 0.0) return apply_reduction(d, red);
  Tensor quadratic = div(mul(mul(d, d), Scalar(0.5)), Scalar(beta));
  return apply_reduction(where(lt(d, Scalar(beta)), quadratic, sub(d, Scalar(0.5 * beta))), red);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta, const std::optional<Tensor>& weight) {
  profiler::RecordScope profile("huber_loss");
  profile.inputs(input, target);
  if (auto ac = autocast_args("huber_loss", {input, target, opt_arg(weight)}))
    return huber_loss((*ac)[0], (*ac)[1], reduction, delta, ac->opt(2));
  Reduction red = parse_reduction(reduction, "huber_loss");
  KILN_CHECK(delta > 0, Runtime,
             "[huber_loss] huber_loss does not support non-positive values for delta, got ", delta);
  Tensor d = abs(sub(input, target));
  Tensor loss = where(lt(d, Scalar(delta)), mul(mul(d, d), Scalar(0.5)),
                      mul(sub(d, Scalar(0.5 * delta)), Scalar(delta)));
  if (!weight) return apply_reduction(loss, red);
  KILN_CHECK(weight->sizes() == input.sizes(), Value,
             "[huber_loss] Weights and input must have the same size: weight ", weight->sizes(),
             ", input ", input.sizes());
  // Unlike mse_loss and l1_loss, PyTorch's weighted huber "mean" divides by the element count.
  return apply_reduction(mul(loss, *weight), red);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  profiler::RecordScope profile("kl_div");
  profile.inputs(input, target);
  if (auto ac = autocast_args("kl_div", {input, target}))
    return kl_div((*ac)[0], (*ac)[1], reduction, log_target);
  const bool batchmean = reduction == "batchmean";
  Reduction red = batchmean ? Reduction::Sum : parse_reduction(reduction, "kl_div");
  Tensor loss;
  if (log_target) {
    loss = mul(exp(target), sub(target, input));
  } else {
    // target * log(target) with 0 * log(0) = 0 (and a finite gradient there).
    Tensor safe = where(eq(target, Scalar(0)), ones_like(target), target);
    loss = sub(mul(target, log(safe)), mul(target, input));
  }
  Tensor out = apply_reduction(loss, red);
  if (batchmean && input.dim() > 0) out = div(out, Scalar(input.size(0)));
  return out;
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const std::optional<Tensor>& weight, const std::string& reduction) {
  profiler::RecordScope profile("binary_cross_entropy");
  profile.inputs(input, target);
  if (auto ac = autocast_args("binary_cross_entropy", {input, target, opt_arg(weight)}))
    return binary_cross_entropy((*ac)[0], (*ac)[1], ac->opt(2), reduction);
  Reduction red = parse_reduction(reduction, "binary_cross_entropy");
  KILN_CHECK(input.sizes() == target.sizes(), Value, "[binary_cross_entropy] Using a target size ",
             target.sizes(), " that is different to the input size ", input.sizes(),
             " is not supported. Please ensure they have the same size.");
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[binary_cross_entropy] expected a floating-point input, got ", input.dtype());
  // The clamped logs: log(0) would make 0 * -inf = NaN in the loss.
  auto clamped_logs = [](const Tensor& x) {
    return std::make_pair(clamp(log(x), Scalar(-100.0), std::nullopt),
                          clamp(log1p(neg(x)), Scalar(-100.0), std::nullopt));
  };
  Tensor loss;
  {
    GradModeGuard no_grad(false);
    if (input.numel() > 0) {
      // NaN fails the check too, as it should.
      Tensor inside = logical_and(ge(input, Scalar(0)), le(input, Scalar(1)));
      Tensor all_inside = to_device(reduce_compute(ReduceOp::All, inside, std::nullopt, false,
                                                   DType::Bool, "binary_cross_entropy"),
                                    Device());
      KILN_CHECK(*all_inside.data<bool>(), Runtime,
                 "[binary_cross_entropy] all elements of input should be between 0 and 1");
    }
    auto [log_x, log_1mx] = clamped_logs(input);
    loss = neg(add(mul(target, log_x), mul(rsub(target, Scalar(1)), log_1mx)));
  }
  // Written out rather than differentiated through the clamps: at x = 0 or 1
  // the chain rule would multiply a zero clamp gradient by an infinite log'.
  if (needs_grad({input, target})) {
    record("binary_cross_entropy", {input, target}, {loss},
           [sx = SavedTensor(input), st = SavedTensor(target), clamped_logs](const Grads& g,
                                                                             Node&) -> Grads {
             Tensor x = sx.unpack(), t = st.unpack();
             // PyTorch's epsilon is the float 1e-12; matching it matches its gradients.
             Tensor denom = clamp(mul(rsub(x, Scalar(1)), x), Scalar(static_cast<double>(1e-12f)),
                                  std::nullopt);
             auto [log_x, log_1mx] = clamped_logs(x);
             return {div(mul(g[0], sub(x, t)), denom), mul(g[0], sub(log_1mx, log_x))};
           });
  }
  if (weight) loss = mul(loss, *weight);
  return apply_reduction(loss, red);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight,
                                        const std::string& reduction,
                                        const std::optional<Tensor>& pos_weight) {
  profiler::RecordScope profile("binary_cross_entropy_with_logits");
  profile.inputs(input, target);
  if (auto ac = autocast_args("binary_cross_entropy_with_logits",
                                {input, target, opt_arg(weight), opt_arg(pos_weight)}))
    return binary_cross_entropy_with_logits((*ac)[0], (*ac)[1], ac->opt(2), reduction, ac->opt(3));
  Reduction red = parse_reduction(reduction, "binary_cross_entropy_with_logits");
  KILN_CHECK(input.sizes() == target.sizes(), Value,
             "[binary_cross_entropy_with_logits] Target size ", target.sizes(),
             " must be the same as input size ", input.sizes());
  // (1 - t) * x - lw * logsigmoid(x), with lw = 1 + (pos_weight - 1) * t.
  Tensor log_sig = logsigmoid(input);
  if (pos_weight) log_sig = mul(log_sig, add(mul(sub(*pos_weight, Scalar(1)), target), Scalar(1)));
  Tensor loss = sub(mul(rsub(target, Scalar(1)), input), log_sig);
  if (weight) loss = mul(loss, *weight);
  return apply_reduction(loss, red);
}

}  // namespace kiln
