// Front ends and backward rules of the binary elementwise ops.
#include "ops/binary.h"

#include "autograd/function.h"
#include "core/error.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/unary.h"

namespace kiln {

namespace {

using Grads = std::vector<Tensor>;

bool saves_inputs(BinaryOp op) { return op != BinaryOp::add && op != BinaryOp::sub; }
bool saves_result(BinaryOp op) { return op == BinaryOp::div || op == BinaryOp::pow; }

Tensor mask_as(const Tensor& mask, const Tensor& like) { return to_dtype(mask, like.dtype()); }

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
      Tensor ga = mul(g, mul(b, pow(a, sub(b, Scalar(1)))));
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

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = binary_compute(op, a, b);
  if (is_floating(out.dtype()) && needs_grad({a, b})) {
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
  return out;
}

const Tensor& binary_(BinaryOp op, const Tensor& self, const Tensor& other) {
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

Tensor rsub(const Tensor& a, Scalar b) { return sub(wrapped_scalar(b), a); }
Tensor rdiv(const Tensor& a, Scalar b) { return div(wrapped_scalar(b), a); }
Tensor rpow(const Tensor& a, Scalar b) { return pow(wrapped_scalar(b), a); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
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
  return out;
}

Tensor lerp(const Tensor& a, const Tensor& end, const Tensor& weight) {
  return add(a, mul(weight, sub(end, a)));
}

}  // namespace kiln
