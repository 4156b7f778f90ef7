// Multi-tensor optimizer steps (kiln.optim's fast path): one call updates every
// parameter of a param group in place, with PyTorch's single-tensor algorithms.
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"

namespace kiln {

enum class OptimizerAlgo : int8_t { SGD, Adam, RMSprop, Adagrad };

// Hyper-parameters of one step; each algorithm reads its own fields.
struct OptimizerHyper {
  double lr = 0, weight_decay = 0, eps = 0;
  double beta1 = 0, beta2 = 0;                    // Adam
  double momentum = 0, dampening = 0, alpha = 0;  // SGD (momentum, dampening), RMSprop
  bool maximize = false, amsgrad = false, decoupled_weight_decay = false;
  bool nesterov = false, centered = false;
};

constexpr int kOptimizerStates = 3;

// The kernels' view of one step on one device. params[i], grads[i] and states[k][i] are
// contiguous tensors of one floating dtype and shape (dtypes may differ between i). A
// state slot's list is empty when the algorithm does not use it:
//   SGD:     0 momentum_buffer (momentum != 0)
//   Adam:    0 exp_avg, 1 exp_avg_sq, 2 max_exp_avg_sq (amsgrad)
//   RMSprop: 0 square_avg, 1 momentum_buffer (momentum > 0), 2 grad_avg (centered)
//   Adagrad: 0 sum
// scalars[i] are host-computed per-tensor values:
//   SGD: {momentum, 1 - dampening}, or {0, 1} for a new (zero) buffer, which then becomes
//        the gradient
//   Adam: {lr / bias_correction1, sqrt(bias_correction2)}
//   Adagrad: {lr / (1 + (step - 1) lr_decay), 0}
// Adam with capturable=True leaves scalars empty and gives device_steps instead: 0-d float32
// step counters on the params' device, already incremented, from which the kernel derives the
// same two values on the device (so a CUDA graph replay sees each new step).
struct OptimizerStep {
  OptimizerAlgo algo = OptimizerAlgo::SGD;
  OptimizerHyper hyper;
  std::vector<Tensor> params, grads;
  std::array<std::vector<Tensor>, kOptimizerStates> states;
  std::vector<std::array<double, 2>> scalars;
  std::vector<Tensor> device_steps;
};

// The steps below update params and state tensors in place; lists are index-aligned.
// `steps` are the 0-d CPU float step counters: each is incremented, and its new value gives
// that parameter's bias correction on the host (no device synchronization); such a step
// raises while a CUDA graph captures on the params' device, as the graph would keep the
// captured bias corrections. fused_adam_ also takes steps on the params' (CUDA) device,
// PyTorch's capturable=True: they are incremented and read on the device. Parameters may
// live on several devices and have several dtypes; a param, its grad and its state share
// device, dtype and shape.

void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<Tensor>& steps,
                 double lr, double beta1, double beta2, double weight_decay, double eps,
                 bool amsgrad, bool maximize, bool decoupled_weight_decay);

// Undefined entries of momentum_buffers get a new buffer equal to the (decayed) gradient,
// PyTorch's first momentum step; returns the buffers (empty when momentum is 0).
std::vector<Tensor> fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& momentum_buffers, double lr,
                               double momentum, double dampening, double weight_decay,
                               bool nesterov, bool maximize);

void fused_rmsprop_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& square_avgs,
                    const std::vector<Tensor>& momentum_buffers,
                    const std::vector<Tensor>& grad_avgs, const std::vector<Tensor>& steps,
                    double lr, double alpha, double eps, double weight_decay, double momentum,
                    bool centered, bool maximize);

void fused_adagrad_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& state_sums, const std::vector<Tensor>& steps,
                    double lr, double lr_decay, double weight_decay, double eps, bool maximize);

}  // namespace kiln
