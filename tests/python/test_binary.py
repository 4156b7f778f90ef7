"""Binary elementwise ops (ops/op_table.h) against NumPy: values, PyTorch's
type promotion, broadcasting, strides, Python scalars on either side,
in-place variants, errors and float64 gradchecks."""

import operator

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand


# name -> (NumPy reference, positive_rhs): positive_rhs keeps the right operand
# away from 0 (division) and the left one positive (pow's log a).
BINARY = {
    "add": (np.add, False),
    "sub": (np.subtract, False),
    "mul": (np.multiply, False),
    "div": (np.divide, True),
    "floor_divide": (np.floor_divide, True),
    "remainder": (np.remainder, True),
    "fmod": (np.fmod, True),
    "pow": (np.power, True),
    "maximum": (np.maximum, False),
    "minimum": (np.minimum, False),
    "atan2": (np.arctan2, False),
    "eq": (np.equal, False),
    "ne": (np.not_equal, False),
    "lt": (np.less, False),
    "le": (np.less_equal, False),
    "gt": (np.greater, False),
    "ge": (np.greater_equal, False),
    "logical_and": (np.logical_and, False),
    "logical_or": (np.logical_or, False),
    "logical_xor": (np.logical_xor, False),
}
BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
           "bitwise_xor": np.bitwise_xor}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}
DIFFERENTIABLE = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "remainder",
                  "fmod"]


def operands(name, shape_a, shape_b, dtype=np.float64):
    positive = BINARY[name][1]
    a = rand(*shape_a, low=0.5 if positive else -2, high=2.5)
    b = rand(*shape_b, low=0.5 if positive else -2, high=2.5)
    if name in ("eq", "ne", "le", "ge") and a.size and b.size:
        # Some exact ties so equality is exercised.
        flat = np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape))
        a = np.where(rand(*flat.shape) > 0, flat, np.broadcast_to(a, flat.shape)).copy()
    if name in ("remainder", "fmod"):
        a = rand(*shape_a, low=-3, high=3)
    return a.astype(dtype), b.astype(dtype)


def expected_of(name, a, b):
    return BINARY[name][0](a.astype(np.float64), b.astype(np.float64))


def test_table_is_fully_covered():
    table = kiln._C._op_table()
    # nextafter is tested in test_special_math.py (bit-exact, float32/float64 only).
    assert set(table["binary"]) == set(BINARY) | set(BITWISE) | {"nextafter"}
    for name in table["binary"]:
        assert callable(getattr(kiln, name)) and hasattr(kiln.Tensor, name + "_")


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_matches_numpy(name, dtype):
    a, b = operands(name, (3, 4), (3, 4), NP_DTYPE[dtype])
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert got.dtype == (kiln.bool if name in COMPARE else dtype)
    assert_close(got, expected_of(name, a, b), dtype)
    assert_close(getattr(kiln.tensor(a), name)(kiln.tensor(b)), expected_of(name, a, b), dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 4), (3, 1)),
                                    ((), (2, 3)), ((0, 3), (3,)), ((2, 0), (1, 0))])
def test_broadcasting_0d_and_empty(name, shapes):
    a, b = operands(name, *shapes)
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert_close(got, expected_of(name, a, b))
    # Swapped operands broadcast the same way.
    assert_close(getattr(kiln, name)(kiln.tensor(b), kiln.tensor(a)), expected_of(name, b, a))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_non_contiguous(name):
    a, b = operands(name, (4, 3), (4, 3))
    assert_close(getattr(kiln, name)(noncontig(a), kiln.tensor(b)), expected_of(name, a, b))
    assert_close(getattr(kiln, name)(noncontig(a), noncontig(b)), expected_of(name, a, b))
    # Strided slices with an offset: every other column of wider arrays.
    wa, wb = operands(name, (4, 6), (4, 6))
    va = kiln.as_strided(kiln.tensor(wa), (4, 3), (6, 2), 1)
    vb = kiln.as_strided(kiln.tensor(wb), (4, 3), (6, 2), 0)
    assert_close(getattr(kiln, name)(va, vb), expected_of(name, wa[:, 1::2], wb[:, ::2]))
    # A transposed operand broadcast against a row.
    assert_close(getattr(kiln, name)(noncontig(a), kiln.tensor(b[0])), expected_of(name, a, b[0]))


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.int8, kiln.uint8])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum", "eq", "lt", "ge",
                                  "logical_xor", "floor_divide", "remainder", "fmod"])
