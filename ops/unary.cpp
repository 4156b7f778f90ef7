// Front ends and backward rules of the unary elementwise ops.
#include "ops/unary.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2_Pi = 0.79788456080286535588;
constexpr double kSqrtPi_2 = 0.88622692545275801365;

// Which saved values a rule reads; the others are not kept alive.
bool saves_result(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp: case UnaryOp::exp2: case UnaryOp::expm1: case UnaryOp::sqrt:
    case UnaryOp::rsqrt: case UnaryOp::reciprocal: case UnaryOp::tan: case UnaryOp::tanh:
    case UnaryOp::sigmoid: case UnaryOp::relu: case UnaryOp::elu: case UnaryOp::erfinv:
      return true;
    default:
      return false;
  }
}

bool saves_input(UnaryOp op) {
  switch (op) {
    // Gradients that need neither value: x.eq_(x.round()) must not find x modified.
    case UnaryOp::neg: case UnaryOp::sign: case UnaryOp::floor: case UnaryOp::ceil:
    case UnaryOp::round: case UnaryOp::trunc:
      return false;
    default:
      return !saves_result(op);
  }
}

Tensor mask(const Tensor& m, const Tensor& like) { return to_dtype(m, like.dtype()); }

Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y,
                      const UnaryParams& p) {
  // Without a graph of the backward (no create_graph), activations take one fused
  // kernel; with one, the composite rules below keep double backward working.
  const bool fused = !GradMode::is_enabled();
  auto grad = [&g](BinaryOp fn, const Tensor& v) { return binary_compute(fn, g, v); };
  switch (op) {
    case UnaryOp::neg: return neg(g);
    case UnaryOp::abs: return mul(g, sign(x));
    case UnaryOp::sign:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
      return zeros_like(g);
    case UnaryOp::exp: return mul(g, y);
    case UnaryOp::exp2: return mul(g, mul(y, kLn2));
    case UnaryOp::log: return div(g, x);
    case UnaryOp::log2: return div(g, mul(x, kLn2));
    case UnaryOp::log10: return div(g, mul(x, kLn10));
    case UnaryOp::log1p: return div(g, add(x, 1));
    case UnaryOp::expm1: return mul(g, add(y, 1));
    case UnaryOp::sqrt: return div(g, mul(y, 2));
    case UnaryOp::rsqrt: return mul(g, mul(mul(y, mul(y, y)), -0.5));
    case UnaryOp::reciprocal: return neg(mul(g, mul(y, y)));
    case UnaryOp::sin: return mul(g, cos(x));
    case UnaryOp::cos: return neg(mul(g, sin(x)));
    case UnaryOp::tan: return mul(g, add(mul(y, y), 1));
    case UnaryOp::tanh: return fused ? grad(BinaryOp::tanh_backward, y) : mul(g, rsub(mul(y, y), 1));
    case UnaryOp::sigmoid:
      return fused ? grad(BinaryOp::sigmoid_backward, y) : mul(g, mul(y, rsub(y, 1)));
    case UnaryOp::erf: return mul(g, mul(exp(neg(mul(x, x))), kTwoOverSqrtPi));
    case UnaryOp::erfc: return mul(g, mul(exp(neg(mul(x, x))), -kTwoOverSqrtPi));
    case UnaryOp::erfinv: return mul(g, mul(exp(mul(y, y)), kSqrtPi_2));
    case UnaryOp::lgamma: return mul(g, digamma(x));
    case UnaryOp::digamma: return mul(g, polygamma(1, x));
    case UnaryOp::polygamma: return mul(g, polygamma(static_cast<int64_t>(p.a) + 1, x));
    case UnaryOp::i0: return mul(g, special_i1(x));
    case UnaryOp::i1: {
      // i1'(x) = i0(x) - i1(x) / x, whose limit at 0 is 1/2; x is replaced there so
      // the division never makes a NaN that the mask would multiply by zero.
      Tensor at_zero = eq(x, 0);
      Tensor safe = where(at_zero, ones_like(x), x);
      return mul(g, where(at_zero, full_like(x, 0.5), sub(i0(x), div(special_i1(x), safe))));
    }
    case UnaryOp::relu: return fused ? grad(BinaryOp::relu_backward, y) : mul(g, mask(gt(y, 0), g));
    case UnaryOp::square: return mul(g, mul(x, 2));
    case UnaryOp::asin: return div(g, sqrt(rsub(mul(x, x), 1)));
    case UnaryOp::acos: return neg(div(g, sqrt(rsub(mul(x, x), 1))));
    case UnaryOp::atan: return div(g, add(mul(x, x), 1));
    case UnaryOp::sinh: return mul(g, cosh(x));
    case UnaryOp::cosh: return mul(g, sinh(x));
    case UnaryOp::asinh: return div(g, sqrt(add(mul(x, x), 1)));
    case UnaryOp::acosh: return div(g, sqrt(mul(sub(x, 1), add(x, 1))));
    case UnaryOp::atanh: return div(g, rsub(mul(x, x), 1));
    case UnaryOp::gelu: {
      if (fused) return grad(BinaryOp::gelu_backward, x);
      Tensor cdf = mul(add(erf(mul(x, kSqrt1_2)), 1), 0.5);
      Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), kInvSqrt2Pi);
      return mul(g, add(cdf, mul(x, pdf)));
    }
    case UnaryOp::gelu_tanh: {
      if (fused) return grad(BinaryOp::gelu_tanh_backward, x);
      Tensor x2 = mul(x, x);
      Tensor inner = mul(add(x, mul(mul(x2, x), 0.044715)), kSqrt2_Pi);
      Tensor th = tanh(inner);
      Tensor dinner = mul(add(mul(x2, 3 * 0.044715), 1), kSqrt2_Pi);
      Tensor left = mul(add(th, 1), 0.5);
      Tensor right = mul(mul(mul(x, rsub(mul(th, th), 1)), dinner), 0.5);
      return mul(g, add(left, right));
    }
    case UnaryOp::silu: {
      if (fused) return grad(BinaryOp::silu_backward, x);
      Tensor s = sigmoid(x);
      return mul(g, mul(s, add(mul(x, rsub(s, 1)), 1)));
    }
    case UnaryOp::leaky_relu:
      return where(gt(x, 0), g, mul(g, p.a));
    case UnaryOp::elu:
      return where(gt(y, 0), g, mul(g, add(y, p.a)));
    case UnaryOp::softplus: {
      Tensor bx = mul(x, p.a);
      return where(gt(bx, p.b), g, mul(g, sigmoid(bx)));
    }
    case UnaryOp::clamp: {
      // Gradient flows where x lies inside the bounds (never through NaN).
      Tensor keep = p.has_a ? ge(x, p.a) : le(x, p.b);
      if (p.has_a && p.has_b) keep = logical_and(keep, le(x, p.b));
      return mul(g, mask(keep, g));
    }
    case UnaryOp::nan_to_num:
      return mul(g, mask(isfinite(x), g));
    default:
      fail(ErrorKind::Runtime, "[", op_name(op), "] is not differentiable");
  }
}

}  // namespace

