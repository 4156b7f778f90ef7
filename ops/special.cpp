// Composite elementwise math (ops/special.h). Each op is a few table ops, so it runs
// on every device and autograd differentiates it through its parts; where a part
// would produce NaN in a masked-off branch, its input is replaced first so the
// gradient stays finite.
#include "ops/special.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kLn2 = 0.69314718055994530942;

Tensor as_float(const Tensor& x) { return to_dtype(x, to_floating(x.dtype())); }

// Both operands in the float dtype of their result_type. A Python number becomes a
// 0-d tensor of that dtype on the other operand's device, so its value is not
// rounded through float32 and it never widens the result.
// hypot and logaddexp(2) have floating kernels only in PyTorch: integer operands raise
// there instead of promoting.
void check_floating_result(const Tensor& a, const Tensor& b, const char* op) {
  const DType dt = result_type(a, b);
  KILN_CHECK(is_floating(dt), NotImplemented, "[", op, "] not implemented for '",
             scalar_type_name(dt), "' (input ", a.dtype(), ", other ", b.dtype(),
             "): needs a floating point operand");
}

std::pair<Tensor, Tensor> float_operands(const Tensor& a, const Tensor& b, const char* op) {
  const Device dev = common_device({a, b}, op);
  broadcast_shapes(a.sizes(), b.sizes(), op);  // raises under this op's name
  const DType dt = to_floating(result_type(a, b));
  auto convert = [&](const Tensor& t) {
    if (!t.impl()->wrapped_number_) return to_dtype(t, dt);
    return to_device(to_dtype(detach(t), dt), dev);
  };
  return {convert(a), convert(b)};
}

Tensor like(const Tensor& t, double v) { return full({}, Scalar(v), t.dtype(), t.device()); }

}  // namespace

Tensor sgn(const Tensor& x) { return sign(x); }
const Tensor& sgn_(const Tensor& self) { return sign_(self); }

Tensor positive(const Tensor& x) {
  KILN_CHECK(x.dtype() != DType::Bool, Runtime,
             "[positive] The `+` operator, on a bool tensor is not supported.");
  return x;
}

Tensor fix(const Tensor& x) { return trunc(x); }
const Tensor& fix_(const Tensor& self) { return trunc_(self); }

Tensor logit(const Tensor& x, std::optional<double> eps) {
  Tensor v = as_float(x);
  if (eps) v = clamp(v, Scalar(*eps), Scalar(1.0 - *eps));
  return log(div(v, rsub(v, Scalar(1))));
}

const Tensor& logit_(const Tensor& self, std::optional<double> eps) {
  return assign_inplace(self, {}, "logit_", [eps](const Tensor& s) { return logit(s, eps); });
}

Tensor sinc(const Tensor& x) {
  Tensor v = as_float(x);
  Tensor at_zero = eq(v, Scalar(0));
  Tensor pix = mul(where(at_zero, like(v, 1), v), Scalar(kPi));
  return where(at_zero, like(v, 1), div(sin(pix), pix));
}

const Tensor& sinc_(const Tensor& self) {
  return assign_inplace(self, {}, "sinc_", [](const Tensor& s) { return sinc(s); });
}

Tensor special_ndtr(const Tensor& x) {
  // erfc keeps the lower tail accurate where 1 + erf would cancel.
  return mul(erfc(mul(as_float(x), Scalar(-kSqrt1_2))), Scalar(0.5));
}

