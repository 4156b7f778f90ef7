// Front end of the multi-tensor optimizer steps: argument checks, step counters and bias
// corrections on the host, then one kernel call per device (ops/optim.h).
#include "ops/optim.h"

#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/graph_capture.h"
#include "core/profiler.h"
#include "ops/backend.h"
#include "ops/binary.h"
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

// One state list argument of a step; `used` false means the option that needs it is off.
struct StateList {
  const std::vector<Tensor>& tensors;
  const char* name;
  bool used;
};

// The step over params, grads and the state lists (slot k is states[k]; an unused list leaves
// its slot empty), after checking every list's length and every tensor against its parameter.
OptimizerStep checked_step(const char* op, OptimizerAlgo algo, const OptimizerHyper& hyper,
                           const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           std::initializer_list<StateList> states) {
  const size_t n = params.size();
  check_length(op, grads, n, "grads", true);
  for (const StateList& st : states) check_length(op, st.tensors, n, st.name, st.used);
  OptimizerStep s;
  s.algo = algo;
  s.hyper = hyper;
  s.params = params;
  s.grads = grads;
  int slot = 0;
  for (const StateList& st : states) {
    if (st.used) s.states[slot] = st.tensors;
    ++slot;
  }
  check_params(op, s);
  slot = 0;
  for (const StateList& st : states) check_states(op, s, slot++, st.name);
  return s;
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

// Increments every step counter (after checking that there is one per parameter); returns the
// new values. Host counters are baked into a captured CUDA graph (Note [CUDA graphs]).
std::vector<double> increment_steps(const char* op, const std::vector<Tensor>& steps,
                                    const std::vector<Tensor>& params) {
  const size_t n = params.size();
  check_length(op, steps, n, "steps", true);
  for (const Tensor& p : params)
    KILN_CHECK(!p.device().is_cuda() || !graph_capture_underway(p.device().index), Runtime, "[",
               op, "] the optimizer's step counts live on the host, so a CUDA graph would "
               "replay the captured step's values forever; construct the optimizer with "
               "capturable=True (Adam, AdamW) to capture its step");
  std::vector<double> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = increment_step(op, steps[i], i);
  return values;
}

// capturable=True: step += 1 on the device for every s.device_steps[i], each a one-element
// float32 tensor on params[i]'s device.
void increment_device_steps(const char* op, const OptimizerStep& s) {
  check_length(op, s.device_steps, s.params.size(), "steps", true);
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Tensor& step = s.device_steps[i];
    KILN_CHECK(step.defined() && step.device() == s.params[i].device() && step.numel() == 1 &&
                   step.dtype() == DType::Float32 && step.is_contiguous(),
               Runtime, "[", op, "] with steps on the GPU (capturable=True), steps[", i,
               "] must be a one-element float32 tensor on ", s.params[i].device(), ", got ",
               step.defined()
                   ? str_cat(step.dtype(), " on ", step.device(), " with shape ", step.sizes())
                   : std::string("None"));
    add_(step, wrapped_scalar(Scalar(1.0)), Scalar(1));
  }
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
      if (!s.device_steps.empty()) part.device_steps.push_back(s.device_steps[i]);
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
  profiler::RecordScope profile("_fused_adam_");
  const char* op = "_fused_adam_";
  OptimizerHyper h;
  h.lr = lr;
  h.beta1 = beta1;
  h.beta2 = beta2;
  h.weight_decay = weight_decay;
  h.eps = eps;
  h.amsgrad = amsgrad;
  h.maximize = maximize;
  h.decoupled_weight_decay = decoupled_weight_decay;
  OptimizerStep s = checked_step(op, OptimizerAlgo::Adam, h, params, grads,
                                 {{exp_avgs, "exp_avgs", true},
                                  {exp_avg_sqs, "exp_avg_sqs", true},
                                  {max_exp_avg_sqs, "max_exp_avg_sqs", amsgrad}});
  if (!steps.empty() && steps.front().defined() && steps.front().device().is_cuda()) {
    s.device_steps = steps;
    increment_device_steps(op, s);
    run(op, s);
    return;
  }
  for (double step : increment_steps(op, steps, params)) {
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    s.scalars.push_back({lr / bias_correction1, std::sqrt(bias_correction2)});
  }
  run(op, s);
}

std::vector<Tensor> fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& momentum_buffers, double lr,
                               double momentum, double dampening, double weight_decay,
                               bool nesterov, bool maximize) {
  profiler::RecordScope profile("_fused_sgd_");
  const char* op = "_fused_sgd_";
  const size_t n = params.size();
  const bool use_buffers = momentum != 0;
  check_length(op, momentum_buffers, n, "momentum_buffers", use_buffers);
  OptimizerHyper h;
  h.lr = lr;
  h.momentum = momentum;
  h.dampening = dampening;
  h.weight_decay = weight_decay;
  h.nesterov = nesterov;
  h.maximize = maximize;
  // The buffers are checked once the missing (None) ones are made.
  OptimizerStep s = checked_step(op, OptimizerAlgo::SGD, h, params, grads, {});
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
  profiler::RecordScope profile("_fused_rmsprop_");
  const char* op = "_fused_rmsprop_";
  OptimizerHyper h;
  h.lr = lr;
  h.alpha = alpha;
  h.eps = eps;
  h.weight_decay = weight_decay;
  h.momentum = momentum;
  h.centered = centered;
  h.maximize = maximize;
  OptimizerStep s = checked_step(op, OptimizerAlgo::RMSprop, h, params, grads,
                                 {{square_avgs, "square_avgs", true},
                                  {momentum_buffers, "momentum_buffers", momentum > 0},
                                  {grad_avgs, "grad_avgs", centered}});
  increment_steps(op, steps, params);
  run(op, s);
}

void fused_adagrad_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& state_sums, const std::vector<Tensor>& steps,
                    double lr, double lr_decay, double weight_decay, double eps, bool maximize) {
  profiler::RecordScope profile("_fused_adagrad_");
  const char* op = "_fused_adagrad_";
  OptimizerHyper h;
  h.lr = lr;
  h.weight_decay = weight_decay;
  h.eps = eps;
  h.maximize = maximize;
  OptimizerStep s = checked_step(op, OptimizerAlgo::Adagrad, h, params, grads,
                                 {{state_sums, "state_sums", true}});
  for (double step : increment_steps(op, steps, params))
    s.scalars.push_back({lr / (1 + (step - 1) * lr_decay), 0.0});
  run(op, s);
}

}  // namespace kiln
