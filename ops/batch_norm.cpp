// Note [Fused batch norm]: where the device has batch_norm kernels, batch_norm runs as one
// statistics pass and one elementwise pass (and the same for its backward) on NCHW-contiguous
// or channels-last inputs, without copies and with the output in the input's layout; the
// running stats are updated by the kernels on the device. Half inputs keep their dtype with
// float32 statistics and parameters. The composition below stays as the reference path: it
// serves devices without the kernels and double backward (a backward under create_graph).
#include "ops/batch_norm.h"

#include <tuple>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/memory_format.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// [C] -> [1, C, 1, ...] for an input of `dim` dims.
Tensor channel_view(const Tensor& t, int64_t dim) {
  Shape s(static_cast<size_t>(dim), 1);
  s[1] = t.numel();
  return reshape(t, s);
}

void check_channel_vectors(const Tensor& input, const std::vector<const std::optional<Tensor>*>& ts,
                           const std::vector<const char*>& names, const char* op) {
  const int64_t c = input.size(1);
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = *ts[i];
    if (!t) continue;
    KILN_CHECK(t->numel() == c, Runtime, "[", op, "] ", names[i], " should contain ", c,
               " elements not ", t->numel(), " (input of size ", input.sizes(), ")");
    KILN_CHECK(t->device() == input.device(), Runtime, "[", op, "] ", names[i], " is on ",
               t->device(), " but input is on ", input.device());
  }
}

// (x - mean) / sqrt(var + eps) * weight + bias with mean / var broadcastable to x.
Tensor normalize_affine(const Tensor& x, const Tensor& mean, const Tensor& var, double eps,
                        const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  Tensor y = mul(sub(x, mean), rsqrt(add(var, Scalar(eps))));
  if (weight) y = mul(y, channel_view(*weight, x.dim()));
  if (bias) y = add(y, channel_view(*bias, x.dim()));
  // float32 statistics or parameters with a half input (mixed precision) keep the input's dtype.
  return y.dtype() == x.dtype() ? y : to_dtype(y, x.dtype());
}

// running <- (1 - momentum) * running + momentum * value, outside autograd.
void update_running(const Tensor& running, const Tensor& value, double momentum) {
  GradModeGuard no_grad(false);
  Tensor v = reshape(to_dtype(detach(value), running.dtype()), running.sizes());
  copy_(running, add(mul(running, Scalar(1.0 - momentum)), mul(v, Scalar(momentum))));
}

DType stat_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

// The reduced dims of batch norm: all but the channel dim 1.
std::vector<int64_t> batch_dims(int64_t dim) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < dim; ++d) dims.push_back(d);
  return dims;
}

// [N, C, *S] input whose memory is dense in [N, *S, C] order (channels_last / _3d).
bool is_channels_last(const Tensor& x) {
  if (x.dim() < 3 || x.is_contiguous()) return false;
  int64_t expect = 1;
  std::vector<int64_t> order = {1};
  for (int64_t d = x.dim() - 1; d >= 2; --d) order.push_back(d);
  order.push_back(0);
  for (int64_t d : order) {
    if (x.size(d) != 1 && x.stride(d) != expect) return false;
    expect *= x.size(d);
  }
  return true;
}

// [N, C, *S] -> [N, *S, C], the channels-last memory order of any rank.
std::vector<int64_t> to_last(int64_t dim) { return memory_order(MemoryFormat::ChannelsLast, dim); }

// The kernels' [outer, C, inner] view of t: channels-last memory as
// [N * S, C, 1], anything else NCHW-contiguous (copied if it is not) as [N, C, S].
Tensor kernel_view(const Tensor& t, bool channels_last) {
  const int64_t n = t.size(0), c = t.size(1), s = t.numel() / (n * c);
  if (channels_last) return reshape(contiguous(permute(t, to_last(t.dim()))), {n * s, c, 1});
  return reshape(contiguous(t), {n, c, s});
}

// An uninitialized tensor of `sizes` in the given layout, and its kernel view.
std::pair<Tensor, Tensor> alloc_like(const Shape& sizes, DType dtype, Device device,
                                     bool channels_last) {
  const int64_t dim = static_cast<int64_t>(sizes.size());
  if (!channels_last) {
    Tensor t = make_tensor(sizes, dtype, device);
    return {t, kernel_view(t, false)};
  }
  Shape last;
  for (int64_t d : to_last(dim)) last.push_back(sizes[d]);
  Tensor t = make_tensor(last, dtype, device);
  return {permute(t, inverse_permutation(to_last(dim))),
          reshape(t, {t.numel() / sizes[1], sizes[1], 1})};
}

// A [C] parameter as the kernels take it: contiguous, statistics dtype.
Tensor channel_param(const std::optional<Tensor>& t, DType stat) {
  if (!t) return Tensor();
  return contiguous(to_dtype(reshape(detach(*t), {t->numel()}), stat));
}