namespace {
// Whether op's autocast column in ops/op_table.h names a policy.
bool autocasts(UnaryOp op) {
  static constexpr bool listed[] = {
#define KILN_UNARY_AUTOCASTS(name, kind, autocast) AutocastPolicy::autocast != AutocastPolicy::None,
      KILN_UNARY_OPS(KILN_UNARY_AUTOCASTS)
#undef KILN_UNARY_AUTOCASTS
  };
  return listed[static_cast<int>(op)];
}
}  // namespace

namespace {
// Simple ops record their input only; parametric ones also their UnaryParams, in field order
// (runtime/op_runners.cpp reads them back).
Tensor traced(tracing::OpScope& scope, UnaryOp op, Tensor out, const Tensor& x,
              const UnaryParams& p) {
  switch (op) {
#define KILN_PARAM_CASE(name, kind, autocast) case UnaryOp::name:
    KILN_UNARY_PARAM_OPS(KILN_PARAM_CASE)
#undef KILN_PARAM_CASE
    return scope.out(out, x, p.a, p.b, p.c, p.has_a, p.has_b);
    default:
      return scope.out(out, x);
  }
}
}  // namespace

Tensor unary(UnaryOp op, const Tensor& x, const UnaryParams& p) {
  tracing::OpScope scope(op_name(op));
  if (autocast_active() && autocasts(op))
    if (auto ac = autocast_args(op_name(op), {x}))
      return traced(scope, op, unary(op, (*ac)[0], p), x, p);
  Tensor out = unary_compute(op, x, p);
  if (is_floating(out.dtype()) && needs_grad({x})) {
    SavedTensor sx = saves_input(op) ? SavedTensor(x) : SavedTensor();
    SavedTensor sy = saves_result(op) ? SavedTensor::output(out, 0) : SavedTensor();
    record(op_name(op), {x}, {out}, [op, p, sx, sy](const Grads& g, Node& self) -> Grads {
      return {unary_backward(op, g[0], sx.unpack(), sy.unpack(self), p)};
    });
  }
  return traced(scope, op, out, x, p);
}

const Tensor& unary_(UnaryOp op, const Tensor& self, const UnaryParams& p) {
  AutocastSuspend in_place;  // only out-of-place ops autocast
  const std::string name = str_cat(op_name(op), "_");
  return apply_inplace(
      self, {}, name.c_str(), [&](const Tensor& s) { return unary(op, s, p); },
      [&] { unary_compute_into(self, op, self, p); });
}

