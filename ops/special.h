// PyTorch's remaining elementwise math (torch.xlogy, torch.logaddexp, torch.special.*),
// composed from table ops (ops/op_table.h), so every device runs them through kernels
// it already has and autograd follows from the parts.
#pragma once

#include <optional>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// Float-valued ops: integer and bool operands compute in the default float dtype, except
// for hypot and logaddexp(2), which raise NotImplementedError for them, as PyTorch does.

// sign for real dtypes (torch.sgn); +x (bool is a RuntimeError); trunc (torch.fix).
Tensor sgn(const Tensor& x);
const Tensor& sgn_(const Tensor& self);
Tensor positive(const Tensor& x);
Tensor fix(const Tensor& x);
const Tensor& fix_(const Tensor& self);

// log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
const Tensor& logit_(const Tensor& self, std::optional<double> eps = std::nullopt);
// sin(pi x) / (pi x), 1 at 0.
Tensor sinc(const Tensor& x);
const Tensor& sinc_(const Tensor& self);
// The standard normal CDF, its inverse and its log (torch.special.ndtr/ndtri/log_ndtr),
// accurate in the lower tails (ndtri computes in float64).
Tensor special_ndtr(const Tensor& x);
Tensor special_ndtri(const Tensor& p);
Tensor special_log_ndtr(const Tensor& x);
// -x log x (0 at 0, -inf below).
Tensor special_entr(const Tensor& x);

// x * log(y) and x * log1p(y), 0 where x == 0 unless y is NaN.
Tensor xlogy(const Tensor& x, const Tensor& y);
const Tensor& xlogy_(const Tensor& self, const Tensor& other);
Tensor special_xlog1py(const Tensor& x, const Tensor& y);
// log(exp(a) + exp(b)) and log2(2^a + 2^b) without overflow.
Tensor logaddexp(const Tensor& a, const Tensor& b);
Tensor logaddexp2(const Tensor& a, const Tensor& b);
// sqrt(a^2 + b^2).
Tensor hypot(const Tensor& a, const Tensor& b);
const Tensor& hypot_(const Tensor& self, const Tensor& other);
// |a| with the sign bit of b (gradient for a only, as PyTorch).
Tensor copysign(const Tensor& a, const Tensor& b);
const Tensor& copysign_(const Tensor& self, const Tensor& other);
// 0 where x < 0, values where x == 0, 1 where x > 0; x and values share a dtype.
// Not differentiable: its backward raises, as PyTorch's.
Tensor heaviside(const Tensor& x, const Tensor& values);
const Tensor& heaviside_(const Tensor& self, const Tensor& values);
// input * 2^other.
Tensor ldexp(const Tensor& input, const Tensor& other);
const Tensor& ldexp_(const Tensor& self, const Tensor& other);
// pow computed in float64 (float_power_ needs a float64 self).
Tensor float_power(const Tensor& input, const Tensor& exponent);
const Tensor& float_power_(const Tensor& self, const Tensor& exponent);
// clamp with one bound.
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, Scalar max);
Tensor clamp_max(const Tensor& x, const Tensor& max);

// Predicates (bool results). isin: whether each element occurs in test_elements.
Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique = false,
            bool invert = false);
Tensor isneginf(const Tensor& x);
Tensor isposinf(const Tensor& x);
Tensor isreal(const Tensor& x);

}  // namespace kiln
