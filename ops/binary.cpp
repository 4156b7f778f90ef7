// Front ends and backward rules of the binary elementwise ops.
#include "ops/binary.h"

#include <iterator>

#include "autograd/function.h"
#include "core/error.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/autocast_policy.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

bool saves_inputs(BinaryOp op) { return op != BinaryOp::add && op != BinaryOp::sub; }
bool saves_result(BinaryOp op) { return op == BinaryOp::div || op == BinaryOp::pow; }

// Whether op's autocast column in ops/op_table.h names a policy (pow, atan2): the column, not
// the op's name, decides.
bool autocasts(BinaryOp op) {
  static constexpr bool kAutocasts[] = {
#define KILN_BINARY_AUTOCASTS(name, kind, autocast) \
  AutocastPolicy::autocast != AutocastPolicy::None,
      KILN_BINARY_OPS(KILN_BINARY_AUTOCASTS)
#undef KILN_BINARY_AUTOCASTS
  };
  const auto i = static_cast<size_t>(op);
  return i < std::size(kAutocasts) && kAutocasts[i];  // the internal gradient ops never autocast
}

Tensor mask_as(const Tensor& mask, const Tensor& like) { return to_dtype(mask, like.dtype()); }

// The value of a wrapped Python number (a 0-d CPU tensor of its kind).
Scalar wrapped_value(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float64: return Scalar(*static_cast<const double*>(t.data_ptr()));
    case DType::Int64: return Scalar(*static_cast<const int64_t*>(t.data_ptr()));
    default: return Scalar(*static_cast<const bool*>(t.data_ptr()));
  }
}

// Gradients of a and b given the output gradient g. Shapes may be the
// broadcast shape: the engine reduces them.
Grads binary_backward(BinaryOp op, const Tensor& g, const Tensor& a, const Tensor& b,
                      const Tensor& y) {
  switch (op) {
    case BinaryOp::add:
      return {g, g};
    case BinaryOp::sub:
      return {g, neg(g)};
    case BinaryOp::mul:
      return {mul(g, b), mul(g, a)};
    case BinaryOp::div:
      return {div(g, b), neg(mul(g, div(y, b)))};
    case BinaryOp::pow: {
      // A Python-number exponent stays a double on the host: b - 1 computed
      // as two wrapped numbers would round to the default dtype (float32).
      Tensor ga;
      if (b.impl()->wrapped_number_) {
        const Scalar e = wrapped_value(b);
        const Scalar e_minus_1 =
            e.is_floating() ? Scalar(e.to_double() - 1) : Scalar(e.to_int() - 1);
        ga = mul(g, mul(pow(a, e_minus_1), e));
      } else {
        ga = mul(g, mul(b, pow(a, sub(b, Scalar(1)))));
      }
      // d/db a^b = a^b log a, taken as 0 where a == 0 (PyTorch's convention).
      Tensor gb = where(eq(a, Scalar(0)), zeros_like(y), mul(g, mul(y, log(a))));
      return {ga, gb};
    }
    case BinaryOp::maximum:
    case BinaryOp::minimum: {
      // Ties split the gradient evenly, as PyTorch does.
      Tensor wins = op == BinaryOp::maximum ? gt(a, b) : lt(a, b);
      Tensor half = mul(mask_as(eq(a, b), g), Scalar(0.5));
      Tensor wa = add(mask_as(wins, g), half);
      Tensor wb = add(mask_as(logical_not(logical_or(wins, eq(a, b))), g), half);
      return {mul(g, wa), mul(g, wb)};
    }
    case BinaryOp::atan2: {
      Tensor denom = add(mul(a, a), mul(b, b));
      return {mul(g, div(b, denom)), mul(g, div(neg(a), denom))};
    }
    case BinaryOp::remainder:
      return {g, neg(mul(g, floor_divide(a, b)))};
    case BinaryOp::fmod:
      return {g, neg(mul(g, trunc(div(a, b))))};
    case BinaryOp::floor_divide:
      return {zeros_like(g), zeros_like(g)};
    default:
      fail(ErrorKind::Runtime, "[", op_name(op), "] is not differentiable");
  }
}

// nextafter steps to the neighbouring value of the result dtype itself, which the
// kernels' float accumulation of half types cannot do.
void check_nextafter(const Tensor& a, const Tensor& b) {
  const DType dt = result_type(a, b);
  KILN_CHECK(dt == DType::Float32 || dt == DType::Float64, NotImplemented,
             "[nextafter] not implemented for dtype ", dt, " (input ", a.dtype(), ", other ",
             b.dtype(), "): float32 and float64 only");
}

