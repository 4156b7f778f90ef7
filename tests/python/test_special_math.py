"""PyTorch's special elementwise math (ops/special_math.h table entries, ops/special.cpp
composites, kiln.special) against references built from the math module and NumPy:
values, dtype promotion, broadcasting, strides, 0-d/empty tensors, float64 gradchecks
and bad input; CUDA against the CPU; PyTorch where it is installed."""

import math

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand, requires_gpu

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _digamma(x):
    # Fourth-order central difference of math.lgamma: error ~ h^4 lgamma^(5).
    h = 1e-3
    f = _lgamma
    return (8 * (f(x + h) - f(x - h)) - (f(x + 2 * h) - f(x - 2 * h))) / (12 * h)


def _polygamma(n, x):
    # (-1)^(n+1) n! sum_k (x + k)^-(n+1), the sum closed by its integral and half term.
    if n == 0:
        return _digamma(x)
    x = np.asarray(x, dtype=np.float64)
    k = np.arange(2000, dtype=np.float64)
    terms = (x[..., None] + k) ** -(n + 1.0)
    end = x + 2000.0
    tail = end ** -float(n) / n + 0.5 * end ** -(n + 1.0)
    return (-1) ** (n + 1) * math.factorial(n) * (terms.sum(-1) + tail)


def _erfinv_scalar(y):
    if y <= -1 or y >= 1:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan

    def residual(x):  # erf(x) - y, through erfc in the tails so it keeps its digits
        if y > 0.5:
            return (1 - y) - math.erfc(x)
        if y < -0.5:
            return math.erfc(-x) - (1 + y)
        return math.erf(x) - y

    lo, hi = -9.0, 9.0
    for _ in range(200):  # bisection: residual increases with x
        mid = (lo + hi) / 2
        if residual(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


_erfinv = np.vectorize(_erfinv_scalar, otypes=[np.float64])


def _i1_scalar(x):
    return sum((x / 2) ** (2 * k + 1) / (math.factorial(k) * math.factorial(k + 1))
               for k in range(80))


_i1 = np.vectorize(_i1_scalar, otypes=[np.float64])


def _sinc(x):
    return np.sinc(x)


def _xlogy(x, y):
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log(y))


def _xlog1py(x, y):
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))


def _entr(x):
    with np.errstate(all="ignore"):
        return np.where(x > 0, -x * np.log(np.where(x > 0, x, 1)), np.where(x == 0, 0.0, -np.inf))


def _ndtr(x):
    return 0.5 * _erfc(-x / math.sqrt(2))


# name -> (kiln function, reference, low, high); the domain is also the gradcheck's.
UNARY = {
    "lgamma": (kiln.lgamma, _lgamma, 0.2, 5),
    "digamma": (kiln.digamma, _digamma, 0.3, 5),
    "erfc": (kiln.erfc, _erfc, -2, 2),
    "erfinv": (kiln.erfinv, _erfinv, -0.9, 0.9),
    "i0": (kiln.i0, np.i0, -3, 3),
    "sinc": (kiln.sinc, _sinc, -2, 2),
    "logit": (kiln.logit, lambda p: np.log(p / (1 - p)), 0.1, 0.9),
    "special.i1": (kiln.special.i1, _i1, -3, 3),
    "special.ndtr": (kiln.special.ndtr, _ndtr, -3, 3),
    "special.ndtri": (kiln.special.ndtri, lambda p: math.sqrt(2) * _erfinv(2 * p - 1), 0.05, 0.95),
    "special.log_ndtr": (kiln.special.log_ndtr, lambda x: np.log(_ndtr(x)), -3, 3),
    "special.entr": (kiln.special.entr, _entr, 0.1, 3),
    "polygamma1": (lambda x: kiln.polygamma(1, x), lambda x: _polygamma(1, x), 0.3, 5),
    "polygamma2": (lambda x: kiln.polygamma(2, x), lambda x: _polygamma(2, x), 0.3, 5),
    "polygamma3": (lambda x: kiln.polygamma(3, x), lambda x: _polygamma(3, x), 0.5, 5),
}

BINARY = {
    "xlogy": (kiln.xlogy, _xlogy, (-2, 2), (0.1, 3)),
    "special.xlog1py": (kiln.special.xlog1py, _xlog1py, (-2, 2), (-0.5, 3)),
    "logaddexp": (kiln.logaddexp, np.logaddexp, (-3, 3), (-3, 3)),
    "logaddexp2": (kiln.logaddexp2, np.logaddexp2, (-3, 3), (-3, 3)),
    "hypot": (kiln.hypot, np.hypot, (0.2, 3), (0.2, 3)),
    "copysign": (kiln.copysign, np.copysign, (0.2, 3), (-2, 2)),
    "ldexp": (kiln.ldexp, lambda x, y: x * 2.0 ** y, (-2, 2), (-2, 2)),
    "float_power": (kiln.float_power, np.float_power, (0.2, 3), (-2, 2)),
}