// Gradients of batch_norm with differentiable ops (for create_graph): training recomputes
// the statistics from x, evaluation takes mean / invstd as constants.
std::vector<Tensor> batch_norm_backward_composite(const Tensor& g, const Tensor& input,
                                                  const Tensor& weight, const Tensor& mean_t,
                                                  const Tensor& invstd_t, bool training,
                                                  double eps) {
  const std::vector<int64_t> dims = batch_dims(input.dim());
  const int64_t c = input.size(1);
  Tensor x = input.dtype() == stat_dtype(input.dtype()) ? input : to_dtype(input, DType::Float32);
  Tensor gf = to_dtype(g, x.dtype());
  Tensor mu, invstd;
  if (training) {
    auto [var, m] = var_mean(x, dims, 0.0, true);
    mu = m;
    invstd = rsqrt(add(var, Scalar(eps)));
  } else {
    mu = channel_view(mean_t, x.dim());
    invstd = channel_view(invstd_t, x.dim());
  }
  Tensor xhat = mul(sub(x, mu), invstd);
  Tensor gy = weight.defined() ? mul(gf, channel_view(weight, x.dim())) : gf;
  Tensor gx = training ? mul(invstd, sub(sub(gy, mean(gy, dims, true)),
                                         mul(xhat, mean(mul(gy, xhat), dims, true))))
                       : mul(gy, invstd);
  return {gx, reshape(sum(mul(gf, xhat), dims), {c}), reshape(sum(gf, dims), {c})};
}

// A running stat the kernels can update in place, or a converted copy to write back.
Tensor running_buffer(const std::optional<Tensor>& r, DType stat) {
  if (!r) return Tensor();
  if (r->dtype() == stat && r->is_contiguous() && r->dim() == 1) return detach(*r);
  return contiguous(to_dtype(reshape(detach(*r), {r->numel()}), stat));
}

void write_back(const std::optional<Tensor>& r, const Tensor& buffer) {
  if (!r) return;
  if (buffer.data_ptr() == r->data_ptr()) {
    r->bump_version();
  } else {
    copy_(*r, reshape(buffer, r->sizes()));
  }
}

