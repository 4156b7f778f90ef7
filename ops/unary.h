// Unary elementwise ops (the table is ops/op_table.h) and their in-place variants.
#pragma once

#include <optional>
#include <string>

#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace kiln {

// Any unary op from the table, with promotion and autograd.
Tensor unary(UnaryOp op, const Tensor& x, const UnaryParams& p = {});
const Tensor& unary_(UnaryOp op, const Tensor& self, const UnaryParams& p = {});

#define KILN_DECLARE_UNARY(name, kind, autocast) \
  Tensor name(const Tensor& x);                  \
  const Tensor& name##_(const Tensor& x);
KILN_UNARY_SIMPLE_OPS(KILN_DECLARE_UNARY)
#undef KILN_DECLARE_UNARY

// approximate: "none" or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
// Tensor bounds broadcast against x.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);

// psi^(n)(x), n >= 0 (n = 0: digamma); polygamma_(self, n) is PyTorch's x.polygamma_(n).
Tensor polygamma(int64_t n, const Tensor& x);
const Tensor& polygamma_(const Tensor& self, int64_t n);
// The modified Bessel function of the first kind of order 1 (torch.special.i1).
Tensor special_i1(const Tensor& x);

// Composites of table ops (no kernels of their own). frac(x) = x - trunc(x), floating
// dtypes only; deg2rad / rad2deg scale by pi/180 or 180/pi (integers give float32).
Tensor frac(const Tensor& x);
const Tensor& frac_(const Tensor& self);
Tensor deg2rad(const Tensor& x);
const Tensor& deg2rad_(const Tensor& self);
Tensor rad2deg(const Tensor& x);
const Tensor& rad2deg_(const Tensor& self);

}  // namespace kiln