def _sample(low, high, *shape):
    return rand(*shape, low=low, high=high)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_unary_matches_reference(name, dtype):
    fn, ref, low, high = UNARY[name]
    a = _sample(low, high, 3, 5)
    x = kiln.tensor(a, dtype=dtype)
    got = fn(x)
    assert got.dtype == dtype
    expected = ref(x.double().numpy())
    tol = 1e-5 if dtype == kiln.float64 else 2e-4
    assert_close(got, expected, atol=tol, rtol=tol)
    assert_close(fn(noncontig(a)), ref(a), atol=1e-5, rtol=1e-5)
    # 0-d and empty.
    assert_close(fn(kiln.tensor(a[0, 0])), ref(a[0, 0]), atol=1e-5, rtol=1e-5)
    assert fn(kiln.empty(0, 3, dtype=dtype)).shape == (0, 3)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    fn, _, low, high = UNARY[name]
    if name == "special.entr":
        low = 0.3
    gradcheck(fn, _sample(low, high, 2, 3))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfinv", "i0", "sinc", "logit"])
def test_unary_integer_input_promotes_to_default_dtype(name):
    fn, ref, _, _ = UNARY[name]
    a = np.array([[0, 1], [1, 0]]) if name in ("erfinv", "logit") else np.array([[1, 2], [3, 4]])
    got = fn(kiln.tensor(a))
    assert got.dtype == kiln.float32
    with np.errstate(all="ignore"):  # erfinv(1) and logit(0), logit(1) are infinite
        expected = ref(a.astype(np.float64)).astype(np.float32)
    assert_close(got, expected, kiln.float32)
    kiln.set_default_dtype(kiln.float64)
    try:
        assert fn(kiln.tensor(a)).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)


def test_inplace_and_methods():
    a = _sample(0.5, 3, 3, 4)
    for name in ["lgamma", "digamma", "erfc", "i0", "sinc"]:
        fn, ref, _, _ = UNARY[name]
        x = kiln.tensor(a)
        assert_close(getattr(x, name)(), ref(a))
        assert getattr(x, name + "_")() is x
        assert_close(x, ref(a))
    p = _sample(0.1, 0.9, 3, 4)
    x = kiln.tensor(p)
    assert_close(x.erfinv_(), _erfinv(p))
    x = kiln.tensor(p)
    assert_close(x.logit_(eps=0.2), np.log(np.clip(p, 0.2, 0.8) / (1 - np.clip(p, 0.2, 0.8))))
    x = kiln.tensor(a)
    assert_close(x.polygamma(2), _polygamma(2, a))
    x.polygamma_(1)
    assert_close(x, _polygamma(1, a))
    with pytest.raises(RuntimeError, match=r"\[lgamma_\]"):
        kiln.tensor([1, 2]).lgamma_()


def test_special_values():
    inf, nan = math.inf, math.nan
    d = kiln.digamma(kiln.tensor([0.0, -0.0, -1.0, -2.25, 1.0], dtype=kiln.float64))
    assert d[0].item() == -inf and d[1].item() == inf and math.isnan(d[2].item())
    # Reflection: psi(-2.25) = psi(3.25) + pi cot(2.25 pi) = psi(3.25) + pi.
    assert d[3].item() == pytest.approx(float(_digamma(np.array(3.25))) + math.pi, rel=1e-9)
    assert d[4].item() == pytest.approx(-0.5772156649015329, rel=1e-13)
    assert kiln.polygamma(1, kiln.tensor([1.0], dtype=kiln.float64)).item() == pytest.approx(
        math.pi ** 2 / 6, rel=1e-13)
    assert kiln.polygamma(2, kiln.tensor([0.0])).item() == -inf
    assert kiln.polygamma(3, kiln.tensor([-1.0])).item() == inf
    assert_close(kiln.polygamma(2, kiln.tensor([-1.5], dtype=kiln.float64)), _polygamma(2, [-1.5]))
    e = kiln.erfinv(kiln.tensor([1.0, -1.0, 1.5, 0.0, 1 - 1e-12], dtype=kiln.float64))
    assert e[0].item() == inf and e[1].item() == -inf and math.isnan(e[2].item())
    assert e[3].item() == 0.0
    assert e[4].item() == pytest.approx(_erfinv_scalar(1 - 1e-12), rel=1e-9)
    assert kiln.sinc(kiln.tensor([0.0])).item() == 1.0
    big = kiln.i0(kiln.tensor([700.0, -20.0, nan], dtype=kiln.float64))
    assert big[0].item() == pytest.approx(float(np.i0(700.0)), rel=1e-12)
    assert big[1].item() == pytest.approx(float(np.i0(20.0)), rel=1e-13)
    assert math.isnan(big[2].item())
    assert kiln.lgamma(kiln.tensor([0.0])).item() == inf
    s = kiln.signbit(kiln.tensor([-0.0, 0.0, -1.0, nan, -inf]))
    assert s.dtype == kiln.bool and s.tolist() == [True, False, True, False, True]
    assert kiln.signbit(kiln.tensor([-3, 0, 2])).tolist() == [True, False, False]
    assert kiln.signbit(kiln.tensor([True, False])).tolist() == [False, False]