Tensor special_ndtri(const Tensor& p) {
  Tensor v = as_float(p);
  Tensor out;
  {
    GradModeGuard no_grad(false);
    // In float64, 2p - 1 is exact for float32 p and for p >= 1/4, so sqrt(2) erfinv(2p - 1)
    // is accurate there. Below 1/4 it loses p's low bits (and is -inf once 2p - 1 rounds
    // to -1), so the lower tail takes three Newton steps on log ndtr(x) = log p, whose
    // lower tail is accurate, from that value or, where it is infinite, from the
    // asymptotic root of ndtr(x) ~ pdf(x) / |x|.
    constexpr double kHalfLog2Pi = 0.91893853320467274178;
    Tensor q = to_dtype(v, DType::Float64);
    Tensor x = mul(erfinv(sub(mul(q, Scalar(2)), Scalar(1))), Scalar(kSqrt2));
    Tensor tail = logical_and(lt(q, Scalar(0.25)), gt(q, Scalar(0)));
    Tensor safe_q = where(tail, q, like(q, 0.1));
    Tensor log_q = log(safe_q);
    Tensor m2log = mul(log_q, Scalar(-2));
    Tensor guess = neg(sqrt(sub(sub(m2log, log(m2log)), Scalar(2 * kHalfLog2Pi))));
    Tensor t = where(tail, where(isinf(x), guess, x), like(q, -1));
    for (int i = 0; i < 3; ++i) {
      Tensor log_cdf = special_log_ndtr(t);
      // ndtr(t) / pdf(t), the inverse slope of log ndtr.
      Tensor ratio = exp(add(add(log_cdf, mul(mul(t, t), Scalar(0.5))), Scalar(kHalfLog2Pi)));
      t = sub(t, mul(sub(log_cdf, log_q), ratio));
    }
    out = to_dtype(where(tail, t, x), v.dtype());
  }
  if (needs_grad({v})) {
    // d ndtri / dp = 1 / pdf(ndtri(p)) = sqrt(2 pi) exp(x^2 / 2).
    record("special_ndtri", {v}, {out},
           [sy = SavedTensor::output(out, 0)](const std::vector<Tensor>& g,
                                              Node& self) -> std::vector<Tensor> {
             Tensor y = sy.unpack(self);
             constexpr double kSqrt2Pi = 2.50662827463100050242;
             return {mul(g[0], mul(exp(mul(mul(y, y), Scalar(0.5))), Scalar(kSqrt2Pi)))};
           });
  }
  return out;
}

Tensor special_log_ndtr(const Tensor& x) {
  // Below -10, ndtr underflows float32 (and float64 below -37); there log ndtr(x) =
  // -x^2/2 - log(-x) - log(2 pi)/2 + log(sum_k (-1)^k (2k-1)!! x^-2k), twelve terms of
  // the asymptotic series being within 1e-12 at x = -10. Each branch gets a safe input
  // where it is not taken, so neither leaks NaN into the gradient.
  Tensor v = as_float(x);
  Tensor tail = lt(v, Scalar(-10));
  Tensor direct = log(special_ndtr(where(tail, like(v, -10), v)));
  Tensor t = where(tail, v, like(v, -20));
  Tensor inv2 = reciprocal(mul(t, t));
  double coef[13];
  coef[0] = 1;
  for (int k = 1; k <= 12; ++k) coef[k] = -coef[k - 1] * (2 * k - 1);
  Tensor series = like(v, coef[12]);
  for (int k = 11; k >= 0; --k) series = add(mul(series, inv2), Scalar(coef[k]));
  constexpr double kHalfLog2Pi = 0.91893853320467274178;
  Tensor asym =
      sub(sub(log(series), log(neg(t))), add(mul(mul(t, t), Scalar(0.5)), Scalar(kHalfLog2Pi)));
  return where(tail, asym, direct);
}

Tensor special_entr(const Tensor& x) {
  Tensor v = as_float(x);
  Tensor pos = gt(v, Scalar(0));
  Tensor safe = where(pos, v, like(v, 1));
  Tensor inner = where(eq(v, Scalar(0)), like(v, 0), like(v, -INFINITY));
  return where(isnan(v), v, where(pos, neg(mul(safe, log(safe))), inner));
}