#define KILN_DEFINE_UNARY(name, kind, autocast)                           \
  Tensor name(const Tensor& x) { return unary(UnaryOp::name, x); }        \
  const Tensor& name##_(const Tensor& x) { return unary_(UnaryOp::name, x); }
KILN_UNARY_SIMPLE_OPS(KILN_DEFINE_UNARY)
#undef KILN_DEFINE_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", Value,
             "[gelu] approximate must be 'none' or 'tanh', got '", approximate, "'");
  return unary(approximate == "none" ? UnaryOp::gelu : UnaryOp::gelu_tanh, x);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  UnaryParams p;
  p.a = negative_slope;
  return unary(UnaryOp::leaky_relu, x, p);
}

Tensor elu(const Tensor& x, double alpha) {
  UnaryParams p;
  p.a = alpha;
  return unary(UnaryOp::elu, x, p);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  UnaryParams p;
  p.a = beta;
  p.b = threshold;
  return unary(UnaryOp::softplus, x, p);
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  double big = std::numeric_limits<double>::max();
  switch (x.dtype()) {
    case DType::Float32: big = std::numeric_limits<float>::max(); break;
    case DType::Float16: big = 65504.0; break;
    case DType::BFloat16: big = 3.3895313892515355e38; break;
    default: break;
  }
  UnaryParams p;
  p.a = nan.value_or(0.0);
  p.b = posinf.value_or(big);
  p.c = neginf.value_or(-big);
  return unary(UnaryOp::nan_to_num, x, p);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  KILN_CHECK(min || max, Runtime, "[clamp] At least one of 'min' or 'max' must not be None");
  // A float bound on an integer tensor promotes, as in PyTorch.
  bool float_bound = (min && min->is_floating()) || (max && max->is_floating());
  Tensor in = float_bound && !is_floating(x.dtype()) ? to_dtype(x, to_floating(x.dtype())) : x;
  UnaryParams p;
  if (min) {
    p.a = min->to_double();
    p.has_a = true;
  }
  if (max) {
    p.b = max->to_double();
    p.has_b = true;
  }
  return unary(UnaryOp::clamp, in, p);
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  Tensor out = x;
  if (min.defined()) out = maximum(out, min);
  if (max.defined()) out = minimum(out, max);
  return out;
}

Tensor polygamma(int64_t n, const Tensor& x) {
  KILN_CHECK(n >= 0, Runtime, "[polygamma] polygamma(n, x) does not support negative n, got n = ",
             n);
  if (n == 0) return digamma(x);
  UnaryParams p;
  p.a = static_cast<double>(n);
  return unary(UnaryOp::polygamma, x, p);
}

const Tensor& polygamma_(const Tensor& self, int64_t n) {
  return assign_inplace(self, {}, "polygamma_", [n](const Tensor& s) { return polygamma(n, s); });
}

Tensor special_i1(const Tensor& x) { return unary(UnaryOp::i1, x); }

Tensor frac(const Tensor& x) {
  // NotImplementedError, as PyTorch's dtype dispatch raises.
  KILN_CHECK(is_floating(x.dtype()), NotImplemented, "[frac] not implemented for '",
             scalar_type_name(x.dtype()), "': frac needs a floating point tensor");
  // trunc has a zero gradient, so the gradient of x - trunc(x) is the identity, as in PyTorch.
  return sub(x, trunc(x));
}

const Tensor& frac_(const Tensor& self) {
  KILN_CHECK(is_floating(self.dtype()), NotImplemented, "[frac_] not implemented for '",
             scalar_type_name(self.dtype()), "': frac_ needs a floating point tensor");
  return assign_inplace(self, {}, "frac_", [](const Tensor& s) { return frac(s); });
}

// The factors as Python floats (wrapped numbers): integers and bools promote to float32,
// floating inputs keep their dtype.
constexpr double kDegToRad = 0.017453292519943295769236907684886127;
constexpr double kRadToDeg = 57.295779513082320876798154814105170;

Tensor deg2rad(const Tensor& x) { return mul(x, Scalar(kDegToRad)); }
Tensor rad2deg(const Tensor& x) { return mul(x, Scalar(kRadToDeg)); }

const Tensor& deg2rad_(const Tensor& self) {
  return assign_inplace(self, {}, "deg2rad_", [](const Tensor& s) { return deg2rad(s); });
}

const Tensor& rad2deg_(const Tensor& self) {
  return assign_inplace(self, {}, "rad2deg_", [](const Tensor& s) { return rad2deg(s); });
}

}  // namespace kiln