def test_log_ndtr_far_lower_tail():
    x = np.array([-12.0, -30.0, -9.5, -10.5])
    expected = np.log(0.5 * _erfc(-x / math.sqrt(2)))
    assert_close(kiln.special.log_ndtr(kiln.tensor(x)), expected, atol=1e-11, rtol=1e-11)
    # float32: ndtr itself underflows below about -14.
    got = kiln.special.log_ndtr(kiln.tensor([-20.0, -60.0], dtype=kiln.float32))
    far = -1800.0 - math.log(60.0) - 0.5 * math.log(2 * math.pi) + math.log(
        1 - 1 / 3600 + 3 / 3600 ** 2)
    assert_close(got, np.array([math.log(0.5 * math.erfc(20 / math.sqrt(2))), far]),
                 atol=1e-4, rtol=1e-6)
    gradcheck(kiln.special.log_ndtr, np.array([-11.0, -9.0, -30.0]))


def _ndtri_scalar(p):
    lo, hi = -40.0, 40.0
    for _ in range(200):  # bisection on log ndtr, accurate in the lower tail
        mid = (lo + hi) / 2
        if math.log(0.5 * math.erfc(-mid / math.sqrt(2))) < math.log(p):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def test_ndtri_tails():
    ps = [1e-300, 1e-20, 1e-10, 1e-3, 0.2, 0.3, 0.9]
    got = kiln.special.ndtri(kiln.tensor(ps, dtype=kiln.float64))
    assert_close(got, np.array([_ndtri_scalar(p) for p in ps]), atol=1e-13, rtol=1e-13)
    edges = kiln.special.ndtri(kiln.tensor([0.0, 1.0, 1.5])).tolist()
    assert edges[:2] == [-math.inf, math.inf] and math.isnan(edges[2])
    p32 = kiln.tensor([1e-30, 1e-6], dtype=kiln.float32)
    expected = np.array([_ndtri_scalar(v) for v in p32.double().tolist()])
    assert_close(kiln.special.ndtri(p32), expected, atol=1e-6, rtol=1e-6)
    gradcheck(kiln.special.ndtri, np.array([1e-3, 0.2, 0.8]))


def test_logit_eps_and_gradient():
    p = np.array([0.05, 0.3, 0.7, 0.97])
    x = kiln.tensor(p, requires_grad=True)
    y = kiln.logit(x, eps=0.1)
    c = np.clip(p, 0.1, 0.9)
    assert_close(y, np.log(c / (1 - c)))
    y.sum().backward()
    inside = (p >= 0.1) & (p <= 0.9)
    assert_close(x.grad, np.where(inside, 1 / (p * (1 - p)), 0.0))
    assert_close(kiln.special.logit(x.detach(), 0.1), np.log(c / (1 - c)))


