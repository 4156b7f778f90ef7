// Per-element activation gradients (BinaryOp::gelu_backward ...), shared by the
// CPU and CUDA binary kernels so both compute the same values. A is the
// accumulation type (float for float/half types, double for double).
#pragma once

#include <cmath>

#include "ops/math/host_device.h"
#include "ops/op_table.h"

namespace kiln::activation_grad {

// g * f'(v): v is the activation's input for gelu/silu and its result for
// sigmoid, tanh and relu (the values their backward rules save).
template <typename A>
KILN_HD A apply(BinaryOp op, A g, A v) {
  using std::erf;
  using std::exp;
  using std::tanh;
  constexpr A kSqrt1_2 = A(0.70710678118654752440);
  constexpr A kInvSqrt2Pi = A(0.39894228040143267794);
  constexpr A kSqrt2_Pi = A(0.79788456080286535588);
  constexpr A kCubic = A(0.044715);
  switch (op) {
    case BinaryOp::gelu_backward: {
      const A cdf = A(0.5) * (A(1) + erf(v * kSqrt1_2));
      const A pdf = exp(A(-0.5) * v * v) * kInvSqrt2Pi;
      return g * (cdf + v * pdf);
    }
    case BinaryOp::gelu_tanh_backward: {
      const A v2 = v * v;
      const A th = tanh(kSqrt2_Pi * (v + kCubic * v2 * v));
      const A dinner = kSqrt2_Pi * (A(1) + A(3) * kCubic * v2);
      return g * (A(0.5) * (A(1) + th) + A(0.5) * v * (A(1) - th * th) * dinner);
    }
    case BinaryOp::silu_backward: {
      const A s = A(1) / (A(1) + exp(-v));
      return g * s * (A(1) + v * (A(1) - s));
    }
    case BinaryOp::sigmoid_backward: return g * v * (A(1) - v);
    case BinaryOp::tanh_backward: return g * (A(1) - v * v);
    case BinaryOp::relu_backward: return v > A(0) ? g : A(0);
    default: return g;
  }
}

}  // namespace kiln::activation_grad
