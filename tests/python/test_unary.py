"""Unary elementwise ops (ops/op_table.h) against NumPy: values, result dtypes,
strides, 0-d/empty tensors, in-place variants and float64 gradchecks."""

import math

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand
from unary_cases import UNARY, erf

# bitwise_not has no float semantics; it is tested on integers below.
INTEGER_ONLY = {"bitwise_not": np.invert}
PARAMETRIC = ["gelu", "gelu_tanh", "leaky_relu", "elu", "softplus", "nan_to_num", "clamp"]
# Special functions, tested against their own references in test_special_math.py.
SPECIAL = {"signbit", "lgamma", "digamma", "erfc", "erfinv", "i0", "polygamma", "i1"}

# Result dtype kinds from the op table (UnaryKind): Same keeps an integer input's dtype.
_KIND = kiln._C._op_table()["unary"]
SAME_KIND = {name for name in UNARY if _KIND[name] == "Same"}
BOOL_KIND = {name for name in UNARY if _KIND[name] == "Bool"}
# Piecewise-constant or boolean: no gradient to check.
NOT_DIFFERENTIABLE = {"sign", "floor", "ceil", "round", "trunc"} | BOOL_KIND

# Kinks at 0: keep samples away so finite differences see one branch.
_AWAY_FROM_ZERO = {"relu", "sign", "neg"}


def sample(name, *shape, dtype=np.float64):
    _, low, high = UNARY[name]
    a = rand(*shape, dtype=np.float64, low=low, high=high)
    if name in _AWAY_FROM_ZERO:
        a = np.where(np.abs(a) < 0.1, 0.5, a)
    return a.astype(dtype)


def test_table_is_fully_covered():
    table = kiln._C._op_table()
    listed = set(UNARY) | set(INTEGER_ONLY) | set(PARAMETRIC) | SPECIAL
    assert set(table["unary"]) == listed
    for name in set(UNARY) | set(INTEGER_ONLY):
        assert callable(getattr(kiln, name)) and hasattr(kiln.Tensor, name + "_")


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_matches_numpy(name, dtype):
    ref = UNARY[name][0]
    a = sample(name, 3, 5, dtype=NP_DTYPE[dtype])
    got = getattr(kiln, name)(kiln.tensor(a))
    expected = ref(a.astype(np.float64))
    assert got.dtype == (kiln.bool if name in BOOL_KIND else dtype)
    assert_close(got, expected, dtype)
    # Method form and non-contiguous input.
    assert_close(getattr(kiln.tensor(a), name)(), expected, dtype)
    assert_close(getattr(kiln, name)(noncontig(a)), expected, dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_strided_slice_0d_and_empty(name):
    ref = UNARY[name][0]
    big = sample(name, 4, 6)
    # Every other column starting at column 1: stride 2, non-zero offset.
    view = kiln.as_strided(kiln.tensor(big), (4, 3), (6, 2), 1)
    assert_close(getattr(kiln, name)(view), ref(big[:, 1::2]))
    scalar = sample(name, 1)[0]
    out = getattr(kiln, name)(kiln.tensor(scalar, dtype=kiln.float64))
    assert out.dim() == 0
    assert_close(out, ref(np.float64(scalar)))
    empty = getattr(kiln, name)(kiln.ones(0, 3, dtype=kiln.float64))
    assert tuple(empty.shape) == (0, 3)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.uint8, kiln.bool])
def test_integer_and_bool_result_dtypes(name, dtype):
    a = rand(2, 3, dtype=NP_DTYPE[dtype])
    if name in ("log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "log1p"):
        a = np.abs(a).astype(NP_DTYPE[dtype]) + NP_DTYPE[dtype](1)
    x = kiln.tensor(a)
    if dtype == kiln.bool and name in SAME_KIND:
        # PyTorch rejects arithmetic negation-like ops on bool; kiln must not crash.
        try:
            getattr(kiln, name)(x)
        except (RuntimeError, NotImplementedError) as e:
            assert f"[{name}]" in str(e)
        return
    if dtype == kiln.uint8 and name == "neg":
        return  # wraps around in both libraries; covered by int64
    got = getattr(kiln, name)(x)
    if name in BOOL_KIND:
        expected_dtype = kiln.bool
    elif name in SAME_KIND:
        expected_dtype = dtype
    else:
        expected_dtype = kiln.float32  # exp(int64) -> float32
    assert got.dtype == expected_dtype
    tol = 1e-5 if expected_dtype == kiln.float32 else 0
    with np.errstate(invalid="ignore", divide="ignore"):  # asin(2) is nan in both
        expected = UNARY[name][0](a.astype(np.float64))
    assert_close(got, expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int16, kiln.uint8, kiln.bool])
def test_bitwise_not(dtype):
    a = rand(3, 4, dtype=NP_DTYPE[dtype])
    got = kiln.bitwise_not(kiln.tensor(a))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), np.invert(a))
    np.testing.assert_array_equal((~kiln.tensor(a)).numpy(), np.invert(a))