def test_integer_ops(name, dtype):
    a = rand(3, 4, dtype=NP_DTYPE[dtype])
    b = rand(3, 4, dtype=NP_DTYPE[dtype])
    if name in ("floor_divide", "remainder", "fmod"):
        b = np.where(b == 0, 3, b).astype(NP_DTYPE[dtype])
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert got.dtype == (kiln.bool if name in COMPARE else dtype)
    np.testing.assert_array_equal(got.numpy(), BINARY[name][0](a, b))


@pytest.mark.parametrize("name", sorted(BITWISE))
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int16, kiln.uint8, kiln.bool])
def test_bitwise(name, dtype):
    a, b = rand(3, 4, dtype=NP_DTYPE[dtype]), rand(4, dtype=NP_DTYPE[dtype])
    got = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(b))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), BITWISE[name](a, b))
    with pytest.raises((RuntimeError, NotImplementedError), match=rf"\[{name}\]"):
        getattr(kiln, name)(kiln.ones(2), kiln.ones(2))


def test_bitwise_operators():
    a, b = rand(5, dtype=np.int32), rand(5, dtype=np.int32)
    x, y = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_array_equal((x & y).numpy(), a & b)
    np.testing.assert_array_equal((x | 3).numpy(), a | 3)
    np.testing.assert_array_equal((3 ^ x).numpy(), 3 ^ a)
    m = kiln.tensor([True, False, True])
    assert (m & kiln.tensor([True, True, False])).tolist() == [True, False, False]


def test_int_pow():
    x = kiln.tensor([2, -3, 4])
    assert (x ** 3).tolist() == [8, -27, 64]
    assert (x ** 3).dtype == kiln.int64
    assert (2 ** kiln.tensor([0, 1, 5])).tolist() == [1, 2, 32]
    # As PyTorch: a negative Python exponent raises, a negative tensor exponent truncates.
    with pytest.raises(RuntimeError, match=r"\[pow\].*negative"):
        kiln.tensor([2, 3]) ** -1
    assert (kiln.tensor([2, 3, -1]) ** kiln.tensor([1, -1, -3])).tolist() == [2, 0, -1]


# ---------------------------------------------------------------- promotion

PROMOTION = [
    # (lhs, rhs, op, expected): lhs/rhs are (dtype, shape) or a Python number.
    ((kiln.int64, (3,)), None, "exp", kiln.float32),
    ((kiln.int32, (3,)), 2.5, "add", kiln.float32),
    ((kiln.int32, (3,)), 2, "add", kiln.int32),
    ((kiln.float16, (3,)), 2.0, "mul", kiln.float16),
    ((kiln.bool, (3,)), (kiln.bool, (3,)), "add", kiln.bool),
    ((kiln.uint8, (3,)), (kiln.int8, (3,)), "add", kiln.int16),
    ((kiln.int32, (3,)), (kiln.int32, (3,)), "div", kiln.float32),
    ((kiln.int64, (3,)), 2, "div", kiln.float32),
    ((kiln.float64, (3,)), (kiln.float32, (3,)), "lt", kiln.bool),
    ((kiln.int32, (3,)), (kiln.int64, (3,)), "mul", kiln.int64),
    ((kiln.float32, (3,)), (kiln.float64, (3,)), "add", kiln.float64),
    ((kiln.float16, (3,)), (kiln.bfloat16, (3,)), "add", kiln.float32),
    ((kiln.int32, (3,)), (kiln.float16, (3,)), "add", kiln.float16),
    # A 0-d tensor does not promote a dimensioned one of its category...
    ((kiln.float32, (3,)), (kiln.float64, ()), "add", kiln.float32),
    ((kiln.int8, (3,)), (kiln.int64, ()), "add", kiln.int8),
    # ...unless it brings a higher category.
    ((kiln.int32, (3,)), (kiln.float64, ()), "add", kiln.float64),
    ((kiln.bool, (3,)), 3, "add", kiln.int64),
    ((kiln.bool, (3,)), 1.5, "mul", kiln.float32),
    ((kiln.uint8, (3,)), True, "add", kiln.uint8),
    # Two 0-d tensors promote normally; a number then does not widen them.
    ((kiln.float16, ()), (kiln.float32, ()), "add", kiln.float32),
    ((kiln.int16, ()), 1000, "add", kiln.int16),
    ((kiln.float64, (3,)), 2, "pow", kiln.float64),
    ((kiln.int64, (3,)), 0.5, "pow", kiln.float32),
    ((kiln.int32, (3,)), 2, "floor_divide", kiln.int32),
    ((kiln.int32, (3,)), (kiln.int32, (3,)), "atan2", kiln.float32),
]