def test_sgn_positive_fix_and_predicates():
    a = rand(3, 4)
    x = kiln.tensor(a)
    assert_close(kiln.sgn(x), np.sign(a))
    assert_close(x.sgn(), np.sign(a))
    assert kiln.positive(x) is x and x.positive() is x
    assert_close(kiln.fix(x), np.trunc(a))
    y = kiln.tensor(a)
    assert y.fix_() is y
    assert_close(y, np.trunc(a))
    with pytest.raises(RuntimeError, match=r"\[positive\]"):
        kiln.positive(kiln.tensor([True]))
    v = np.array([-np.inf, np.inf, np.nan, -1.0, 0.0, 1.0])
    t = kiln.tensor(v)
    assert kiln.isneginf(t).tolist() == np.isneginf(v).tolist()
    assert kiln.isposinf(t).tolist() == np.isposinf(v).tolist()
    assert t.isposinf().tolist() == np.isposinf(v).tolist()
    assert kiln.isneginf(kiln.tensor([-5, 3])).tolist() == [False, False]
    r = kiln.isreal(kiln.tensor(a))
    assert r.dtype == kiln.bool and r.shape == (3, 4) and bool(r.all())
    assert kiln.isreal(kiln.empty(0)).shape == (0,)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_binary_matches_reference(name, dtype):
    fn, ref, (la, ha), (lb, hb) = BINARY[name]
    a, b = _sample(la, ha, 3, 4), _sample(lb, hb, 3, 4)
    if name in ("xlogy", "special.xlog1py"):
        a[0, :2] = 0.0
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    got = fn(x, y)
    assert got.dtype == (kiln.float64 if name == "float_power" else dtype)
    tol = 1e-6 if dtype == kiln.float64 else 2e-5
    assert_close(got, ref(x.double().numpy(), y.double().numpy()), atol=tol, rtol=tol)
    # Broadcasting and non-contiguous operands.
    bb = _sample(lb, hb, 4)
    assert_close(fn(noncontig(a), kiln.tensor(bb)), ref(a, bb), atol=1e-6, rtol=1e-6)
    bc = _sample(lb, hb, 2, 3, 1)
    assert_close(fn(kiln.tensor(a[None, :, :1].transpose(0, 2, 1).copy()), kiln.tensor(bc)),
                 ref(a[None, :, :1].transpose(0, 2, 1), bc), atol=1e-6, rtol=1e-6)
    # 0-d and empty.
    assert_close(fn(kiln.tensor(a[1, 1]), kiln.tensor(b[1, 1])), ref(a[1, 1], b[1, 1]))
    assert fn(kiln.empty(0, 4), kiln.empty(4)).shape == (0, 4)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck(name):
    fn, _, (la, ha), (lb, hb) = BINARY[name]
    a, b = _sample(la, ha, 2, 3), _sample(lb, hb, 3)
    gradcheck(fn, a, b)