// An integer base raised to a negative Python integer is an error, as in PyTorch; an
// exponent *tensor* is not checked (that would read device values on the host), and
// the kernels give what truncating 1 / base^-e gives: 0, or +-1 for a base of +-1.
void check_integer_pow(const Tensor& a, const Tensor& b) {
  if (!b.impl()->wrapped_number_ || is_floating(b.dtype()) || is_floating(a.dtype())) return;
  if (a.impl()->wrapped_number_) return;
  KILN_CHECK(wrapped_value(b).to_int() >= 0, Runtime,
             "[pow] Integers to negative integer powers are not allowed.");
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  tracing::OpScope scope(op_name(op));
  if (op == BinaryOp::nextafter) check_nextafter(a, b);
  if (op == BinaryOp::pow) check_integer_pow(a, b);
  if (autocasts(op))
    if (auto ac = autocast_args(op_name(op), {a, b}))
      return scope.out(binary(op, (*ac)[0], (*ac)[1]), a, b);
  Tensor out = binary_compute(op, a, b);
  // needs_grad({a, b}) without copying the two handles into a list: every op runs this.
  if (is_floating(out.dtype()) && GradMode::is_enabled() &&
      (a.requires_grad() || b.requires_grad())) {
    SavedTensor sa, sb, sy;
    if (saves_inputs(op)) {
      sa = SavedTensor(a);
      sb = SavedTensor(b);
    }
    if (saves_result(op)) sy = SavedTensor::output(out, 0);
    record(op_name(op), {a, b}, {out}, [op, sa, sb, sy](const Grads& g, Node& self) -> Grads {
      return binary_backward(op, g[0], sa.unpack(), sb.unpack(), sy.unpack(self));
    });
  }
  return scope.out(out, a, b);
}

const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other) {
  if (op == BinaryOp::nextafter) check_nextafter(self, other);
  if (op == BinaryOp::pow) check_integer_pow(self, other);
  AutocastSuspend in_place;  // only out-of-place ops autocast
  const std::string name = str_cat(op_name(op), "_");
  return apply_inplace(
      self, {other}, name.c_str(), [&](const Tensor& s) { return binary(op, s, other); },
      [&] { binary_compute_into(self, op, self, other); });
}

#define KILN_DEFINE_BINARY(name, kind, autocast)                                  \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(BinaryOp::name, a, b); } \
  Tensor name(const Tensor& a, Scalar b) {                                        \
    return binary(BinaryOp::name, a, wrapped_scalar(b));                          \
  }                                                                               \
  const Tensor& name##_(const Tensor& self, const Tensor& other) {                \
    return binary_(BinaryOp::name, self, other);                                  \
  }                                                                               \
  const Tensor& name##_(const Tensor& self, Scalar other) {                       \
    return binary_(BinaryOp::name, self, wrapped_scalar(other));                  \
  }
KILN_BINARY_OPS(KILN_DEFINE_BINARY)
#undef KILN_DEFINE_BINARY

namespace {
Tensor scaled(const Tensor& b, Scalar alpha) {
  bool one = alpha.is_floating() ? alpha.to_double() == 1.0 : alpha.to_int() == 1;
  if (one) return b;
  KILN_CHECK(!(alpha.is_floating() && !is_floating(b.dtype())), Runtime,
             "[add] For integral input tensors, argument alpha must not be a floating point number.");
  return mul(b, alpha);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return add(a, scaled(b, alpha)); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return sub(a, scaled(b, alpha)); }
const Tensor& add_(const Tensor& self, const Tensor& other, Scalar alpha) {
  return add_(self, scaled(other, alpha));
}
const Tensor& sub_(const Tensor& self, const Tensor& other, Scalar alpha) {
  return sub_(self, scaled(other, alpha));
}

Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode) {
  if (!rounding_mode) return div(a, b);
  if (*rounding_mode == "floor") return floor_divide(a, b);
  KILN_CHECK(*rounding_mode == "trunc", Runtime,
             "[div] expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
             *rounding_mode, "'");
  const DType rt = result_type(a, b);
  Tensor q = trunc(div(a, b));
  return is_floating(rt) ? q : to_dtype(q, rt);
}

const Tensor& div_(const Tensor& self, const Tensor& other,
                   const std::optional<std::string>& rounding_mode) {
  if (!rounding_mode) return div_(self, other);
  return assign_inplace(self, {other}, "div_",
                        [&](const Tensor& s) { return div(s, other, rounding_mode); });
}

