// Front end of the multi-tensor optimizer steps: argument checks, step counters and bias
// corrections on the host, then one kernel call per device (ops/optim.h).
#include "ops/optim.h"

#include <cmath>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace kiln {

namespace {

// A list is either index-aligned with params or, when `optional`, empty (the option is off).
void check_length(const char* op, const std::vector<Tensor>& list, size_t n, const char* name,
                  bool used) {
  KILN_CHECK(list.size() == n || (!used && list.empty()), Value, "[", op, "] ", name, " has ",
             list.size(), " tensors but params has ", n);
}

// t must be a tensor like params[i] (device, dtype, shape).
void check_like(const char* op, const Tensor& p, const Tensor& t, const char* name, size_t i) {
  KILN_CHECK(t.defined(), Runtime, "[", op, "] ", name, "[", i, "] is None");
  KILN_CHECK(t.device() == p.device(), Runtime, "[", op, "] ", name, "[", i, "] is on ", t.device(),
             " but params[", i, "] is on ", p.device());
  KILN_CHECK(t.dtype() == p.dtype(), Runtime, "[", op, "] ", name, "[", i, "] has dtype ",
             t.dtype(), " but params[", i, "] has dtype ", p.dtype());
  KILN_CHECK(t.sizes() == p.sizes(), Runtime, "[", op, "] ", name, "[", i, "] has shape ",
             t.sizes(), " but params[", i, "] has shape ", p.sizes());
}

void check_params(const char* op, const OptimizerStep& s) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Tensor& p = s.params[i];
    KILN_CHECK(p.defined(), Runtime, "[", op, "] params[", i, "] is None");
    KILN_CHECK(is_floating(p.dtype()), Runtime, "[", op, "] params[", i,
               "] must be floating point, got dtype ", p.dtype());
    check_like(op, p, s.grads[i], "grads", i);
  }
}

void check_states(const char* op, const OptimizerStep& s, int slot, const char* name) {
  for (size_t i = 0; i < s.states[slot].size(); ++i)
    check_like(op, s.params[i], s.states[slot][i], name, i);
}

// step += 1 in the counter's own dtype (PyTorch keeps float32 counters); returns the new value.
double increment_step(const char* op, const Tensor& step, size_t i) {
  KILN_CHECK(step.defined() && step.device().is_cpu() && step.numel() == 1 &&
                 (step.dtype() == DType::Float32 || step.dtype() == DType::Float64),
             Runtime, "[", op, "] steps[", i,
             "] must be a one-element float32 or float64 CPU tensor, got ",
             step.defined()
                 ? str_cat(step.dtype(), " on ", step.device(), " with shape ", step.sizes())
                 : std::string("None"));
  double value;
  if (step.dtype() == DType::Float32) {
    float* v = step.data<float>();
    *v += 1.0f;
    value = *v;
  } else {
    double* v = step.data<double>();
    *v += 1.0;
    value = *v;
  }
  step.bump_version();
  return value;
}

// Runs the kernel on `s` restricted to one device, with contiguous operands: strided params
// or states are updated through contiguous copies written back afterwards.
void run_on_device(const char* op, OptimizerStep& s) {
  const Device dev = s.params.front().device();
  const Backend& be = backend(dev);
  auto fn = require_kernel(be.optimizer_step, op, dev);
  std::vector<std::pair<Tensor, Tensor>> write_back;
  auto dense = [&](Tensor& t, bool written) {
    if (t.is_contiguous()) return;
    Tensor c = contiguous(t);
    if (written) write_back.emplace_back(t, c);
    t = c;
  };
  for (size_t i = 0; i < s.params.size(); ++i) {
    dense(s.params[i], true);
    dense(s.grads[i], false);
    for (auto& list : s.states)
      if (!list.empty()) dense(list[i], true);
  }
  fn(s);
  for (auto& [dst, src] : write_back) be.copy(dst, src);
}

// Splits the step by device (one kernel call each) and bumps the version of every tensor
// written.
void run(const char* op, OptimizerStep& s) {
  if (s.params.empty()) return;
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].bump_version();
    for (auto& list : s.states)
      if (!list.empty()) list[i].bump_version();
  }
  const Device first = s.params.front().device();
  bool one_device = true;
  for (const Tensor& p : s.params) one_device = one_device && p.device() == first;
  if (one_device) return run_on_device(op, s);

  std::vector<Device> devices;
  for (const Tensor& p : s.params) {
    bool seen = false;
    for (const Device& d : devices) seen = seen || d == p.device();
    if (!seen) devices.push_back(p.device());
  }
  for (const Device& d : devices) {
    OptimizerStep part;
    part.algo = s.algo;
    part.hyper = s.hyper;
    for (size_t i = 0; i < s.params.size(); ++i) {
      if (s.params[i].device() != d) continue;
      part.params.push_back(s.params[i]);
      part.grads.push_back(s.grads[i]);
      for (int k = 0; k < kOptimizerStates; ++k)
        if (!s.states[k].empty()) part.states[k].push_back(s.states[k][i]);
      if (!s.scalars.empty()) part.scalars.push_back(s.scalars[i]);
    }
    run_on_device(op, part);
  }
}

}  // namespace