namespace {
// x * f(y), 0 where x == 0 and y is not NaN (y is replaced there so an infinite f(y) never
// meets the zero). PyTorch's gradients: x gets g * f(y) (0 where g is 0), except 0 where x == 0
// and y is outside f's domain (y <= domain_edge); y gets g * x * f'(y).
template <typename F, typename DF>
Tensor x_times(const Tensor& a, const Tensor& b, const char* op, double domain_edge, F f, DF df) {
  auto [x, y] = float_operands(a, b, op);
  Tensor out;
  {
    GradModeGuard no_grad(false);
    Tensor zero_x = logical_and(eq(x, Scalar(0)), logical_not(isnan(y)));
    out = where(zero_x, like(x, 0), mul(x, f(where(zero_x, like(y, 1), y))));
  }
  if (needs_grad({x, y})) {
    record(op, {x, y}, {out},
           [sx = SavedTensor(x), sy = SavedTensor(y), domain_edge, f, df](
               const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
             Tensor in = sx.unpack(), other = sy.unpack();
             Tensor zero_g = logical_and(eq(g[0], Scalar(0)), logical_not(isnan(other)));
             Tensor gx = where(zero_g, like(g[0], 0), mul(g[0], f(other)));
             Tensor dead = logical_and(eq(in, Scalar(0)), le(other, Scalar(domain_edge)));
             return {where(dead, like(gx, 0), gx), mul(g[0], mul(in, df(other)))};
           });
  }
  return out;
}
}  // namespace

Tensor xlogy(const Tensor& x, const Tensor& y) {
  return x_times(
      x, y, "xlogy", 0.0, [](const Tensor& t) { return log(t); },
      [](const Tensor& t) { return reciprocal(t); });
}

const Tensor& xlogy_(const Tensor& self, const Tensor& other) {
  return assign_inplace(self, {other}, "xlogy_", [&](const Tensor& s) { return xlogy(s, other); });
}

Tensor special_xlog1py(const Tensor& x, const Tensor& y) {
  return x_times(
      x, y, "xlog1py", -1.0, [](const Tensor& t) { return log1p(t); },
      [](const Tensor& t) { return reciprocal(add(t, Scalar(1))); });
}

namespace {
// max(a, b) + log1p(base^-|a - b|) / ln(base); equal infinities give themselves
// (inf - inf would be NaN).
Tensor log_add(const Tensor& a, const Tensor& b, const char* op, bool base2) {
  check_floating_result(a, b, op);
  auto [x, y] = float_operands(a, b, op);
  Tensor same_inf = logical_and(isinf(x), eq(x, y));
  Tensor d = neg(abs(sub(where(same_inf, like(x, 0), x), where(same_inf, like(y, 0), y))));
  Tensor tail = base2 ? div(log1p(exp2(d)), Scalar(kLn2)) : log1p(exp(d));
  return where(same_inf, x, add(maximum(x, y), tail));
}
}  // namespace

Tensor logaddexp(const Tensor& a, const Tensor& b) { return log_add(a, b, "logaddexp", false); }
Tensor logaddexp2(const Tensor& a, const Tensor& b) { return log_add(a, b, "logaddexp2", true); }

Tensor hypot(const Tensor& a, const Tensor& b) {
  check_floating_result(a, b, "hypot");
  auto [x, y] = float_operands(a, b, "hypot");
  return sqrt(add(mul(x, x), mul(y, y)));
}

const Tensor& hypot_(const Tensor& self, const Tensor& other) {
  return assign_inplace(self, {other}, "hypot_", [&](const Tensor& s) { return hypot(s, other); });
}

Tensor copysign(const Tensor& a, const Tensor& b) {
  auto [x, y] = float_operands(a, b, "copysign");
  Tensor out;
  {
    GradModeGuard no_grad(false);
    Tensor magnitude = abs(x);
    out = where(signbit(y), neg(magnitude), magnitude);
  }
  // PyTorch's rule: input gets g * out / input (0 where input is 0), other gets zeros.
  if (needs_grad({x, y})) {
    record("copysign", {x, y}, {out},
           [sx = SavedTensor(x), sy = SavedTensor::output(out, 0)](
               const std::vector<Tensor>& g, Node& self) -> std::vector<Tensor> {
             Tensor in = sx.unpack(), res = sy.unpack(self);
             Tensor at_zero = eq(in, Scalar(0));
             Tensor ratio = where(at_zero, like(in, 0), div(res, where(at_zero, like(in, 1), in)));
             return {mul(g[0], ratio), zeros_like(g[0])};
           });
  }
  return out;
}