Tensor batch_norm_fused(const Tensor& input, const std::optional<Tensor>& running_mean,
                        const std::optional<Tensor>& running_var,
                        const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                        bool training, double momentum, double eps) {
  const Device dev = input.device();
  const DType stat = stat_dtype(input.dtype());
  const int64_t c = input.size(1);
  const bool cl = is_channels_last(input);
  std::vector<Tensor> inputs{input};
  if (weight) inputs.push_back(*weight);
  if (bias) inputs.push_back(*bias);
  const bool want_grad = needs_grad(inputs);
  Tensor y, x3, w, mean_t, invstd_t;
  {
    GradModeGuard no_grad(false);
    x3 = kernel_view(input, cl);
    w = channel_param(weight, stat);
    Tensor b = channel_param(bias, stat);
    auto [out, out3] = alloc_like(input.sizes(), input.dtype(), dev, cl);
    y = out;
    if (training || want_grad) {
      mean_t = make_tensor({c}, stat, dev);
      invstd_t = make_tensor({c}, stat, dev);
    }
    // Training updates the running stats in place; evaluation only reads them.
    Tensor rm = running_buffer(running_mean, stat), rv = running_buffer(running_var, stat);
    backend(dev).batch_norm_forward(out3, mean_t, invstd_t, x3, w, b, rm, rv, training, momentum,
                                    eps);
    if (training) {
      write_back(running_mean, rm);
      write_back(running_var, rv);
    }
  }
  if (!want_grad) return y;
  const bool has_w = weight.has_value(), has_b = bias.has_value();
  const bool want_x = input.requires_grad(), want_w = has_w && weight->requires_grad(),
             want_b = has_b && bias->requires_grad();
  record("batch_norm", inputs, {y},
         [sx = SavedTensor(input), sw = has_w ? SavedTensor(*weight) : SavedTensor(), x3, w, mean_t,
          invstd_t, training, eps, cl, has_w, has_b, want_x, want_w,
          want_b](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
           Tensor in = sx.unpack();
           std::vector<Tensor> grads;
           if (GradMode::is_enabled()) {
             Tensor wv = has_w ? sw.unpack() : Tensor();
             grads = batch_norm_backward_composite(g[0], in, wv, mean_t, invstd_t, training, eps);
           } else {
             const Device d = in.device();
             const DType stat = mean_t.dtype();
             Tensor go = kernel_view(to_dtype(g[0], in.dtype()), cl);
             Tensor gi, gi3, gw, gb;
             if (want_x) std::tie(gi, gi3) = alloc_like(in.sizes(), in.dtype(), d, cl);
             if (want_w) gw = make_tensor({in.size(1)}, stat, d);
             if (want_b) gb = make_tensor({in.size(1)}, stat, d);
             require_kernel(backend(d).batch_norm_backward, "batch_norm_backward", d)(
                 gi3, gw, gb, go, x3, mean_t, invstd_t, w, training);
             grads = {gi, gw, gb};
           }
           std::vector<Tensor> result{grads[0]};
           if (has_w) result.push_back(grads[1]);
           if (has_b) result.push_back(grads[2]);
           return result;
         });
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, bool training, double momentum, double eps) {
  tracing::OpScope scope("batch_norm");
  const char* op = "batch_norm";
  KILN_CHECK(input.dim() >= 2, Runtime,
             "[batch_norm] Expected input with at least 2 dims "
             "[N, C, *], got input of size ",
             input.sizes());
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[batch_norm] expected a floating-point input, "
             "got ",
             input.dtype());
  check_channel_vectors(input, {&running_mean, &running_var, &weight, &bias},
                        {"running_mean", "running_var", "weight", "bias"}, op);
  std::vector<int64_t> dims = batch_dims(input.dim());
  const int64_t per_channel = input.size(1) == 0 ? 0 : input.numel() / input.size(1);
  if (!training) {
    KILN_CHECK(running_mean && running_var, Runtime,
               "[batch_norm] running_mean and running_var "
               "must be defined in evaluation mode");
  } else {
    KILN_CHECK(per_channel > 1, Value,
               "[batch_norm] Expected more than 1 value per channel when "
               "training, got input size ",
               input.sizes());
  }
  if (input.numel() > 0 && backend(input.device()).batch_norm_forward)
    return scope.out(
        batch_norm_fused(input, running_mean, running_var, weight, bias, training, momentum, eps),
        input, running_mean, running_var, weight, bias, training, momentum, eps);
  if (!training) {
    return scope.out(normalize_affine(input, channel_view(*running_mean, input.dim()),
                                      channel_view(*running_var, input.dim()), eps, weight, bias),
                     input, running_mean, running_var, weight, bias, training, momentum, eps);
  }
  auto [var, mean] = var_mean(input, dims, 0.0, true);
  if (running_mean) update_running(*running_mean, mean, momentum);
  if (running_var) {
    double n = static_cast<double>(per_channel);
    update_running(*running_var, mul(var, Scalar(n / (n - 1.0))), momentum);
  }
  return scope.out(normalize_affine(input, mean, var, eps, weight, bias), input, running_mean,
                   running_var, weight, bias, training, momentum, eps);
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  KILN_CHECK(input.dim() >= 2, Runtime,
             "[group_norm] Expected at least 2 dimensions for input "
             "tensor but received ",
             input.dim(), " (input of size ", input.sizes(), ")");
  KILN_CHECK(num_groups > 0 && input.size(1) % num_groups == 0, Runtime,
             "[group_norm] Expected number of channels in input to be divisible by num_groups, "
             "but got input of shape ",
             input.sizes(), " and num_groups=", num_groups);
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[group_norm] expected a floating-point input, "
             "got ",
             input.dtype());
  check_channel_vectors(input, {&weight, &bias}, {"weight", "bias"}, "group_norm");
  const int64_t n = input.size(0);
  int64_t per_group = input.size(1) / num_groups;
  for (int64_t d = 2; d < input.dim(); ++d) per_group *= input.size(d);
  Tensor x = reshape(input, {n, num_groups, per_group});
  auto [var, mean] = var_mean(x, std::vector<int64_t>{2}, 0.0, true);
  Tensor y = reshape(mul(sub(x, mean), rsqrt(add(var, Scalar(eps)))), input.sizes());
  if (weight) y = mul(y, channel_view(*weight, input.dim()));
  if (bias) y = add(y, channel_view(*bias, input.dim()));
  return y.dtype() == input.dtype() ? y : to_dtype(y, input.dtype());
}

Tensor instance_norm(const Tensor& input, const std::optional<Tensor>& running_mean,
                     const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                     const std::optional<Tensor>& bias, bool use_input_stats, double momentum,
                     double eps) {
  const char* op = "instance_norm";
  KILN_CHECK(input.dim() >= 3, Runtime,
             "[instance_norm] Expected input with at least 3 dims "
             "[N, C, *], got input of size ",
             input.sizes());
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[instance_norm] expected a floating-point "
             "input, got ",
             input.dtype());
  check_channel_vectors(input, {&running_mean, &running_var, &weight, &bias},
                        {"running_mean", "running_var", "weight", "bias"}, op);
  if (!use_input_stats) {
    KILN_CHECK(running_mean && running_var, Runtime,
               "[instance_norm] Expected running_mean and "
               "running_var to be defined when use_input_stats is false");
    return normalize_affine(input, channel_view(*running_mean, input.dim()),
                            channel_view(*running_var, input.dim()), eps, weight, bias);
  }
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  int64_t per_instance = 1;
  for (int64_t d : dims) per_instance *= input.size(d);
  KILN_CHECK(per_instance > 1, Value,
             "[instance_norm] Expected more than 1 spatial element when "
             "training, got input size ",
             input.sizes());
  auto [v, m] = var_mean(input, dims, 0.0, true);
  if (running_mean) update_running(*running_mean, mean(m, std::vector<int64_t>{0}), momentum);
  if (running_var) {
    double n = static_cast<double>(per_instance);
    Tensor unbiased = mul(v, Scalar(n / (n - 1.0)));
    update_running(*running_var, mean(unbiased, std::vector<int64_t>{0}), momentum);
  }
  return normalize_affine(input, m, v, eps, weight, bias);
}

}  // namespace kiln