def test_bitwise_not_float_rejected():
    with pytest.raises((RuntimeError, NotImplementedError), match=r"\[bitwise_not\]"):
        kiln.bitwise_not(kiln.ones(3))


def test_special_values():
    x = kiln.tensor([float("nan"), float("inf"), -float("inf"), 1.0, -0.0])
    np.testing.assert_array_equal(kiln.isnan(x).numpy(), [True, False, False, False, False])
    np.testing.assert_array_equal(kiln.isinf(x).numpy(), [False, True, True, False, False])
    np.testing.assert_array_equal(kiln.isfinite(x).numpy(), [False, False, False, True, True])
    # round is half to even, like NumPy and PyTorch.
    assert kiln.round(kiln.tensor([0.5, 1.5, 2.5, -0.5])).tolist() == [0.0, 2.0, 2.0, -0.0]
    # NaN propagates through clamp instead of being clamped to a bound.
    assert math.isnan(kiln.clamp(kiln.tensor([float("nan")]), 0, 1).tolist()[0])


def test_half_precision():
    a = rand(4, 5, low=-2, high=2)
    for dt in (kiln.float16, kiln.bfloat16):
        x = kiln.tensor(a).to(dt)
        got = kiln.exp(x)
        assert got.dtype == dt
        x32 = x.to(kiln.float32)
        assert_close(got.to(kiln.float32), np.exp(x32.numpy().astype(np.float64)), dt)


# ---------------------------------------------------------------- parametric ops


def _gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_gelu_both_approximations(dtype):
    a = rand(3, 4, low=-3, high=3).astype(NP_DTYPE[dtype])
    assert_close(kiln.gelu(kiln.tensor(a)), _gelu(a.astype(np.float64)), dtype)
    assert_close(kiln.gelu(noncontig(a), approximate="tanh"), _gelu_tanh(a.astype(np.float64)),
                 dtype)
    assert_close(kiln.nn.functional.gelu(kiln.tensor(a), approximate="tanh"),
                 _gelu_tanh(a.astype(np.float64)), dtype)
    # The two differ: the test would notice a swapped approximation.
    assert not np.allclose(_gelu(a.astype(np.float64)), _gelu_tanh(a.astype(np.float64)), atol=1e-6)
    with pytest.raises(ValueError, match=r"\[gelu\]"):
        kiln.gelu(kiln.tensor(a), approximate="fast")


def test_leaky_relu_elu_softplus():
    a = rand(3, 4, low=-3, high=3)
    x = kiln.tensor(a)
    assert_close(kiln.leaky_relu(x), np.where(a > 0, a, 0.01 * a))
    assert_close(kiln.leaky_relu(x, 0.2), np.where(a > 0, a, 0.2 * a))
    assert_close(kiln.elu(x), np.where(a > 0, a, np.expm1(a)))
    assert_close(kiln.elu(x, alpha=0.5), np.where(a > 0, a, 0.5 * np.expm1(a)))
    assert_close(kiln.softplus(x), np.log1p(np.exp(a)))
    assert_close(kiln.softplus(x, beta=2.0), np.log1p(np.exp(2 * a)) / 2)
    # Above the threshold softplus is the identity.
    assert_close(kiln.softplus(x, beta=1.0, threshold=1.0), np.where(a > 1, a, np.log1p(np.exp(a))))
    ints = kiln.tensor([-3, 4])
    assert kiln.leaky_relu(ints, 0.5).dtype == kiln.int64
    assert kiln.elu(ints).dtype == kiln.float32


def test_nan_to_num():
    a = np.array([np.nan, np.inf, -np.inf, 1.5, -2.0])
    got = kiln.nan_to_num(kiln.tensor(a))
    np.testing.assert_array_equal(got.numpy(), np.nan_to_num(a))
    got32 = kiln.nan_to_num(kiln.tensor(a, dtype=kiln.float32))
    np.testing.assert_array_equal(got32.numpy(), np.nan_to_num(a.astype(np.float32)))
    got = kiln.tensor(a).nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0)
    np.testing.assert_array_equal(got.numpy(), [1.0, 2.0, -3.0, 1.5, -2.0])
    assert kiln.nan_to_num(kiln.tensor([1, 2])).tolist() == [1, 2]


def test_clamp():
    a = rand(3, 4, low=-3, high=3)
    x = kiln.tensor(a)
    assert_close(kiln.clamp(x, -1, 1), np.clip(a, -1, 1))
    assert_close(kiln.clamp(x, min=0.5), np.maximum(a, 0.5))
    assert_close(x.clamp(max=-0.5), np.minimum(a, -0.5))
    assert_close(kiln.clip(noncontig(a), -1.0, 2.0), np.clip(a, -1, 2))
    lo, hi = rand(4, low=-2, high=-1), rand(3, 1, low=1, high=2)
    assert_close(kiln.clamp(x, kiln.tensor(lo), kiln.tensor(hi)), np.minimum(np.maximum(a, lo), hi))
    ints = kiln.tensor([-5, 0, 5])
    assert kiln.clamp(ints, -2, 2).dtype == kiln.int64
    assert kiln.clamp(ints, -2, 2).tolist() == [-2, 0, 2]
    assert kiln.clamp(ints, -2.5, 2).dtype == kiln.float32
    with pytest.raises(RuntimeError, match=r"\[clamp\]"):
        kiln.clamp(x)
    y = kiln.tensor(a)
    y.clamp_(-1, 1)
    assert_close(y, np.clip(a, -1, 1))


