"""Elementwise ops, promotion, in-place variants, casts and creation functions against the
installed PyTorch on the same device (runs where PyTorch is installed: the GPU machine)."""

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

# seeded_data is an autouse fixture: importing it enables it here.
from torch_compare import (  # noqa: E402, F401
    DEVICES, Const, Fixed, GRAD_DTYPES, HALF_DTYPES, Strided, U, bools, check, check_raises,
    compare, distinct, dtype_name, ints, lib_dtype, reseed, seeded_data, to_kiln, to_torch)
from unary_cases import UNARY as UNARY_CASES  # noqa: E402

reseed(__name__)


def F(lib):
    return lib.nn.functional


# name -> sampling domain (unary_cases.py) of the ops PyTorch has under the same name.
# Piecewise-constant ops (sign, floor, ...) still take part in gradient checks: PyTorch gives
# them zero grads.
UNARY = {name: (low, high) for name, (_, low, high) in UNARY_CASES.items() if hasattr(torch, name)}


def _unary(name):
    return lambda lib, x: getattr(lib, name)(x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, device):
    low, high = UNARY[name]
    check(_unary(name), [U(3, 4, low=low, high=high)], device, dtype)
    check(lambda lib, x: getattr(x, name)(), [Strided(U(4, 3, low=low, high=high))], device,
          dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_integer_empty_and_0d(name, device):
    check(_unary(name), [Fixed(ints(2, 5, low=1, high=6))], device)
    check(_unary(name), [U(0, 3, low=0.5, high=1)], device, grad=False)
    check(_unary(name), [U(low=0.5, high=1.5)], device)


# PyTorch has no in-place isnan_/isinf_/isfinite_.
UNARY_INPLACE = sorted(set(UNARY) - {"isnan", "isinf", "isfinite"})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_inplace(name, dtype, device):
    def fn(lib, x):
        # logical_not_ has no derivative in PyTorch, so it runs outside the graph.
        y = x.detach() * 1.0 if name == "logical_not" else x * 1.0
        return getattr(y, name + "_")()

    low, high = UNARY[name]
    # PyTorch has no derivative for the in-place inverse hyperbolics: values only.
    grad = name not in ("acosh", "asinh", "atanh")
    check(fn, [Strided(U(4, 3, low=low, high=high))], device, dtype, grad=grad)


@pytest.mark.parametrize("device", DEVICES)
def test_python_scalars(device):
    def fn(lib, x, i, b):
        return [x.sum().item(), x.tolist(), x[0, 1].item(), float(x[1, 0]), i.tolist(),
                int(i[0, 0]), i.max().item(), b.tolist(), bool(b[0, 0]), b.any().item(),
                x.dim(), x.numel(), x.size(1), list(x.shape), x.ndim, x.is_floating_point(),
                i.is_floating_point(), x.element_size(), i.int().element_size()]

    specs = (U(2, 3), Fixed(ints(2, 3)), Fixed(bools(2, 3)))
    compare(fn(kiln, *[to_kiln(s, device) for s in specs]),
            fn(torch, *[to_torch(s, device) for s in specs]))


# (id, fn(lib, x), domain)
ACTIVATIONS = [
    ("gelu", lambda lib, x: F(lib).gelu(x), (-3, 3)),
    ("gelu_tanh", lambda lib, x: F(lib).gelu(x, approximate="tanh"), (-3, 3)),
    ("silu", lambda lib, x: F(lib).silu(x), (-3, 3)),
    ("relu6", lambda lib, x: F(lib).relu6(x), (-8, 8)),
    ("elu", lambda lib, x: F(lib).elu(x, alpha=0.7), (-2, 2)),
    ("leaky_relu", lambda lib, x: F(lib).leaky_relu(x, 0.2), (-2, 2)),
    ("softplus", lambda lib, x: F(lib).softplus(x, beta=2.0, threshold=3.0), (-3, 3)),
    ("hardtanh", lambda lib, x: F(lib).hardtanh(x, -0.5, 1.5), (-2, 2)),
    ("mish", lambda lib, x: F(lib).mish(x), (-3, 3)),
    ("hardswish", lambda lib, x: F(lib).hardswish(x), (-4, 4)),
    ("hardsigmoid", lambda lib, x: F(lib).hardsigmoid(x), (-4, 4)),
    ("softsign", lambda lib, x: F(lib).softsign(x), (-2, 2)),
    ("logsigmoid", lambda lib, x: F(lib).logsigmoid(x), (-3, 3)),
    ("sigmoid", lambda lib, x: F(lib).sigmoid(x), (-3, 3)),
    ("tanh", lambda lib, x: F(lib).tanh(x), (-3, 3)),
    ("relu", lambda lib, x: F(lib).relu(x), (-3, 3)),
    ("nan_to_num", lambda lib, x: lib.nan_to_num(lib.log(x), nan=0.5, posinf=2.0,
                                                 neginf=-3.0), (-1, 1)),
    ("dropout_eval", lambda lib, x: F(lib).dropout(x, 0.4, training=False), (-1, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("name,fn,domain", [pytest.param(n, f, d, id=n) for n, f, d in ACTIVATIONS])
def test_activation(name, fn, domain, dtype, device):
    # PyTorch's hardsigmoid/hardswish backward kernels scale by a float32 1/6 even
    # in float64; kiln keeps the input's precision, so those grads differ at 3e-8.
    loose = dtype == "float64" and name in ("hardsigmoid", "hardswish")
    check(fn, [Strided(U(3, 5, low=domain[0], high=domain[1]))], device, dtype,
          tol=(1e-7, 1e-9) if loose else None)


BINARY = [
    ("add", lambda lib, a, b: lib.add(a, b)),
    ("add_alpha", lambda lib, a, b: lib.add(a, b, alpha=2.5)),
    ("sub_alpha", lambda lib, a, b: lib.sub(a, b, alpha=0.5)),
    ("mul", lambda lib, a, b: a * b),
    ("div", lambda lib, a, b: a / b),
    ("pow", lambda lib, a, b: lib.pow(a.abs() + 0.5, b)),
    ("atan2", lambda lib, a, b: lib.atan2(a, b)),
    ("maximum", lambda lib, a, b: lib.maximum(a, b)),
    ("minimum", lambda lib, a, b: lib.minimum(a, b)),
    ("fmax", lambda lib, a, b: lib.fmax(a, b)),
    ("fmin", lambda lib, a, b: lib.fmin(a, b)),
    ("rsub", lambda lib, a, b: 1.5 - a * b),
    ("rdiv", lambda lib, a, b: 2.0 / (a.abs() + 0.5) + b),
    ("rpow", lambda lib, a, b: 2.0 ** a + b),
    ("pow_scalar", lambda lib, a, b: (a.abs() + 0.5) ** 1.7 + b ** 2),
    ("remainder", lambda lib, a, b: lib.remainder(a, b)),
    ("mod_op", lambda lib, a, b: a % b),
    ("fmod", lambda lib, a, b: lib.fmod(a, b)),
    ("fmod_scalar", lambda lib, a, b: lib.fmod(a, -1.5) + a.fmod(0.7) * b),
]
NO_GRAD_BINARY = [
    ("div_floor", lambda lib, a, b: lib.div(a, b, rounding_mode="floor")),
    ("div_trunc", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc")),
    ("floor_divide", lambda lib, a, b: lib.floor_divide(a, b)),
    ("eq", lambda lib, a, b: lib.eq(a, a.round()) | (a == b)),
    ("ne", lambda lib, a, b: a != b),
    ("lt", lambda lib, a, b: lib.lt(a, b)),
    ("le", lambda lib, a, b: a <= b),
    ("gt", lambda lib, a, b: lib.gt(a, 0.5)),
    ("ge", lambda lib, a, b: lib.ge(a, b)),
    ("logical_and", lambda lib, a, b: lib.logical_and(a > 0, b)),
    ("logical_or", lambda lib, a, b: lib.logical_or(a > 0, b > 0.5)),
    ("logical_xor", lambda lib, a, b: lib.logical_xor(a, b > 0)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in BINARY + NO_GRAD_BINARY])
def test_binary_broadcast(fn, dtype, device):
    grad = any(fn is f for _, f in BINARY)
    b = U(3, 1, 4)
    b[np.abs(b) < 0.2] = 0.7  # keeps divisors away from zero
    check(fn, [U(2, 4), b], device, dtype, grad=grad)
    check(fn, [Strided(U(4, 3)), Strided(distinct(4, 3), "step")], device, dtype, grad=grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in BINARY + NO_GRAD_BINARY])
def test_binary_0d_and_empty(fn, device):
    grad = any(fn is f for _, f in BINARY)
    check(fn, [U(low=0.5, high=2), U(low=0.5, high=2)], device, grad=grad)
    check(fn, [U(0, 3, low=0.5), U(1, 3, low=0.5)], device, grad=False)


ALIASES = [
    ("absolute", lambda lib, a, b: lib.absolute(a) + lib.negative(b)),
    ("arctan2", lambda lib, a, b: lib.arctan2(a, b)),
    ("multiply_subtract", lambda lib, a, b: lib.subtract(lib.multiply(a, b), b, alpha=2)),
    ("divide_true_divide", lambda lib, a, b: lib.divide(a, b) + lib.true_divide(b, a)),
    ("clip", lambda lib, a, b: lib.clip(a, -0.5, 0.9) + b),
    ("comparisons", lambda lib, a, b: [lib.greater(a, b), lib.greater_equal(a, b),
                                       lib.less(a, b), lib.less_equal(a, b),
                                       lib.not_equal(a, b)]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in ALIASES])
def test_aliases(fn, device):
    check(fn, [U(3, 4, low=0.5), U(4, low=0.5)], device)


INT_BINARY = [
    ("add", lambda lib, a, b: a + b),
    ("mul", lambda lib, a, b: a * b),
    ("sub", lambda lib, a, b: a - b),
    ("true_div", lambda lib, a, b: a / b),
    ("floor_divide", lambda lib, a, b: a // b),
    ("remainder", lambda lib, a, b: a % b),
    ("fmod", lambda lib, a, b: lib.fmod(a, b) + lib.fmod(a, -3)),
    ("div_trunc", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc")),
    ("pow", lambda lib, a, b: lib.pow(a % 5, b.abs())),  # stays inside int8
    ("maximum", lambda lib, a, b: lib.maximum(a, b)),
    ("bitwise_and", lambda lib, a, b: lib.bitwise_and(a, b)),
    ("bitwise_or", lambda lib, a, b: a | b),
    ("bitwise_xor", lambda lib, a, b: a ^ b),
    ("bitwise_not", lambda lib, a, b: ~a + lib.bitwise_not(b)),
    ("compare", lambda lib, a, b: (a < b) ^ (a >= 2)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8])
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in INT_BINARY])
def test_integer_binary(fn, dtype, device):
    a = ints(3, 4, low=0 if dtype == np.uint8 else -7, high=8, dtype=dtype)
    b = ints(4, low=1, high=4, dtype=dtype)
    check(fn, [Fixed(a), Fixed(b)], device)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_bitwise_and_logical(device):
    a, b = Fixed(bools(3, 4)), Fixed(bools(4))
    for fn in [lambda lib, a, b: a & b, lambda lib, a, b: a | b, lambda lib, a, b: a ^ b,
               lambda lib, a, b: ~a, lambda lib, a, b: lib.logical_and(a, b),
               lambda lib, a, b: a + b, lambda lib, a, b: a * 3, lambda lib, a, b: a == b]:
        check(fn, [a, b], device)


# (id, fn, inputs): result dtypes follow PyTorch's category and wrapped-number rules.
PROMOTION = [
    ("int64+float32", lambda lib, a, b: a + b,
     [Fixed(ints(3)), Fixed(U(3).astype(np.float32))]),
    ("float32+float64", lambda lib, a, b: a * b,
     [Fixed(U(3).astype(np.float32)), Fixed(U(3))]),
    ("int32+int64", lambda lib, a, b: a - b, [Fixed(ints(3, dtype=np.int32)), Fixed(ints(3))]),
    ("uint8+int8", lambda lib, a, b: a + b,
     [Fixed(ints(3, low=0, dtype=np.uint8)), Fixed(ints(3, dtype=np.int8))]),
    ("bool+int16", lambda lib, a, b: a + b, [Fixed(bools(3)), Fixed(ints(3, dtype=np.int16))]),
    ("int+python_float", lambda lib, a, b: a * 2.5 + b, [Fixed(ints(3)), Fixed(ints(3))]),
    ("int32+python_int", lambda lib, a, b: a + 1000, [Fixed(ints(3, dtype=np.int32)),
                                                       Fixed(ints(3))]),
    ("uint8+python_int", lambda lib, a, b: a + 3, [Fixed(ints(3, low=0, dtype=np.uint8)),
                                                    Fixed(ints(3))]),
    ("float16+python_float", lambda lib, a, b: a + 1.25,
     [Fixed(U(3).astype(np.float16)), Fixed(ints(3))]),
    ("bool+python_bool", lambda lib, a, b: a & True, [Fixed(bools(3)), Fixed(ints(3))]),
    ("float32+0d_float64", lambda lib, a, b: a + b,
     [Fixed(U(3).astype(np.float32)), Fixed(U())]),
    ("int64+0d_float64", lambda lib, a, b: a + b, [Fixed(ints(3)), Fixed(U())]),
    ("int8+0d_int64", lambda lib, a, b: a * b, [Fixed(ints(3, dtype=np.int8)), Fixed(ints())]),
    ("0d_int+0d_float32", lambda lib, a, b: a + b,
     [Fixed(ints()), Fixed(U().astype(np.float32))]),
    ("int_div_int", lambda lib, a, b: a / b, [Fixed(ints(3)), Fixed(ints(3, low=1))]),
    ("where_promotes", lambda lib, a, b: lib.where(a > 0, a, b),
     [Fixed(ints(3)), Fixed(U(3).astype(np.float32))]),
    ("where_scalar", lambda lib, a, b: lib.where(a > 0, a, 0.5), [Fixed(ints(3)), Fixed(U(3))]),
    ("clamp_int_float", lambda lib, a, b: lib.clamp(a, min=0.5), [Fixed(ints(3)),
                                                                 Fixed(ints(3))]),
    ("compare_mixed", lambda lib, a, b: a < b, [Fixed(ints(3)), Fixed(U(3))]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn,inputs", [pytest.param(f, i, id=n) for n, f, i in PROMOTION])
def test_type_promotion(fn, inputs, device):
    check(fn, inputs, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_mixed_precision_gradients(dtype, device):
    other = "float64" if dtype == "float32" else "float32"

    def fn(lib, a, b):
        return a * b.to(lib_dtype(lib, other)) + a.to(lib_dtype(lib, other)).sin()

    check(fn, [U(3, 4), U(4)], device, dtype)


TERNARY = [
    ("where", lambda lib, a, b, c: lib.where(c > 0, a, b)),
    ("where_method", lambda lib, a, b, c: a.where(c > 0, b)),
    ("where_scalar", lambda lib, a, b, c: lib.where(c > 0, a, -1.5) + b),
    ("lerp_scalar", lambda lib, a, b, c: lib.lerp(a, b, 0.3) + c),
    ("lerp_tensor", lambda lib, a, b, c: lib.lerp(a, b, c)),
    ("clamp", lambda lib, a, b, c: lib.clamp(a, -0.5, 0.7) + b * c),
    ("clamp_min", lambda lib, a, b, c: a.clamp(min=-0.3) + b * c),
    ("clamp_max", lambda lib, a, b, c: lib.clip(a, max=0.4) + b * c),
    ("clamp_tensor", lambda lib, a, b, c: lib.clamp(a, min=b, max=b + c.abs())),
    ("maximum_chain", lambda lib, a, b, c: lib.maximum(lib.minimum(a, b), c)),
    ("addcmul", lambda lib, a, b, c: lib.addcmul(a, b, c, value=-0.5)),
    ("addcdiv", lambda lib, a, b, c: a.addcdiv(b, c.abs() + 0.5, value=2)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in TERNARY])
def test_ternary_broadcast(fn, dtype, device):
    check(fn, [U(2, 3, 4), Strided(U(3, 4), "step"), U(3, 1)], device, dtype)


INPLACE = [
    ("add_", lambda y, lib, b: y.add_(b, alpha=0.5)),
    ("sub_", lambda y, lib, b: y.sub_(b)),
    ("mul_", lambda y, lib, b: y.mul_(b)),
    ("div_", lambda y, lib, b: y.div_(b.abs() + 0.5)),
    ("pow_", lambda y, lib, b: y.abs_().add_(0.5).pow_(b)),
    ("iadd", lambda y, lib, b: y.__iadd__(b)),
    ("imul_scalar", lambda y, lib, b: y.__imul__(2.5)),
    ("itruediv", lambda y, lib, b: y.__itruediv__(b.abs() + 1)),
    ("relu_", lambda y, lib, b: y.relu_()),
    ("sin_", lambda y, lib, b: y.sin_()),
    ("exp_", lambda y, lib, b: y.exp_()),
    ("sigmoid_", lambda y, lib, b: y.sigmoid_()),
    ("tanh_", lambda y, lib, b: y.tanh_()),
    ("neg_", lambda y, lib, b: y.neg_()),
    ("masked_fill_", lambda y, lib, b: y.masked_fill_(b > 0, -2.0)),
    ("addcmul_", lambda y, lib, b: y.addcmul_(b, b, value=0.5)),
    ("addcdiv_", lambda y, lib, b: y.addcdiv_(b, b.abs() + 1)),
    ("lerp_", lambda y, lib, b: y.lerp_(b, 0.3)),
    ("clamp_", lambda y, lib, b: y.clamp_(-0.5, 0.5)),
    ("fmod_", lambda y, lib, b: y.fmod_(1.5)),
    ("square_", lambda y, lib, b: y.square_()),
    ("view_inplace", lambda y, lib, b: y.transpose(0, 1)[1].mul_(3.0)),
]

# Ops that overwrite a tensor inside the graph: PyTorch gives the overwritten values a zero
# gradient (Note [Overwritten history] in ops/elementwise.cpp).
OVERWRITE = [
    ("fill_", lambda y, lib, b: y.mul_(b).fill_(1.5)),
    ("zero_", lambda y, lib, b: y.zero_().add_(b)),
    ("copy_", lambda y, lib, b: y.copy_(b)),
    ("lt_", lambda y, lib, b: y.lt_(b)),
    ("ge_", lambda y, lib, b: y.ge_(0.5)),
    ("eq_", lambda y, lib, b: y.eq_(y.round())),
    ("le_", lambda y, lib, b: y.le_(b)),
    ("gt_", lambda y, lib, b: y.gt_(0.1)),
    ("ne_", lambda y, lib, b: y.ne_(b)),
    ("view_fill_", lambda y, lib, b: y[1].fill_(2.0)),
    ("view_copy_", lambda y, lib, b: y[:, 1].copy_(b[:3] * 2)),
    ("copy_cast", lambda y, lib, b: y.copy_(b.double()) if y.dtype == lib.float32
     else y.copy_(b.float())),
]


OVERWRITE_BY_NAME = dict(OVERWRITE)


def _inplace_fn(op):
    def fn(lib, a, b):
        y = a * 1.0
        r = op(y, lib, b)
        return y, r
    return fn


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("op", [pytest.param(f, id=n) for n, f in INPLACE])
def test_inplace(op, dtype, device):
    check(_inplace_fn(op), [U(3, 4), U(4)], device, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("op", [pytest.param(f, id=n) for n, f in OVERWRITE])
def test_inplace_overwrite(op, dtype, device):
    check(_inplace_fn(op), [U(3, 4), U(4)], device, dtype, grad=False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
@pytest.mark.parametrize("op", [pytest.param(f, id=n) for n, f in OVERWRITE])
def test_inplace_overwrite_gradient(op, dtype, device):
    # copy_cast's gradient to b passes through a float32 tensor: float32's tolerance.
    tol = (1e-6, 1e-6) if op is OVERWRITE_BY_NAME["copy_cast"] else None
    check(_inplace_fn(op), [U(3, 4), U(4)], device, dtype, tol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_integer_and_rejections(device):
    check(lambda lib, a, b: a.add_(b).mul_(2).floor_divide_(3), [Fixed(ints(3, 4)),
                                                               Fixed(ints(4))], device)
    check(lambda lib, a, b: a.bitwise_xor_(b), [Fixed(ints(3, 4)), Fixed(ints(4))], device)
    check(lambda lib, a, b: [(a * 1).logical_and_(b > 0), (a * 1).type_as(b.int())],
          [Const(U(3, 4)), Const(U(4))], device)
    check(lambda lib, a, b: (a * 1.0).clamp_(-0.5, 0.5) + b, [U(3, 4), U(4)], device, grad=False)
    check_raises(lambda lib, a, b: a.add_(b), [Fixed(ints(3)), Fixed(U(3))], device)
    check_raises(lambda lib, a, b: a.add_(b), [Fixed(U(4)), Fixed(U(3, 4))], device)
    check_raises(lambda lib, a, b: a.add_(b), [U(3), U(3)], device)


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_inplace_gradient(device):
    check(lambda lib, a: (a * 1.0).clamp_(-0.5, 0.5), [U(3, 4)], device)


DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
               "float32", "float64"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", DTYPE_NAMES)
def test_cast_between_all_dtypes(src, device):
    # Non-negative values below 100 survive every integer dtype; fractions test truncation.
    values = np.concatenate([U(7, low=0, high=100), [0.0, 1.0, 2.5]])
    x = Fixed(values)
    for dst in DTYPE_NAMES:
        check(lambda lib, t: t.to(lib_dtype(lib, src)).to(lib_dtype(lib, dst)), [x], device)
        check(lambda lib, t: t.to(lib_dtype(lib, src)).to(dtype=lib_dtype(lib, dst)) + 0,
              [x], device)
    check(lambda lib, t: [t.to(lib_dtype(lib, src)).float(), t.double().half().int().bool(),
                          t.long().byte().short().char()], [x], device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES)
def test_cast_gradients(dtype, device):
    check(lambda lib, a: (a.to(lib.float16).to(lib.float64) * a.double()).to(a.dtype),
          [U(3, 4)], device, dtype, tol=(2e-3, 2e-3))
    check(lambda lib, a: a.double().float() * 2, [Strided(U(3, 4))], device, dtype)


def _creation(lib, dev):
    f32, i32, f64 = lib.float32, lib.int32, lib.float64
    base = lib.tensor([[1, 2, 3]], dtype=i32, device=dev)
    return [
        lib.zeros(2, 3, device=dev), lib.zeros((2, 3), dtype=i32, device=dev),
        lib.ones(4, device=dev), lib.ones((), dtype=lib.bool, device=dev),
        lib.zeros(0, 3, device=dev),
        lib.full((2, 3), 1.5, device=dev), lib.full((2,), 7, device=dev),
        lib.full((2, 2), True, device=dev), lib.full((3,), 2, dtype=f64, device=dev),
        lib.arange(5, device=dev), lib.arange(1, 4, 0.5, device=dev),
        lib.arange(0, 1, 0.1, device=dev), lib.arange(10, 0, -3, device=dev),
        lib.arange(2.0, 5.0, device=dev), lib.arange(4, dtype=f32, device=dev),
        lib.linspace(0, 1, 7, device=dev), lib.linspace(-2, 3, 1, device=dev),
        lib.linspace(3, -1, 5, dtype=f64, device=dev),
        lib.eye(3, device=dev), lib.eye(2, 4, dtype=i32, device=dev),
        lib.zeros_like(base), lib.ones_like(base, dtype=f32), lib.full_like(base, 2.7),
        lib.full_like(base, 2.7, dtype=f64), base.new_zeros(2), base.new_ones((1, 2)),
        base.new_full((2,), 4), lib.tensor(3.5, device=dev), lib.tensor([], device=dev),
        lib.tensor([True, False], device=dev), lib.scalar_tensor(2, device=dev),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_creation(device):
    compare(_creation(kiln, device), _creation(torch, device))
    for lib_args in [((2, 3),), ((0, 4),), ((),), (2, 0)]:
        k = kiln.empty(*lib_args, device=device)
        t = torch.empty(*lib_args, device=device)
        assert tuple(k.shape) == tuple(t.shape) and dtype_name(k.dtype) == dtype_name(t.dtype)
    for k, t in [(kiln.empty_like(kiln.ones(2, 3, dtype=kiln.int16, device=device)),
                  torch.empty_like(torch.ones(2, 3, dtype=torch.int16, device=device))),
                 (kiln.rand(2, 3, device=device), torch.rand(2, 3, device=device))]:
        assert tuple(k.shape) == tuple(t.shape) and dtype_name(k.dtype) == dtype_name(t.dtype)
        assert k.device.type == t.device.type


@pytest.mark.parametrize("device", DEVICES)
def test_creation_requires_grad_and_default_dtype(device):
    for lib in (kiln, torch):
        x = lib.zeros(2, device=device, requires_grad=True)
        assert x.requires_grad and x.is_leaf
        assert lib.get_default_dtype() == lib.float32
    compare(kiln.tensor([1, 2.5], device=device), torch.tensor([1, 2.5], device=device))
    compare(kiln.tensor([[1, 2]], device=device), torch.tensor([[1, 2]], device=device))
    compare(kiln.tensor(np.float32(2.0), device=device),
            torch.tensor(np.float32(2.0), device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_isclose_allclose_equal(device):
    a = Fixed(np.array([1.0, 0.0, np.inf, -np.inf, np.nan, 1.0, 100.0]))
    b = Fixed(np.array([1.0 + 1e-9, 1e-9, np.inf, np.inf, np.nan, 1.1, 100.0005]))
    for kw in [{}, {"equal_nan": True}, {"rtol": 0.2, "atol": 0.0}]:
        check(lambda lib, x, y: [lib.isclose(x, y, **kw), x.isclose(y, **kw)], [a, b], device)
        check(lambda lib, x, y: lib.allclose(x, y, **kw) and x.allclose(x), [a, b], device)
    check(lambda lib, x, y: [x.equal(y), lib.equal(x, x[:2])], [a, b], device)
    # equal(x, x) with NaN in x: PyTorch's CUDA equal short-cuts on identity (True), its
    # CPU equal compares elements (False); kiln compares elements on every device.
    c = Fixed(np.array([1.0, -2.0, np.inf]))
    check(lambda lib, x: [lib.equal(x, x), lib.equal(x, x.clone())], [c], device)
    check(lambda lib, x, y: lib.isclose(x, y, atol=1), [Fixed(ints(3, 4)), Fixed(ints(3, 4))],
          device)