const Tensor& copysign_(const Tensor& self, const Tensor& other) {
  return assign_inplace(self, {other}, "copysign_",
                        [&](const Tensor& s) { return copysign(s, other); });
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  KILN_CHECK(x.dtype() == values.dtype(), Runtime,
             "[heaviside] heaviside is not yet implemented for tensors with different dtypes: "
             "input is ",
             x.dtype(), ", values is ", values.dtype());
  Tensor out;
  {
    GradModeGuard no_grad(false);
    out = where(eq(x, Scalar(0)), values, to_dtype(gt(x, Scalar(0)), x.dtype()));
  }
  if (is_floating(out.dtype()) && needs_grad({x, values})) {
    record("heaviside", {x, values}, {out},
           [](const std::vector<Tensor>&, Node&) -> std::vector<Tensor> {
             fail(ErrorKind::Runtime,
                  "[heaviside] the derivative for 'heaviside' is not "
                  "implemented.");
           });
  }
  return out;
}

const Tensor& heaviside_(const Tensor& self, const Tensor& values) {
  return assign_inplace(self, {values}, "heaviside_",
                        [&](const Tensor& s) { return heaviside(s, values); });
}

Tensor ldexp(const Tensor& input, const Tensor& other) {
  return mul(input, pow(wrapped_scalar(Scalar(2.0)), other));
}

const Tensor& ldexp_(const Tensor& self, const Tensor& other) {
  return assign_inplace(self, {other}, "ldexp_", [&](const Tensor& s) { return ldexp(s, other); });
}

Tensor float_power(const Tensor& input, const Tensor& exponent) {
  const Device dev = common_device({input, exponent}, "float_power");
  auto wide = [dev](const Tensor& t) {
    return t.impl()->wrapped_number_ ? to_device(to_dtype(detach(t), DType::Float64), dev)
                                     : to_dtype(t, DType::Float64);
  };
  return pow(wide(input), wide(exponent));
}

const Tensor& float_power_(const Tensor& self, const Tensor& exponent) {
  KILN_CHECK(self.dtype() == DType::Float64, Runtime,
             "[float_power_] the base given to "
             "float_power_ has dtype ",
             self.dtype(),
             " but the operation's result requires "
             "dtype float64");
  return assign_inplace(self, {exponent}, "float_power_",
                        [&](const Tensor& s) { return float_power(s, exponent); });
}

Tensor clamp_min(const Tensor& x, Scalar min) { return clamp(x, min, std::nullopt); }
Tensor clamp_min(const Tensor& x, const Tensor& min) { return clamp(x, min, Tensor()); }
Tensor clamp_max(const Tensor& x, Scalar max) { return clamp(x, std::nullopt, max); }
Tensor clamp_max(const Tensor& x, const Tensor& max) { return clamp(x, Tensor(), max); }

Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert) {
  // assume_unique only lets PyTorch pick a faster algorithm; the answer is the same.
  (void)assume_unique;
  common_device({elements, test_elements}, "isin");
  GradModeGuard no_grad(false);
  // Every element against every test value: one broadcast comparison, then any.
  Tensor hits = eq(unsqueeze(elements, -1), flatten(test_elements));
  Tensor found = any(hits, std::vector<int64_t>{-1});
  return invert ? logical_not(found) : found;
}

Tensor isneginf(const Tensor& x) { return logical_and(isinf(x), lt(x, Scalar(0))); }
Tensor isposinf(const Tensor& x) { return logical_and(isinf(x), gt(x, Scalar(0))); }
Tensor isreal(const Tensor& x) { return full(x.sizes(), Scalar(true), DType::Bool, x.device()); }

}  // namespace kiln