def test_xlogy_gradient_at_zero():
    # PyTorch's rule: the x gradient is g * log(y) (log1p(y)) even where x == 0, and 0 only
    # where x == 0 and y is outside the log's domain; the y gradient is g * x / y.
    x = kiln.tensor([0.0, 0.0, 0.0, 2.0], dtype=kiln.float64, requires_grad=True)
    y = kiln.tensor([0.5, 0.0, -1.0, 0.5], dtype=kiln.float64, requires_grad=True)
    kiln.xlogy(x, y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [math.log(0.5), 0.0, 0.0, math.log(0.5)])
    gy = y.grad.numpy()
    assert gy[0] == 0.0 and math.isnan(gy[1]) and gy[2] == 0.0 and gy[3] == 4.0
    x.grad = None
    kiln.special.xlog1py(x, kiln.tensor([0.5, -1.0, -2.0, 0.5], dtype=kiln.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [math.log1p(0.5), 0.0, 0.0, math.log1p(0.5)])
    # A zero upstream gradient stays zero against log(0) = -inf.
    x.grad = None
    (kiln.xlogy(x, kiln.tensor(0.0, dtype=kiln.float64)) * 0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_binary_python_numbers_and_integer_promotion():
    a = rand(3, 4)
    assert_close(kiln.xlogy(kiln.tensor(a), 2.5), a * math.log(2.5))
    assert_close(kiln.xlogy(0, kiln.tensor(np.abs(a))), np.zeros_like(a))
    assert_close(kiln.xlogy(2, kiln.tensor(np.abs(a))), 2 * np.log(np.abs(a)))
    x32 = kiln.tensor(np.abs(a), dtype=kiln.float32)
    assert kiln.xlogy(x32, 2.5).dtype == kiln.float32
    assert kiln.xlogy(kiln.tensor([1, 2]), kiln.tensor([3, 4])).dtype == kiln.float32
    assert kiln.xlogy(kiln.tensor([1.0], dtype=kiln.float64), kiln.tensor([3])).dtype == kiln.float64
    nan = kiln.xlogy(kiln.tensor([0.0, 0.0]), kiln.tensor([math.nan, 0.0])).tolist()
    assert math.isnan(nan[0]) and nan[1] == 0.0
    assert kiln.copysign(kiln.tensor([1, 2]), -1).tolist() == [-1.0, -2.0]
    assert kiln.copysign(kiln.tensor([3.0]), kiln.tensor([-0.0])).tolist() == [-3.0]
    assert kiln.hypot(kiln.tensor([3]), 4.0).tolist() == [5.0]
    for fn in [kiln.hypot, kiln.logaddexp, kiln.logaddexp2]:
        with pytest.raises(NotImplementedError, match=r"\[(hypot|logaddexp2?)\].*Long"):
            fn(kiln.tensor([3]), kiln.tensor([4]))
    assert kiln.ldexp(kiln.tensor([1.5]), kiln.tensor([3])).tolist() == [12.0]
    assert kiln.float_power(kiln.tensor([2]), 3).dtype == kiln.float64
    assert kiln.float_power(2, kiln.tensor([0.5], dtype=kiln.float32)).dtype == kiln.float64
    inf = math.inf
    assert kiln.logaddexp(kiln.tensor([inf, -inf]), kiln.tensor([inf, -inf])).tolist() == [inf, -inf]
    assert kiln.logaddexp(kiln.tensor([1000.0]), kiln.tensor([0.0])).item() == 1000.0


def test_binary_inplace_and_methods():
    a, b = _sample(0.5, 2, 3, 4), _sample(0.5, 2, 4)
    for name, ref in [("xlogy", _xlogy), ("hypot", np.hypot), ("copysign", np.copysign),
                      ("ldexp", lambda x, y: x * 2.0 ** y)]:
        x = kiln.tensor(a)
        assert_close(getattr(x, name)(kiln.tensor(b)), ref(a, b))
        assert getattr(x, name + "_")(kiln.tensor(b)) is x
        assert_close(x, ref(a, b))
    x = kiln.tensor(a)
    assert_close(x.logaddexp(kiln.tensor(b)), np.logaddexp(a, b))
    assert_close(x.logaddexp2(kiln.tensor(b)), np.logaddexp2(a, b))
    assert x.float_power_(2) is x
    assert_close(x, a ** 2)
    with pytest.raises(RuntimeError, match=r"\[float_power_\].*float32"):
        kiln.tensor(a, dtype=kiln.float32).float_power_(2)
    with pytest.raises(RuntimeError, match=r"\[xlogy_\]"):
        kiln.tensor([1, 2]).xlogy_(kiln.tensor([2.0, 3.0]))


def test_copysign_gradient():
    x = kiln.tensor([1.5, -2.0, 0.0], requires_grad=True)
    y = kiln.tensor([-1.0, -3.0, 2.0], requires_grad=True)
    kiln.copysign(x, y).sum().backward()
    assert x.grad.tolist() == [-1.0, 1.0, 0.0]
    assert y.grad.tolist() == [0.0, 0.0, 0.0]


def test_heaviside():
    a = np.array([-1.5, 0.0, 2.0, 0.0])
    v = np.array([0.5, 0.25, 0.75, 0.1])
    got = kiln.heaviside(kiln.tensor(a), kiln.tensor(v))
    assert_close(got, np.heaviside(a, v))
    assert_close(kiln.tensor(a).heaviside(kiln.tensor([0.3], dtype=kiln.float64)), np.heaviside(a, 0.3))
    x = kiln.tensor(a)
    assert x.heaviside_(kiln.tensor(v)) is x
    assert_close(x, np.heaviside(a, v))
    assert kiln.heaviside(kiln.tensor([-2, 0, 3]), kiln.tensor([7])).tolist() == [0, 7, 1]
    with pytest.raises(RuntimeError, match=r"\[heaviside\].*float32.*int64"):
        kiln.heaviside(kiln.tensor([1.0]), kiln.tensor([1]))
    g = kiln.tensor(a, requires_grad=True)
    out = kiln.heaviside(g, kiln.tensor(v))
    with pytest.raises(RuntimeError, match=r"\[heaviside\].*not implemented"):
        out.sum().backward()


def test_nextafter():
    a = rand(3, 4)
    b = rand(4)
    for dtype, np_dtype in [(kiln.float32, np.float32), (kiln.float64, np.float64)]:
        got = kiln.nextafter(kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype))
        expected = np.nextafter(a.astype(np_dtype), b.astype(np_dtype))
        assert (got.numpy() == expected).all()
    x = kiln.tensor([1.0, 1.0], dtype=kiln.float64)
    assert x.nextafter_(kiln.tensor([2.0, 0.0], dtype=kiln.float64)) is x
    assert x.tolist() == [1.0 + 2 ** -52, 1.0 - 2 ** -53]
    for dtype in [kiln.float16, kiln.int64]:
        with pytest.raises(NotImplementedError, match=r"\[nextafter\]"):
            kiln.nextafter(kiln.tensor([1, 2], dtype=dtype), kiln.tensor([0, 3], dtype=dtype))


def test_clamp_min_max():
    a = rand(3, 4)
    x = kiln.tensor(a)
    assert_close(kiln.clamp_min(x, 0.5), np.maximum(a, 0.5))
    assert_close(x.clamp_max(-0.5), np.minimum(a, -0.5))
    m = rand(4)
    assert_close(kiln.clamp_min(x, kiln.tensor(m)), np.maximum(a, m))
    assert_close(x.clamp_max(max=kiln.tensor(m)), np.minimum(a, m))
    assert kiln.clamp_min(kiln.tensor([1, 5]), 3).tolist() == [3, 5]
    assert kiln.clamp_min(kiln.tensor([1, 5]), 3.5).dtype == kiln.float32
    y = kiln.tensor(a)
    assert y.clamp_min_(0.0) is y
    assert_close(y, np.maximum(a, 0.0))
    y = kiln.tensor(a)
    y.clamp_max_(kiln.tensor(m))
    assert_close(y, np.minimum(a, m))
    gradcheck(lambda t: kiln.clamp_min(t, 0.3), a)
    gradcheck(lambda t, u: kiln.clamp_max(t, u), a, m)


def test_isin():
    e = rand(3, 4, dtype=np.int64, low=0, high=6)
    t = np.array([[1, 3], [5, 9]])
    got = kiln.isin(kiln.tensor(e), kiln.tensor(t))
    assert got.dtype == kiln.bool
    assert (got.numpy() == np.isin(e, t)).all()
    inv = kiln.isin(kiln.tensor(e), kiln.tensor(t), invert=True, assume_unique=True)
    assert (inv.numpy() == np.isin(e, t, invert=True)).all()
    assert kiln.isin(kiln.tensor(e).t(), 3).numpy().tolist() == (e.T == 3).tolist()
    assert kiln.isin(2, kiln.tensor(t)).item() is False
    assert kiln.isin(kiln.tensor(e), kiln.tensor([], dtype=kiln.int64)).any().item() is False
    assert kiln.isin(kiln.empty(0, dtype=kiln.int64), kiln.tensor(t)).shape == (0,)
    assert kiln.isin(kiln.tensor([1.0, 2.5]), kiln.tensor([2.5])).tolist() == [False, True]


def test_bad_input():
    with pytest.raises(RuntimeError, match=r"\[polygamma\].*negative n.*-1"):
        kiln.polygamma(-1, kiln.tensor([1.0]))
    with pytest.raises(RuntimeError, match=r"\[xlogy\]"):
        kiln.xlogy(kiln.ones(2, 3), kiln.ones(4))
    with pytest.raises(TypeError):
        kiln.heaviside(kiln.tensor([1.0]), 0.5)
    with pytest.raises(RuntimeError, match=r"\[hypot\]"):
        kiln.hypot(kiln.ones(2), kiln.ones(3))


def test_special_namespace():
    s = kiln.special
    x = kiln.tensor(_sample(0.2, 0.8, 2, 3))
    assert s.gammaln is kiln.lgamma and s.psi is kiln.digamma and s.digamma is kiln.digamma
    assert s.expit is kiln.sigmoid and s.erfinv is kiln.erfinv and s.round is kiln.round
    assert_close(s.expit(x), 1 / (1 + np.exp(-x.numpy())))
    assert_close(s.polygamma(1, x), _polygamma(1, x.numpy()))
    assert_close(s.xlogy(x, x), x.numpy() * np.log(x.numpy()))
    assert_close(s.logsumexp(x, 1), np.log(np.exp(x.numpy()).sum(1)))
    assert_close(s.softmax(x, 1), np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True))
    assert_close(s.log_softmax(x, dim=0), np.log(np.exp(x.numpy()) / np.exp(x.numpy()).sum(0)))
    for name in ["erf", "erfc", "exp2", "expm1", "log1p", "i0", "sinc", "logit"]:
        assert getattr(s, name) is getattr(kiln, name)