void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                 double lr, double beta1, double beta2, double weight_decay, double eps,
                 bool amsgrad, bool maximize, bool decoupled_weight_decay) {
  const char* op = "_fused_adam_";
  const size_t n = params.size();
  check_length(op, grads, n, "grads", true);
  check_length(op, exp_avgs, n, "exp_avgs", true);
  check_length(op, exp_avg_sqs, n, "exp_avg_sqs", true);
  check_length(op, max_exp_avg_sqs, n, "max_exp_avg_sqs", amsgrad);
  check_length(op, steps, n, "steps", true);
  OptimizerStep s;
  s.algo = OptimizerAlgo::Adam;
  s.hyper.lr = lr;
  s.hyper.beta1 = beta1;
  s.hyper.beta2 = beta2;
  s.hyper.weight_decay = weight_decay;
  s.hyper.eps = eps;
  s.hyper.amsgrad = amsgrad;
  s.hyper.maximize = maximize;
  s.hyper.decoupled_weight_decay = decoupled_weight_decay;
  s.params = params;
  s.grads = grads;
  s.states[0] = exp_avgs;
  s.states[1] = exp_avg_sqs;
  if (amsgrad) s.states[2] = max_exp_avg_sqs;
  check_params(op, s);
  check_states(op, s, 0, "exp_avgs");
  check_states(op, s, 1, "exp_avg_sqs");
  check_states(op, s, 2, "max_exp_avg_sqs");
  s.scalars.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double step = increment_step(op, steps[i], i);
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    s.scalars[i] = {lr / bias_correction1, std::sqrt(bias_correction2)};
  }
  run(op, s);
}

std::vector<Tensor> fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& momentum_buffers, double lr,
                               double momentum, double dampening, double weight_decay,
                               bool nesterov, bool maximize) {
  const char* op = "_fused_sgd_";
  const size_t n = params.size();
  const bool use_buffers = momentum != 0;
  check_length(op, grads, n, "grads", true);
  check_length(op, momentum_buffers, n, "momentum_buffers", use_buffers);
  OptimizerStep s;
  s.algo = OptimizerAlgo::SGD;
  s.hyper.lr = lr;
  s.hyper.momentum = momentum;
  s.hyper.dampening = dampening;
  s.hyper.weight_decay = weight_decay;
  s.hyper.nesterov = nesterov;
  s.hyper.maximize = maximize;
  s.params = params;
  s.grads = grads;
  check_params(op, s);
  if (use_buffers) {
    s.scalars.resize(n);
    s.states[0] = momentum_buffers;
    for (size_t i = 0; i < n; ++i) {
      Tensor& buf = s.states[0][i];
      if (buf.defined()) {
        s.scalars[i] = {momentum, 1 - dampening};
      } else {
        buf = zeros(params[i].sizes(), params[i].dtype(), params[i].device());
        s.scalars[i] = {0.0, 1.0};
      }
    }
    check_states(op, s, 0, "momentum_buffers");
  }
  std::vector<Tensor> buffers = s.states[0];
  run(op, s);
  return buffers;
}

void fused_rmsprop_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& square_avgs,
                    const std::vector<Tensor>& momentum_buffers,
                    const std::vector<Tensor>& grad_avgs, const std::vector<Tensor>& steps,
                    double lr, double alpha, double eps, double weight_decay, double momentum,
                    bool centered, bool maximize) {
  const char* op = "_fused_rmsprop_";
  const size_t n = params.size();
  check_length(op, grads, n, "grads", true);
  check_length(op, square_avgs, n, "square_avgs", true);
  check_length(op, momentum_buffers, n, "momentum_buffers", momentum > 0);
  check_length(op, grad_avgs, n, "grad_avgs", centered);
  check_length(op, steps, n, "steps", true);
  OptimizerStep s;
  s.algo = OptimizerAlgo::RMSprop;
  s.hyper.lr = lr;
  s.hyper.alpha = alpha;
  s.hyper.eps = eps;
  s.hyper.weight_decay = weight_decay;
  s.hyper.momentum = momentum;
  s.hyper.centered = centered;
  s.hyper.maximize = maximize;
  s.params = params;
  s.grads = grads;
  s.states[0] = square_avgs;
  if (momentum > 0) s.states[1] = momentum_buffers;
  if (centered) s.states[2] = grad_avgs;
  check_params(op, s);
  check_states(op, s, 0, "square_avgs");
  check_states(op, s, 1, "momentum_buffers");
  check_states(op, s, 2, "grad_avgs");
  for (size_t i = 0; i < n; ++i) increment_step(op, steps[i], i);
  run(op, s);
}

void fused_adagrad_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& state_sums, const std::vector<Tensor>& steps,
                    double lr, double lr_decay, double weight_decay, double eps, bool maximize) {
  const char* op = "_fused_adagrad_";
  const size_t n = params.size();
  check_length(op, grads, n, "grads", true);
  check_length(op, state_sums, n, "state_sums", true);
  check_length(op, steps, n, "steps", true);
  OptimizerStep s;
  s.algo = OptimizerAlgo::Adagrad;
  s.hyper.lr = lr;
  s.hyper.weight_decay = weight_decay;
  s.hyper.eps = eps;
  s.hyper.maximize = maximize;
  s.params = params;
  s.grads = grads;
  s.states[0] = state_sums;
  check_params(op, s);
  check_states(op, s, 0, "state_sums");
  s.scalars.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double step = increment_step(op, steps[i], i);
    s.scalars[i] = {lr / (1 + (step - 1) * lr_decay), 0.0};
  }
  run(op, s);
}

}  // namespace kiln