Tensor rsub(const Tensor& a, Scalar b) { return sub(wrapped_scalar(b), a); }
Tensor rdiv(const Tensor& a, Scalar b) {
  if (auto ac = autocast_args("rdiv", {a})) return rdiv((*ac)[0], b);
  return div(wrapped_scalar(b), a);
}
// Autocasts through pow.
Tensor rpow(const Tensor& a, Scalar b) { return pow(wrapped_scalar(b), a); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  tracing::OpScope scope("where");
  KILN_CHECK(cond.dtype() == DType::Bool, Runtime,
             "[where] expected condition to be a boolean tensor, but got a tensor with dtype ",
             cond.dtype());
  Device dev = common_device({cond, a, b}, "where");
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(),
                                 "where");
  DType dt = result_type(a, b);
  Tensor out = make_tensor(shape, dt, dev);
  require_kernel(backend(dev).where, "where", dev)(
      out, prepare_operand(cond, DType::Bool, shape, dev), prepare_operand(a, dt, shape, dev),
      prepare_operand(b, dt, shape, dev));
  if (is_floating(dt) && needs_grad({a, b})) {
    SavedTensor sc(cond);
    record("where", {cond, a, b}, {out}, [sc](const Grads& g, Node&) -> Grads {
      Tensor c = sc.unpack();
      Tensor z = zeros({}, g[0].dtype(), g[0].device());
      return {Tensor(), where(c, g[0], z), where(c, z, g[0])};
    });
  }
  return scope.out(out, cond, a, b);
}

Tensor lerp(const Tensor& a, const Tensor& end, const Tensor& weight) {
  return add(a, mul(weight, sub(end, a)));
}

const Tensor& lerp_(const Tensor& self, const Tensor& end, const Tensor& weight) {
  return assign_inplace(self, {end, weight}, "lerp_",
                        [&](const Tensor& s) { return lerp(s, end, weight); });
}

Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value) {
  if (auto ac = autocast_args("addcmul", {input, t1, t2}))
    return addcmul((*ac)[0], (*ac)[1], (*ac)[2], value);
  return add(input, mul(t1, t2), value);
}

Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, Scalar value) {
  if (auto ac = autocast_args("addcdiv", {input, t1, t2}))
    return addcdiv((*ac)[0], (*ac)[1], (*ac)[2], value);
  KILN_CHECK(is_floating(t1.dtype()) || is_floating(t2.dtype()), Runtime,
             "[addcdiv] Integer division with addcdiv is no longer supported, got tensor1 of "
             "dtype ", t1.dtype(), " and tensor2 of dtype ", t2.dtype());
  return add(input, div(t1, t2), value);
}

const Tensor& addcmul_(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value) {
  return assign_inplace(self, {t1, t2}, "addcmul_",
                        [&](const Tensor& s) { return addcmul(s, t1, t2, value); });
}

const Tensor& addcdiv_(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value) {
  return assign_inplace(self, {t1, t2}, "addcdiv_",
                        [&](const Tensor& s) { return addcdiv(s, t1, t2, value); });
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "[isclose] expected both tensors to have the same "
             "dtype, but got ", a.dtype(), " and ", b.dtype());
  KILN_CHECK(rtol >= 0, Runtime, "[isclose] rtol must be greater than or equal to zero, got ",
             rtol);
  KILN_CHECK(atol >= 0, Runtime, "[isclose] atol must be greater than or equal to zero, got ",
             atol);
  GradModeGuard no_grad(false);
  Tensor close = eq(a, b);
  if (a.dtype() == DType::Bool) return close;
  if (equal_nan && is_floating(a.dtype()))
    close = logical_or(close, logical_and(isnan(a), isnan(b)));
  // Integers compare in float64 so the tolerance is not truncated.
  const Tensor x = is_floating(a.dtype()) ? a : to_dtype(a, DType::Float64);
  const Tensor y = is_floating(b.dtype()) ? b : to_dtype(b, DType::Float64);
  Tensor error = abs(sub(x, y));
  Tensor allowed = add(mul(abs(y), rtol), atol);
  // inf - inf is nan and finite - inf is inf: neither counts as close here.
  return logical_or(close, logical_and(isfinite(error), le(error, allowed)));
}

namespace {
bool all_true(const Tensor& t) {
  Tensor r = to_device(all(t), Device());
  return *r.data<bool>();
}
}  // namespace

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all_true(isclose(a, b, rtol, atol, equal_nan));
}

bool equal(const Tensor& a, const Tensor& b) {
  common_device({a, b}, "equal");
  if (a.sizes() != b.sizes()) return false;
  GradModeGuard no_grad(false);
  return all_true(eq(a, b));
}

}  // namespace kiln