def test_double_backward_through_lgamma_and_erfinv():
    x = kiln.tensor([0.7, 2.5], dtype=kiln.float64, requires_grad=True)
    (g,) = kiln.autograd.grad(kiln.lgamma(x).sum(), x, create_graph=True)
    assert_close(g, _digamma(np.array([0.7, 2.5])), atol=1e-8, rtol=1e-8)
    (h,) = kiln.autograd.grad(g.sum(), x)
    assert_close(h, _polygamma(1, np.array([0.7, 2.5])), atol=1e-8, rtol=1e-8)
    gradcheck(lambda t: kiln.autograd.grad(kiln.erfinv(t).sum(), t, create_graph=True)[0],
              np.array([-0.4, 0.3]))


# CUDA against the CPU, for every new op table entry, in all float dtypes.
CUDA_UNARY = {
    "lgamma": (kiln.lgamma, 0.2, 5),
    "digamma": (kiln.digamma, 0.2, 5),
    "digamma_reflected": (lambda t: kiln.digamma(t - 3.5), 0.1, 0.9),
    "erfc": (kiln.erfc, -2, 2),
    "erfinv": (kiln.erfinv, -0.95, 0.95),
    "i0": (kiln.i0, -4, 4),
    "i1": (kiln.special.i1, -4, 4),
    "polygamma1": (lambda t: kiln.polygamma(1, t), 0.2, 5),
    "polygamma4": (lambda t: kiln.polygamma(4, t), 0.5, 5),
}
_GPU_DTYPES = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]


