// The per-element update rules of kiln.optim, shared by the CPU kernel and the CUDA
// multi-tensor kernel so both backends compute the same values. They follow PyTorch's
// single-tensor algorithms operation by operation (lerp for the first moment, addcmul /
// addcdiv orderings), with A the accumulation type (float for float/half, double for double).
#pragma once

#include "ops/math/host_device.h"
#include "ops/optim.h"

namespace kiln::optim_math {

// Constants of one step in the accumulation type. `sign` is -1 under maximize (negation is
// exact); a weight decay that is off is 0, and p * 0 adds nothing to a finite gradient.
template <typename A>
struct Consts {
  A sign, weight_decay, eps, neg_lr;
  A beta1_c, beta2, beta2_c;  // Adam: 1 - beta1, beta2, 1 - beta2
  A param_scale;              // Adam: 1 - lr * weight_decay when decoupled, else 1
  A momentum;                 // SGD, RMSprop
  A alpha, alpha_c;           // RMSprop: alpha, 1 - alpha
};

template <typename A>
Consts<A> make_consts(const OptimizerStep& s) {
  const OptimizerHyper& h = s.hyper;
  const bool decoupled = s.algo == OptimizerAlgo::Adam && h.decoupled_weight_decay;
  Consts<A> c;
  c.sign = A(h.maximize ? -1 : 1);
  c.weight_decay = A(decoupled ? 0.0 : h.weight_decay);
  c.eps = A(h.eps);
  c.neg_lr = A(-h.lr);
  c.beta1_c = A(1 - h.beta1);
  c.beta2 = A(h.beta2);
  c.beta2_c = A(1 - h.beta2);
  c.param_scale = A(decoupled ? 1 - h.lr * h.weight_decay : 1.0);
  c.momentum = A(h.momentum);
  c.alpha = A(h.alpha);
  c.alpha_c = A(1 - h.alpha);
  return c;
}

template <typename A>
KILN_HD A sqrt_of(A x) {
#if defined(__CUDA_ARCH__)
  return sqrt(x);
#else
  return __builtin_sqrt(x);
#endif
}
template <>
KILN_HD float sqrt_of(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return __builtin_sqrtf(x);
#endif
}

// self + w (end - self): PyTorch's lerp for w < 0.5 (Adam's and RMSprop's usual 1 - beta);
// for larger w it differs from PyTorch's other-end formula by rounding only. No branch, so
// CPU loops vectorize.
template <typename A>
KILN_HD A lerp(A self, A end, A w) {
  return self + w * (end - self);
}

// keep/take: {0, 1} for a new momentum buffer (it becomes the gradient; PyTorch's first step),
// else {momentum, 1 - dampening}. The new buffer must hold finite values (zeros).
template <typename A, bool Momentum, bool Nesterov>
KILN_HD void sgd(A& p, A g, A& buf, const Consts<A>& c, A keep, A take) {
  g = g * c.sign + c.weight_decay * p;
  if constexpr (Momentum) {
    buf = buf * keep + take * g;
    if constexpr (Nesterov) {
      g = g + c.momentum * buf;
    } else {
      g = buf;
    }
  }
  p = p + c.neg_lr * g;
}

template <typename A, bool Amsgrad>
KILN_HD void adam(A& p, A g, A& m, A& v, A& vmax, const Consts<A>& c, A step_size,
                  A bias_correction2_sqrt) {
  g = g * c.sign;
  p = p * c.param_scale;
  g = g + c.weight_decay * p;
  m = lerp(m, g, c.beta1_c);
  v = v * c.beta2 + c.beta2_c * g * g;
  A second = v;
  if constexpr (Amsgrad) {
    vmax = vmax < v ? v : vmax;
    second = vmax;
  }
  const A denom = sqrt_of(second) / bias_correction2_sqrt + c.eps;
  p = p + (-step_size) * (m / denom);
}

template <typename A, bool Centered, bool Momentum>
KILN_HD void rmsprop(A& p, A g, A& square_avg, A& buf, A& grad_avg, const Consts<A>& c) {
  g = g * c.sign + c.weight_decay * p;
  square_avg = square_avg * c.alpha + c.alpha_c * g * g;
  A avg;
  if constexpr (Centered) {
    grad_avg = lerp(grad_avg, g, c.alpha_c);
    avg = sqrt_of(square_avg + A(-1) * grad_avg * grad_avg);
  } else {
    avg = sqrt_of(square_avg);
  }
  avg = avg + c.eps;
  if constexpr (Momentum) {
    buf = buf * c.momentum + g / avg;
    p = p + c.neg_lr * buf;
  } else {
    p = p + c.neg_lr * (g / avg);
  }
}

template <typename A>
KILN_HD void adagrad(A& p, A g, A& sum, const Consts<A>& c, A clr) {
  g = g * c.sign + c.weight_decay * p;
  sum = sum + g * g;
  const A std = sqrt_of(sum) + c.eps;
  p = p + (-clr) * (g / std);
}

}  // namespace kiln::optim_math