def _operand(spec):
    if not isinstance(spec, tuple):
        return spec
    dtype, shape = spec
    a = rand(*shape, dtype=NP_DTYPE.get(dtype, np.float64))
    if dtype in (kiln.int32, kiln.int64, kiln.int8, kiln.int16, kiln.uint8):
        a = (np.abs(a) + 1).astype(NP_DTYPE[dtype])
    return kiln.tensor(a).to(dtype)


@pytest.mark.parametrize("lhs,rhs,op,expected", PROMOTION)
def test_result_dtype(lhs, rhs, op, expected):
    x = _operand(lhs)
    if rhs is None:
        assert getattr(kiln, op)(x).dtype == expected
        return
    y = _operand(rhs)
    assert getattr(kiln, op)(x, y).dtype == expected
    if not isinstance(rhs, tuple):
        # Reflected: number on the left gives the same dtype.
        reflected = {"add": operator.add, "mul": operator.mul, "div": operator.truediv,
                     "pow": operator.pow, "floor_divide": operator.floordiv}
        if op in reflected:
            assert reflected[op](y, x).dtype == expected


def test_bool_arithmetic_values():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert (kiln.tensor(a) + kiln.tensor(b)).tolist() == [True, True, True, False]
    assert (kiln.tensor(a) * kiln.tensor(b)).tolist() == [True, False, False, False]
    with pytest.raises(RuntimeError, match=r"\[sub\]"):
        kiln.tensor(a) - kiln.tensor(b)


def test_uint8_int8_values_widen():
    a = np.array([200, 255, 0], dtype=np.uint8)
    b = np.array([-100, 100, -1], dtype=np.int8)
    got = kiln.tensor(a) + kiln.tensor(b)
    assert got.dtype == kiln.int16
    assert got.tolist() == [100, 355, -1]