def _gpu_tol(dtype):
    return {kiln.float64: 1e-10, kiln.float32: 1e-4, kiln.float16: 2e-3, kiln.bfloat16: 1e-2}[dtype]


@requires_gpu
@pytest.mark.parametrize("name", sorted(CUDA_UNARY))
@pytest.mark.parametrize("dtype", _GPU_DTYPES)
def test_cuda_unary_matches_cpu(name, dtype):
    fn, low, high = CUDA_UNARY[name]
    x = kiln.tensor(_sample(low, high, 5, 67), dtype=dtype)
    tol = _gpu_tol(dtype)
    got = fn(x.to("cuda"))
    assert got.dtype == dtype and got.device.type == "cuda"
    assert_close(got.cpu().double(), fn(x).double().numpy(), atol=tol, rtol=tol)
    # Strided kernel path.
    assert_close(fn(x.to("cuda").t()).cpu().double(), fn(x.t()).double().numpy(), atol=tol,
                 rtol=tol)


@requires_gpu
@pytest.mark.parametrize("dtype", _GPU_DTYPES + [kiln.int32, kiln.bool])
def test_cuda_signbit_matches_cpu(dtype):
    x = kiln.tensor(rand(4, 9) * 3, dtype=dtype)
    assert kiln.signbit(x.to("cuda")).cpu().tolist() == kiln.signbit(x).tolist()


@requires_gpu
def test_cuda_nextafter_and_composites_match_cpu():
    a, b = rand(4, 33), rand(33)
    for dtype in [kiln.float32, kiln.float64]:
        x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
        got = kiln.nextafter(x.to("cuda"), y.to("cuda")).cpu()
        assert (got.numpy() == kiln.nextafter(x, y).numpy()).all()
    with pytest.raises(NotImplementedError, match=r"\[nextafter\]"):
        kiln.nextafter(kiln.ones(2, dtype=kiln.float16, device="cuda"),
                       kiln.ones(2, dtype=kiln.float16, device="cuda"))
    x, y = kiln.tensor(np.abs(a) + 0.1), kiln.tensor(b)
    for fn in [kiln.xlogy, kiln.logaddexp, kiln.logaddexp2, kiln.hypot, kiln.copysign,
               kiln.ldexp, kiln.float_power, kiln.special.xlog1py]:
        assert_close(fn(x.cuda(), y.cuda()).cpu(), fn(x, y).numpy(), atol=1e-10, rtol=1e-10)
    for fn in [kiln.sinc, kiln.special.ndtr, kiln.special.log_ndtr, kiln.special.entr,
               lambda t: kiln.logit(t / 10, eps=0.05)]:
        assert_close(fn(y.cuda()).cpu(), fn(y).numpy(), atol=1e-10, rtol=1e-10)
    assert kiln.xlogy(2.0, y.cuda().abs()).device.type == "cuda"
    e = kiln.tensor([1, 4, 7])
    assert kiln.isin(e.cuda(), kiln.tensor([4, 5]).cuda()).cpu().tolist() == [False, True, False]


@requires_gpu
def test_cuda_gradients_match_cpu():
    a = _sample(0.3, 0.9, 3, 4)
    grads = []
    for device in ["cpu", "cuda"]:
        x = kiln.tensor(a, device=device, requires_grad=True)
        (kiln.lgamma(x) + kiln.digamma(x) + kiln.erfinv(x) + kiln.i0(x) + kiln.erfc(x)
         + kiln.polygamma(2, x)).sum().backward()
        grads.append(x.grad.cpu().numpy())
    assert_close(kiln.tensor(grads[1]), grads[0], atol=1e-9, rtol=1e-9)


# PyTorch comparison (runs where torch is installed: the GPU machine).
DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]

