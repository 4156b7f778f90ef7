#include "ops/batch_norm.h"

#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"
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

}  // namespace

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, bool training, double momentum, double eps) {
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
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  if (!training) {
    KILN_CHECK(running_mean && running_var, Runtime,
               "[batch_norm] running_mean and running_var "
               "must be defined in evaluation mode");
    return normalize_affine(input, channel_view(*running_mean, input.dim()),
                            channel_view(*running_var, input.dim()), eps, weight, bias);
  }
  const int64_t per_channel = input.size(1) == 0 ? 0 : input.numel() / input.size(1);
  KILN_CHECK(per_channel > 1, Value,
             "[batch_norm] Expected more than 1 value per channel when "
             "training, got input size ",
             input.sizes());
  auto [var, mean] = var_mean(input, dims, 0.0, true);
  if (running_mean) update_running(*running_mean, mean, momentum);
  if (running_var) {
    double n = static_cast<double>(per_channel);
    update_running(*running_var, mul(var, Scalar(n / (n - 1.0))), momentum);
  }
  return normalize_affine(input, mean, var, eps, weight, bias);
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