# ---------------------------------------------------------------- Python scalars


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_scalar_operands(dtype):
    a = rand(3, 4, low=0.5, high=2).astype(NP_DTYPE[dtype])
    x = kiln.tensor(a)
    cases = [
        (x + 2, a + 2), (2 + x, 2 + a), (x - 2, a - 2), (2 - x, 2 - a), (x * 3, a * 3),
        (3 * x, 3 * a), (x / 4, a / 4), (1 / x, 1 / a), (x ** 2, a ** 2), (2 ** x, 2 ** a),
        (x // 0.3, a // 0.3), (1.7 // x, 1.7 // a), (x % 0.3, a % 0.3), (1.7 % x, 1.7 % a),
        (-x, -a), (abs(-x), a), (+x, a),
    ]
    for got, expected in cases:
        assert got.dtype == dtype
        assert_close(got, expected, dtype)
    for got, expected in [(x < 1, a < 1), (1 < x, 1 < a), (x == a[0, 0], a == a[0, 0]),
                          (x != 1.0, a != 1.0), (x >= 1, a >= 1), (x <= 1, a <= 1)]:
        assert got.dtype == kiln.bool
        np.testing.assert_array_equal(got.numpy(), expected)
    assert_close(kiln.sub(2, x), 2 - a, dtype)
    assert_close(kiln.add(x, 2, alpha=3), a + 6, dtype)
    assert_close(kiln.sub(x, x, alpha=0.5), a - 0.5 * a, dtype)


def test_unsupported_operand_is_type_error():
    with pytest.raises(TypeError):
        kiln.ones(2) + "a"
    with pytest.raises(TypeError):
        "a" * kiln.ones(2)
    with pytest.raises(TypeError, match=r"\[add\]"):
        kiln.add(kiln.ones(2), "a")


def test_alpha_float_on_int_rejected():
    with pytest.raises(RuntimeError, match=r"\[add\].*alpha"):
        kiln.add(kiln.tensor([1, 2]), kiln.tensor([1, 2]), alpha=0.5)


# ---------------------------------------------------------------- Python semantics


def test_floor_divide_and_remainder_negative_numbers():
    a = np.array([-7, 7, -7, 7, -6, 0])
    b = np.array([2, -2, -2, 2, 3, -5])
    x, y = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_array_equal((x // y).numpy(), a // b)
    np.testing.assert_array_equal((x % y).numpy(), a % b)
    np.testing.assert_array_equal(kiln.floor_divide(x, y).numpy(), a // b)
    fa, fb = a.astype(np.float64) + 0.5, b.astype(np.float64)
    np.testing.assert_allclose((kiln.tensor(fa) // kiln.tensor(fb)).numpy(), fa // fb)
    np.testing.assert_allclose((kiln.tensor(fa) % kiln.tensor(fb)).numpy(), fa % fb)
    np.testing.assert_allclose(kiln.remainder(kiln.tensor(fa), -1.5).numpy(), fa % -1.5)
    np.testing.assert_array_equal((-7 // kiln.tensor([2, -2])).numpy(), [-4, 3])
    np.testing.assert_array_equal((-7 % kiln.tensor([2, -2])).numpy(), [1, -1])
    # The int64 minimum divided by -1 must not trap.
    lo = np.iinfo(np.int64).min
    assert (kiln.tensor([lo]) // -1).dtype == kiln.int64


def test_fmod_takes_the_dividend_sign():
    a = np.array([-7, 7, -7, 7, -6, 0, 5])
    b = np.array([2, -2, -2, 2, 3, -5, -1])
    np.testing.assert_array_equal(kiln.fmod(kiln.tensor(a), kiln.tensor(b)).numpy(), np.fmod(a, b))
    fa = a.astype(np.float64) + 0.5
    x = kiln.tensor(fa)
    np.testing.assert_allclose(kiln.fmod(x, kiln.tensor(b.astype(np.float64))).numpy(),
                               np.fmod(fa, b))
    np.testing.assert_allclose(kiln.fmod(x, -1.5).numpy(), np.fmod(fa, -1.5))
    np.testing.assert_allclose(x.fmod(2).numpy(), np.fmod(fa, 2))
    assert kiln.fmod(kiln.tensor([7, -7]), 2).tolist() == [1, -1]
    assert kiln.fmod(kiln.tensor([7, -7]), 2.5).dtype == kiln.float32
    y = kiln.tensor(fa)
    y.fmod_(-2)
    np.testing.assert_allclose(y.numpy(), np.fmod(fa, -2))
    with pytest.raises(RuntimeError, match=r"\[fmod\].*ZeroDivisionError"):
        kiln.fmod(kiln.tensor([3, 4]), kiln.tensor([1, 0]))
    gradcheck(lambda p, q: kiln.fmod(p, q), rand(2, 3, low=-3, high=3), rand(3, low=0.5, high=2))
    gradcheck(lambda p: kiln.fmod(p, -0.7), rand(2, 3, low=-3, high=3))


def test_div_rounding_modes():
    a, b = np.array([-7.5, 7.5, -3.0]), np.array([2.0, -2.0, 2.0])
    x, y = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_allclose(kiln.div(x, y, rounding_mode="trunc").numpy(), np.trunc(a / b))
    np.testing.assert_allclose(x.div(y, rounding_mode="floor").numpy(), np.floor(a / b))
    ints = kiln.div(kiln.tensor([-7, 7]), kiln.tensor([2, 2]), rounding_mode="trunc")
    assert ints.dtype == kiln.int64 and ints.tolist() == [-3, 3]
    with pytest.raises(RuntimeError, match=r"\[div\] expected rounding_mode to be one of None, "
                                           r"'trunc', or 'floor' but found 'round'"):
        kiln.div(x, y, rounding_mode="round")


@pytest.mark.parametrize("op", [lambda x, y: x // y, lambda x, y: x % y,
                                lambda x, y: kiln.floor_divide(x, 0), lambda x, y: x % 0])
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.uint8])
def test_integer_division_by_zero_raises(op, dtype):
    x = kiln.tensor([3, 4]).to(dtype)
    y = kiln.tensor([1, 0]).to(dtype)
    with pytest.raises(RuntimeError, match=r"\[(floor_divide|remainder)\].*ZeroDivisionError"):
        op(x, y)


def test_float_division_by_zero_is_ieee():
    got = (kiln.tensor([1.0, -1.0, 0.0]) / 0).tolist()
    assert got[0] == float("inf") and got[1] == float("-inf") and got[2] != got[2]
    assert (kiln.tensor([1, 0]) / 0).tolist()[0] == float("inf")


def test_maximum_minimum_propagate_nan():
    x = kiln.tensor([float("nan"), 1.0, 2.0])
    y = kiln.tensor([0.0, float("nan"), 1.0])
    got = kiln.maximum(x, y).tolist()
    assert got[0] != got[0] and got[1] != got[1] and got[2] == 2.0
    got = kiln.minimum(x, y).tolist()
    assert got[0] != got[0] and got[1] != got[1] and got[2] == 1.0


def test_broadcast_error_names_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"\[mul\].*\[2, 3\].*\[4\]"):
        kiln.ones(2, 3) * kiln.ones(4)


# ---------------------------------------------------------------- in-place


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "remainder"])
def test_inplace_methods(name):
    a, b = operands(name, (3, 4), (4,))
    x = kiln.tensor(a)
    v = x._version
    r = getattr(x, name + "_")(kiln.tensor(b))
    assert r is x and x._version == v + 1
    assert_close(x, expected_of(name, a, b))
    # Through a transposed view the base sees the write.
    base = kiln.tensor(np.ascontiguousarray(a.T))
    getattr(base.t(), name + "_")(kiln.tensor(b))
    assert_close(base.t(), expected_of(name, a, b))


def test_inplace_operators():
    a = rand(3, 4)
    x = kiln.tensor(a)
    x_id = id(x)
    x += 1
    x -= kiln.tensor(a[0])
    x *= 2
    x /= 4
    x **= 2
    assert id(x) == x_id
    assert_close(x, ((a + 1 - a[0]) * 2 / 4) ** 2)
    y = kiln.tensor([7, -7])
    y //= 2
    y %= 3
    assert y.tolist() == [(7 // 2) % 3, (-7 // 2) % 3]
    x.add_(kiln.tensor(a), alpha=2)
    assert_close(x, ((a + 1 - a[0]) * 2 / 4) ** 2 + 2 * a)


def test_inplace_cast_errors():
    x = kiln.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"result type Float can't be cast"):
        x += 1.5
    assert x.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match=r"\[div_\].*result type Float can't be cast.*Long"):
        x.div_(2)
    with pytest.raises(RuntimeError, match=r"result type Long can't be cast.*Bool"):
        kiln.tensor([True, False]).add_(kiln.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"\[add_\].*\[3\]"):
        x.add_(kiln.ones(2, 3, dtype=kiln.int64))
    # Widening is fine: float32 += float64 stays float32.
    f = kiln.ones(3)
    f += kiln.ones(3, dtype=kiln.float64)
    assert f.dtype == kiln.float32 and f.tolist() == [2.0, 2.0, 2.0]
    i = kiln.tensor([1, 2], dtype=kiln.int32)
    i += kiln.tensor([1, 1], dtype=kiln.int64)
    assert i.dtype == kiln.int32 and i.tolist() == [2, 3]


def test_inplace_on_leaf_requiring_grad():
    x = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[add_\].*leaf"):
        x.add_(1)
    with pytest.raises(RuntimeError, match=r"leaf"):
        x += 1
    with kiln.no_grad():
        x += 1
    assert x.is_leaf and x.grad_fn is None


def test_inplace_history_and_grad():
    a, b = rand(2, 3), rand(3)
    x = kiln.tensor(a, requires_grad=True)
    w = kiln.tensor(b, requires_grad=True)
    y = x * 1
    y.mul_(w)
    y.add_(w)
    assert not y.is_leaf
    y.sum().backward()
    assert_close(x.grad, np.broadcast_to(b, a.shape))
    assert_close(w.grad, a.sum(0) + 2)


def test_inplace_with_grad_other_on_plain_tensor():
    b = rand(3)
    w = kiln.tensor(b, requires_grad=True)
    y = kiln.ones(3, dtype=kiln.float64)
    y.mul_(w)
    assert y.requires_grad
    (y * y).sum().backward()
    assert_close(w.grad, 2 * b)


# ---------------------------------------------------------------- where / lerp


def test_where():
    c = rand(3, 4) > 0
    a, b = rand(3, 4), rand(4)
    assert_close(kiln.where(kiln.tensor(c), kiln.tensor(a), kiln.tensor(b)), np.where(c, a, b))
    assert_close(kiln.where(kiln.tensor(c), noncontig(a), 0.5), np.where(c, a, 0.5))
    assert_close(kiln.tensor(a).where(kiln.tensor(c), kiln.tensor(b)), np.where(c, a, b))
    assert kiln.where(kiln.tensor(c), kiln.tensor([1, 2, 3, 4]), 0.5).dtype == kiln.float32
    assert kiln.where(kiln.tensor(c), kiln.ones(4, dtype=kiln.float16), 0.5).dtype == kiln.float16
    with pytest.raises(RuntimeError, match=r"\[where\].*bool"):
        kiln.where(kiln.tensor(a), kiln.tensor(a), kiln.tensor(a))
    gradcheck(lambda x, y: kiln.where(kiln.tensor(c), x, y), a, b)


def test_lerp():
    a, e, w = rand(3, 4), rand(3, 4), rand(4, low=0, high=1)
    assert_close(kiln.lerp(kiln.tensor(a), kiln.tensor(e), 0.25), a + 0.25 * (e - a))
    assert_close(kiln.tensor(a).lerp(kiln.tensor(e), kiln.tensor(w)), a + w * (e - a))
    gradcheck(lambda x, y, z: kiln.lerp(x, y, z), a, e, w)


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck(name):
    a, b = operands(name, (2, 3), (2, 3))
    if name == "remainder":
        a = np.array([[-2.3, 1.2, 2.9], [0.7, -0.4, 1.9]])
        b = np.array([[1.1, 0.7, -1.3], [0.9, 1.6, -0.8]])
    gradcheck(getattr(kiln, name), a, b)
    # Broadcast operands: the gradient is summed to each input's shape.
    a, b = operands(name, (2, 3), (3,))
    if name == "remainder":
        a, b = np.array([[-2.3, 1.2, 2.9], [0.7, -0.4, 1.9]]), np.array([1.1, 0.7, -1.3])
    gradcheck(getattr(kiln, name), a, b)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck_with_scalar(name):
    a, _ = operands(name, (2, 3), (2, 3))
    if name == "remainder":
        a = np.array([[-2.3, 1.2, 2.9], [0.7, -0.4, 1.9]])
    gradcheck(lambda x: getattr(kiln, name)(x, 1.3), a)
    if name in ("add", "sub", "mul", "div", "pow", "atan2"):
        gradcheck(lambda x: getattr(kiln, name)(1.3, x), a)


def test_reflected_operator_grads():
    a = rand(2, 3, low=0.5, high=2)
    gradcheck(lambda x: 2 - x, a)
    gradcheck(lambda x: 1 / x, a)
    gradcheck(lambda x: 2 ** x, a)
    gradcheck(lambda x: x ** 2.5, a)


def test_maximum_tie_splits_gradient():
    x = kiln.tensor([1.0, 2.0], dtype=kiln.float64, requires_grad=True)
    y = kiln.tensor([1.0, 3.0], dtype=kiln.float64, requires_grad=True)
    kiln.maximum(x, y).sum().backward()
    assert x.grad.tolist() == [0.5, 0.0] and y.grad.tolist() == [0.5, 1.0]


def test_pow_grad_at_zero_base():
    x = kiln.tensor([0.0, 2.0], dtype=kiln.float64, requires_grad=True)
    e = kiln.tensor([2.0, 3.0], dtype=kiln.float64, requires_grad=True)
    (x ** e).sum().backward()
    assert x.grad.tolist() == [0.0, 12.0]
    assert e.grad.tolist()[0] == 0.0


def test_comparisons_are_not_differentiable():
    x = kiln.tensor(rand(3), requires_grad=True)
    assert not (x < 0).requires_grad
    assert not kiln.eq(x, x).requires_grad


# ---------------------------------------------------------------- aliasing


def test_inplace_with_overlapping_operand_reads_before_writing():
    a = np.arange(9.0).reshape(3, 3)
    x = kiln.tensor(a)
    x.add_(x.t())
    assert_close(x, a + a.T)
    x = kiln.tensor(a)
    x.t().mul_(x)
    assert_close(x, a * a.T)
    v = np.arange(5.0)
    y = kiln.tensor(v)
    y.narrow(0, 1, 4).add_(y.narrow(0, 0, 4))
    assert_close(y, np.concatenate([[0.0], v[1:] + v[:4]]))
    z = kiln.tensor(v)
    z.narrow(0, 1, 4).copy_(z.narrow(0, 0, 4))
    assert_close(z, np.array([0.0, 0.0, 1.0, 2.0, 3.0]))
    w = kiln.tensor(v)
    w.add_(w)  # the same layout needs no copy and stays correct
    assert_close(w, 2 * v)


def test_inplace_on_expanded_tensor_is_rejected():
    x = kiln.ones(3, 1).expand(3, 4)
    with pytest.raises(RuntimeError, match=r"\[add_\].*single memory location"):
        x.add_(1)
    with pytest.raises(RuntimeError, match=r"\[exp_\].*single memory location"):
        x.exp_()
    with pytest.raises(RuntimeError, match=r"\[copy_\].*single memory location"):
        x.copy_(kiln.zeros(3, 4))
    assert kiln.ones(3, 1).tolist() == [[1.0]] * 3