TORCH_UNARY = ["lgamma", "digamma", "erfc", "erfinv", "i0", "sinc", "sgn", "fix", "logit",
               "isneginf", "isposinf", "signbit", "special.i1", "special.ndtr", "special.ndtri",
               "special.log_ndtr", "special.entr", "special.expit", "special.gammaln"]
TORCH_BINARY = ["xlogy", "logaddexp", "logaddexp2", "hypot", "copysign", "nextafter", "ldexp",
                "float_power", "special.xlog1py", "clamp_min", "clamp_max"]


def _resolve(module, name):
    for part in name.split("."):
        module = getattr(module, part)
    return module


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TORCH_UNARY)
def test_unary_matches_pytorch(device, name):
    torch = pytest.importorskip("torch")
    a = rand(4, 5, low=0.05, high=0.95) if name in ("erfinv", "logit", "special.ndtri") else rand(
        4, 5, low=0.2, high=4)
    x = kiln.tensor(a, requires_grad=True, device=device)
    t = torch.tensor(a, requires_grad=True, device=device)
    got, ref = _resolve(kiln, name)(x), _resolve(torch, name)(t)
    assert str(got.dtype) == str(ref.dtype).replace("torch.", "kiln.")
    assert_close(got.detach().cpu(), ref.detach().cpu().numpy(), atol=1e-9, rtol=1e-9)
    if ref.dtype == torch.float64 and name not in ("sgn", "fix"):
        got.sum().backward()
        ref.sum().backward()
        assert_close(x.grad.cpu(), t.grad.cpu().numpy(), atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_polygamma_matches_pytorch(device, n):
    torch = pytest.importorskip("torch")
    a = rand(3, 4, low=-3.3, high=6)
    got = kiln.polygamma(n, kiln.tensor(a, device=device)).cpu()
    ref = torch.polygamma(n, torch.tensor(a, device=device)).cpu()
    assert_close(got, ref.numpy(), atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TORCH_BINARY)
def test_binary_matches_pytorch(device, name):
    torch = pytest.importorskip("torch")
    a, b = rand(3, 4, low=0.2, high=3), rand(4, low=-2, high=2)
    if name in ("xlogy", "special.xlog1py"):
        a[0, 0] = 0.0
    x = kiln.tensor(a, requires_grad=True, device=device)
    t = torch.tensor(a, requires_grad=True, device=device)
    got = _resolve(kiln, name)(x, kiln.tensor(b, device=device))
    ref = _resolve(torch, name)(t, torch.tensor(b, device=device))
    assert str(got.dtype) == str(ref.dtype).replace("torch.", "kiln.")
    assert_close(got.detach().cpu(), ref.detach().cpu().numpy(), atol=1e-9, rtol=1e-9)
    if name != "nextafter":
        got.sum().backward()
        ref.sum().backward()
        assert_close(x.grad.cpu(), t.grad.cpu().numpy(), atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("device", DEVICES)
def test_predicates_and_promotion_match_pytorch(device):
    torch = pytest.importorskip("torch")
    e = rand(3, 4, dtype=np.int64, low=0, high=6)
    got = kiln.isin(kiln.tensor(e, device=device), kiln.tensor([1, 4], device=device), invert=True)
    ref = torch.isin(torch.tensor(e, device=device), torch.tensor([1, 4], device=device),
                     invert=True)
    assert got.cpu().tolist() == ref.cpu().tolist()
    ints = [[1, 2], [3, 4]]
    for name in ["lgamma", "digamma", "erfc", "i0", "sinc"]:
        g = _resolve(kiln, name)(kiln.tensor(ints, device=device))
        r = _resolve(torch, name)(torch.tensor(ints, device=device))
        assert str(g.dtype) == str(r.dtype).replace("torch.", "kiln.")
        assert_close(g.cpu(), r.cpu().numpy(), atol=1e-6, rtol=1e-6)
    g = kiln.xlogy(kiln.tensor([0, 2], device=device), 3)
    r = torch.xlogy(torch.tensor([0, 2], device=device), 3)
    assert str(g.dtype) == str(r.dtype).replace("torch.", "kiln.")
    assert_close(g.cpu(), r.cpu().numpy())
    v = torch.tensor([0.5], device=device, dtype=torch.float64)
    r = torch.heaviside(torch.tensor([-1.0, 0.0, 2.0], device=device, dtype=torch.float64), v)
    g = kiln.heaviside(kiln.tensor([-1.0, 0.0, 2.0], device=device), kiln.tensor([0.5], device=device))
    assert_close(g.cpu(), r.cpu().numpy())