# ---------------------------------------------------------------- in-place


@pytest.mark.parametrize("name", ["exp", "sin", "sqrt", "neg", "abs", "relu", "floor", "sigmoid"])
def test_inplace_matches_out_of_place(name):
    ref = UNARY[name][0]
    a = sample(name, 3, 4)
    x = kiln.tensor(a)
    version = x._version
    r = getattr(x, name + "_")()
    assert r is x
    assert x._version > version
    assert_close(x, ref(a))
    # In place on a non-contiguous view writes through to the base.
    base = kiln.tensor(a)
    getattr(base.t(), name + "_")()
    assert_close(base, ref(a))


def test_inplace_dtype_errors():
    x = kiln.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"\[exp_\].*result type Float can't be cast.*Long"):
        x.exp_()
    assert x.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match=r"\[sqrt_\].*result type Float can't be cast.*Int"):
        kiln.tensor([4, 9], dtype=kiln.int32).sqrt_()


def test_inplace_on_leaf_requiring_grad():
    x = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[exp_?\].*leaf"):
        x.exp_()
    with kiln.no_grad():
        x.exp_()
    assert x.requires_grad and x.is_leaf


def test_inplace_on_non_leaf_is_differentiable():
    a = rand(2, 3)
    x = kiln.tensor(a, requires_grad=True)
    y = x * 2
    y.sin_()
    y.sum().backward()
    assert_close(x.grad, 2 * np.cos(2 * a))


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", sorted(set(UNARY) - NOT_DIFFERENTIABLE))
def test_gradcheck(name):
    gradcheck(getattr(kiln, name), sample(name, 2, 3))


@pytest.mark.parametrize("name", sorted(NOT_DIFFERENTIABLE - BOOL_KIND))
def test_piecewise_constant_grad_is_zero(name):
    x = kiln.tensor(sample(name, 2, 3) + 0.25, requires_grad=True)
    getattr(kiln, name)(x).sum().backward()
    assert_close(x.grad, np.zeros((2, 3)))


def test_bool_outputs_do_not_require_grad():
    x = kiln.tensor(rand(3), requires_grad=True)
    assert not kiln.isnan(x).requires_grad
    assert kiln.exp(x).requires_grad


def test_gradcheck_parametric():
    a = rand(2, 3, low=-2, high=2)
    a = np.where(np.abs(a) < 0.1, 0.5, a)  # away from the kinks at 0
    gradcheck(kiln.gelu, a)
    gradcheck(lambda x: kiln.gelu(x, approximate="tanh"), a)
    gradcheck(lambda x: kiln.leaky_relu(x, 0.2), a)
    gradcheck(lambda x: kiln.elu(x, alpha=0.7), a)
    gradcheck(lambda x: kiln.softplus(x, beta=2.0), a)
    gradcheck(lambda x: kiln.softplus(x, beta=1.0, threshold=1.0), np.where(np.abs(a - 1) < 0.1, 0.5, a))
    b = np.where(np.abs(np.abs(a) - 1) < 0.1, 0.3, a)  # away from the clamp bounds
    gradcheck(lambda x: kiln.clamp(x, -1, 1), b)
    gradcheck(lambda x: kiln.clamp(x, min=-1.0), b)
    gradcheck(lambda x: kiln.clamp(x, max=1), b)
    gradcheck(lambda x, lo, hi: kiln.clamp(x, lo, hi), b, np.full(3, -1.0), np.full((2, 1), 1.0))
    gradcheck(kiln.nan_to_num, a)


def test_nan_to_num_grad_is_zero_at_nonfinite():
    x = kiln.tensor([float("nan"), 1.0, float("inf")], dtype=kiln.float64, requires_grad=True)
    kiln.nan_to_num(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


def test_relu_abs_grad_at_zero():
    x = kiln.tensor([0.0, -1.0, 2.0], dtype=kiln.float64, requires_grad=True)
    kiln.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    x.grad = None
    kiln.abs(x).sum().backward()
    assert x.grad.tolist() == [0.0, -1.0, 1.0]


def test_double_backward_of_unary():
    a = rand(2, 3)
    x = kiln.tensor(a, requires_grad=True)
    (g,) = kiln.autograd.grad(kiln.tanh(x).sum(), x, create_graph=True)
    (gg,) = kiln.autograd.grad(g.sum(), x)
    t = np.tanh(a)
    assert_close(gg, -2 * t * (1 - t * t))
