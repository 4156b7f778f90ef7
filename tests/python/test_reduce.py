"""Reductions and scans against NumPy: values, dims/keepdim, dtypes, layouts,
0-d and empty inputs, gradients (float64 gradcheck) and error types."""

import math

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand

DIMS = [None, 0, 1, -1, (0, 2), (-1, 0)]
FLOATS = [kiln.float32, kiln.float64]


def axis(dim):
    return dim if dim is None or isinstance(dim, int) else tuple(dim)


def grad_of(fn, a):
    x = kiln.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


# ---------------------------------------------------------------- sum / mean / prod


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_match_numpy(dtype, dim, keepdim):
    a = rand(2, 3, 4, dtype=NP_DTYPE[dtype])
    x = kiln.tensor(a)
    assert_close(x.sum(dim, keepdim), a.sum(axis(dim), keepdims=keepdim), dtype)
    assert_close(kiln.mean(x, dim, keepdim), a.mean(axis(dim), keepdims=keepdim), dtype)
    assert kiln.sum(x, dim).dtype == dtype


def test_sum_integer_and_bool_accumulate_in_int64():
    a = rand(3, 4, dtype=np.int32)
    s = kiln.tensor(a).sum(1)
    assert s.dtype == kiln.int64
    assert_close(s, a.sum(1))
    b = rand(3, 4, dtype=np.bool_)
    assert kiln.tensor(b).sum().item() == b.sum()
    assert kiln.tensor(a).sum(dtype=kiln.float64).dtype == kiln.float64


def test_sum_mean_noncontig_0d_empty():
    a = rand(3, 4, 5)
    assert_close(noncontig(a).sum((0, 1)), a.sum((0, 1)))
    assert_close(noncontig(a).mean(-1, True), a.mean(-1, keepdims=True))
    s = kiln.tensor(2.5)
    assert_close(s.sum(0), 2.5)
    assert_close(s.mean(-1, keepdim=True), 2.5)
    assert kiln.zeros(0, 3).sum().item() == 0
    assert_close(kiln.zeros(0, 3).sum(0), np.zeros(3))
    assert math.isnan(kiln.zeros(0).mean().item())


def test_half_sum_accumulates_in_float():
    x = kiln.ones(4096, dtype=kiln.float16)
    assert x.sum().item() == 4096  # float16 running sums stall at 2048
    assert kiln.ones(3000, dtype=kiln.bfloat16).sum().item() == pytest.approx(3000, rel=1e-2)


def test_sum_mean_grad():
    gradcheck(lambda x: x.sum(1), rand(2, 3))
    gradcheck(lambda x: x.mean((0, 1), keepdim=True), rand(2, 3))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64])
def test_prod_matches_numpy(dim, keepdim, dtype):
    a = rand(3, 4, dtype=NP_DTYPE[dtype], low=0.5, high=1.5)
    got = kiln.prod(kiln.tensor(a), dim, keepdim) if dim is not None else kiln.tensor(a).prod()
    want = a.prod(dim, keepdims=keepdim) if dim is not None else a.prod()
    assert_close(got, want, dtype)
    assert got.dtype == (kiln.int64 if dtype == kiln.int64 else dtype)


def test_prod_dtype_noncontig_0d_empty():
    a = rand(3, 4, dtype=np.int32)
    assert kiln.tensor(a).prod(1).dtype == kiln.int64
    assert kiln.tensor(a).prod(dtype=kiln.float64).dtype == kiln.float64
    b = rand(4, 3)
    assert_close(noncontig(b).prod(0), b.prod(0))
    assert_close(kiln.tensor(3.0).prod(0), 3.0)
    assert kiln.zeros(0).prod().item() == 1
    assert_close(kiln.zeros(2, 0).prod(1), np.ones(2))


@pytest.mark.parametrize("a", [
    [[0.5, 1.5, -2.0], [1.2, -0.7, 0.9]],
    [[0.0, 1.5, -2.0], [1.2, 0.0, 0.9]],      # one zero per row
    [[0.0, 1.5, 0.0], [0.0, 0.0, 0.0]],       # several zeros
])
def test_prod_grad_with_zeros(a):
    gradcheck(lambda x: x.prod(1), a)
    gradcheck(lambda x: x.prod(), a)
    gradcheck(lambda x: x.prod(0, keepdim=True), a)


def test_prod_grad_single_zero_is_product_of_others():
    assert_close(grad_of(lambda x: x.prod(), [2.0, 0.0, 3.0]), [0.0, 6.0, 0.0])
    assert_close(grad_of(lambda x: x.prod(), [0.0, 0.0, 3.0]), [0.0, 0.0, 0.0])


# ---------------------------------------------------------------- max / min / amax / amin


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_values_and_indices(dtype, dim, keepdim):
    a = rand(3, 5, dtype=NP_DTYPE[dtype])
    for fn, np_val, np_arg in [(kiln.max, np.max, np.argmax), (kiln.min, np.min, np.argmin)]:
        res = fn(kiln.tensor(a), dim, keepdim)
        values, indices = res
        assert res.values is values and res.indices is indices
        assert indices.dtype == kiln.int64 and values.dtype == dtype
        assert_close(values, np_val(a, dim, keepdims=keepdim), dtype)
        want = np_arg(a, dim)
        assert_close(indices, np.expand_dims(want, dim) if keepdim else want)


def test_max_min_full_and_methods():
    a = rand(4, 3)
    x = noncontig(a)
    assert x.max().dim() == 0
    assert_close(x.max(), a.max())
    assert_close(x.min(), a.min())
    assert_close(x.max(dim=0).values, a.max(0))
    assert_close(x.min(1, keepdim=True).indices, a.argmin(1)[:, None])
    assert type(x.max(0)).__name__ == "max"
    assert_close(x.argmin(np.int64(1)), a.argmin(1))
    assert kiln.tensor([True, False]).max().item() is True


def test_max_min_with_tensor_other_is_elementwise():
    a, b = rand(2, 3), rand(3)
    assert_close(kiln.max(kiln.tensor(a), kiln.tensor(b)), np.maximum(a, b))
    assert_close(kiln.min(kiln.tensor(a), kiln.tensor(b)), np.minimum(a, b))
    assert_close(kiln.tensor(a).max(kiln.tensor(b)), np.maximum(a, b))
    assert_close(kiln.max(kiln.tensor(a), other=kiln.tensor(b)), np.maximum(a, b))


def test_max_min_ties_and_nan():
    x = kiln.tensor([[1.0, 3.0, 3.0], [2.0, float("nan"), 5.0]])
    assert x.max(1).indices.tolist() == [1, 1]
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    assert math.isnan(x.amax(1).tolist()[1]) and math.isnan(x.amin(1).tolist()[1])
    assert x.argmin(1).tolist() == [0, 1]
    assert kiln.tensor([2, 7, 7, 1]).argmax().item() == 1


def test_max_min_0d():
    s = kiln.tensor(4.0)
    v, i = s.max(0)
    assert v.dim() == 0 and i.dim() == 0 and v.item() == 4.0 and i.item() == 0
    v, i = s.min(-1, keepdim=True)
    assert v.shape == () and i.item() == 0
    assert s.argmax().item() == 0 and s.argmax(0).item() == 0
    assert s.amax().item() == 4.0 and s.amin(0).item() == 4.0


@pytest.mark.parametrize("dim", [(), 0, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin_match_numpy(dim, keepdim):
    a = rand(2, 3, 4)
    ax = None if dim == () else dim
    assert_close(kiln.amax(kiln.tensor(a), dim, keepdim), a.max(ax, keepdims=keepdim))
    assert_close(noncontig(a).amin(dim, keepdim), a.min(ax, keepdims=keepdim))
    ai = rand(2, 3, 4, dtype=np.int64)
    assert_close(kiln.tensor(ai).amax(dim, keepdim), ai.max(ax, keepdims=keepdim))


def test_max_min_amax_grads():
    gradcheck(lambda x: x.max(1).values, rand(2, 3))
    gradcheck(lambda x: x.min(0, keepdim=True)[0], rand(2, 3))
    gradcheck(lambda x: x.max(), rand(2, 3))
    gradcheck(lambda x: x.amin((0, 1)), rand(2, 3))
    gradcheck(lambda x: x.amax(-1, keepdim=True), rand(2, 3))
    gradcheck(lambda x: kiln.max(x, x * 0.5 + 0.3), rand(2, 3))


def test_extreme_grad_tie_rules():
    ties = [[1.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
    assert_close(grad_of(lambda x: x.amax(1), ties), [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    assert_close(grad_of(lambda x: x.max(), ties), np.array([[0, 1, 1], [1, 1, 1]]) / 5)
    # Along a dim, the whole gradient goes to the returned (first) index.
    assert_close(grad_of(lambda x: x.max(1).values, ties), [[0, 1, 0], [1, 0, 0]])
    assert_close(grad_of(lambda x: x.min(1)[0], ties), [[1, 0, 0], [1, 0, 0]])


# ---------------------------------------------------------------- argmax / argmin


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_match_numpy(dim, keepdim):
    a = rand(3, 4, dtype=np.int64)  # small integers: many ties, first index must win
    for fn, ref in [(kiln.argmax, np.argmax), (kiln.argmin, np.argmin)]:
        got = fn(kiln.tensor(a), dim, keepdim)
        want = ref(a, axis=dim, keepdims=keepdim)
        assert got.dtype == kiln.int64
        assert_close(got, want)
    got = noncontig(a.astype(np.float32)).argmax(dim, keepdim=keepdim)
    assert_close(got, np.argmax(a, axis=dim, keepdims=keepdim))


# ---------------------------------------------------------------- all / any


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("np_dtype", [np.bool_, np.float32, np.int64])
def test_all_any_match_numpy(dim, keepdim, np_dtype):
    a = rand(4, 3, dtype=np.bool_).astype(np_dtype)
    if np_dtype != np.bool_:
        a = a * rand(4, 3, dtype=np_dtype)  # values other than 0/1, still some zeros
    ax = axis(dim)
    got_all = kiln.all(kiln.tensor(a), dim, keepdim)
    got_any = kiln.tensor(a).any(dim, keepdim=keepdim)
    assert got_all.dtype == kiln.bool and got_any.dtype == kiln.bool
    assert_close(got_all, np.all(a, ax, keepdims=keepdim))
    assert_close(got_any, np.any(a, ax, keepdims=keepdim))


def test_all_any_uint8_nan_0d_empty():
    u = kiln.tensor(np.array([0, 3], dtype=np.uint8))
    assert u.all().dtype == kiln.uint8 and u.any().item() == 1 and u.all().item() == 0
    assert kiln.tensor([float("nan"), 1.0]).all().item() is True
    assert kiln.tensor(0.0).any(0).item() is False
    assert kiln.zeros(0).all().item() is True and kiln.zeros(0).any().item() is False
    assert kiln.zeros(2, 0).all(1).tolist() == [True, True]


# ---------------------------------------------------------------- var / std


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std_match_numpy(dim, correction, keepdim):
    a = rand(3, 4, 5)
    ax = axis(dim)
    want_var = np.var(a, ax, ddof=correction, keepdims=keepdim)
    assert_close(kiln.var(kiln.tensor(a), dim, correction=correction, keepdim=keepdim), want_var)
    assert_close(noncontig(a).std(dim, correction=correction, keepdim=keepdim), np.sqrt(want_var))
    v, m = kiln.var_mean(kiln.tensor(a), dim, correction=correction, keepdim=keepdim)
    assert_close(v, want_var)
    assert_close(m, a.mean(ax, keepdims=keepdim))
    s, m = kiln.std_mean(kiln.tensor(a), dim, correction=correction, keepdim=keepdim)
    assert_close(s, np.sqrt(want_var))


def test_var_std_unbiased_spellings_and_float32():
    a = rand(4, 5)
    x = kiln.tensor(a)
    assert_close(x.var(), np.var(a, ddof=1))
    assert_close(x.var(False), np.var(a))
    assert_close(x.std(1, False), np.std(a, 1))
    assert_close(kiln.std(x, 0, True, True), np.std(a, 0, ddof=1, keepdims=True))
    assert_close(x.var(1, unbiased=False, keepdim=True), np.var(a, 1, keepdims=True))
    f = rand(4, 5, dtype=np.float32)
    assert_close(kiln.tensor(f).std(0), np.std(f.astype(np.float64), 0, ddof=1), kiln.float32)
    assert math.isnan(kiln.tensor(1.5).var().item())
    assert kiln.tensor(1.5).var(correction=0).item() == 0


def test_var_std_grad():
    gradcheck(lambda x: x.var(1), rand(2, 3))
    gradcheck(lambda x: x.std(0, correction=0, keepdim=True), rand(2, 3))
    gradcheck(lambda x: kiln.std(x), rand(2, 3))
    gradcheck(lambda x: kiln.var_mean(x, 1), rand(2, 3))


# ---------------------------------------------------------------- norm


def np_norm(a, p, axis=None, keepdims=False):
    ab = np.abs(a)
    if p == math.inf:
        return ab.max(axis, keepdims=keepdims)
    if p == -math.inf:
        return ab.min(axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis, keepdims=keepdims).astype(a.dtype)
    with np.errstate(divide="ignore"):  # 0 ** negative p is inf, as it is in kiln
        return (ab ** p).sum(axis, keepdims=keepdims) ** (1 / p)


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_norm_matches_numpy(p, dim, keepdim):
    a = rand(3, 4)
    a[0, 1] = 0.0
    ax = axis(dim)
    if p < 0 and ax is not None:  # a zero makes the negative norm 0 along that slice only
        a[0, 1] = 0.3
    assert_close(kiln.norm(kiln.tensor(a), p, dim, keepdim), np_norm(a, p, ax, keepdim))
    assert_close(noncontig(a).norm(p, dim, keepdim), np_norm(a, p, ax, keepdim))
    assert_close(kiln.linalg.vector_norm(kiln.tensor(a), p, dim, keepdim),
                 np_norm(a, p, ax, keepdim))


def test_norm_defaults_fro_and_dtype():
    a = rand(3, 4, dtype=np.float32)
    x = kiln.tensor(a)
    assert_close(x.norm(), np.linalg.norm(a), kiln.float32)
    assert_close(kiln.norm(x, "fro", (0, 1)), np.linalg.norm(a), kiln.float32)
    assert x.norm(dtype=kiln.float64).dtype == kiln.float64
    assert_close(kiln.tensor(-2.0).norm(), 2.0)
    assert kiln.zeros(0, 3).norm().item() == 0


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 3, 1.5])
def test_norm_grad(p):
    gradcheck(lambda x: x.norm(p), rand(2, 3))
    gradcheck(lambda x: x.norm(p, 1, keepdim=True), rand(2, 3))


def test_norm_grad_at_zero_is_finite():
    g = grad_of(lambda x: x.norm(), np.zeros((2, 3)))
    assert np.all(g == 0)
    g = grad_of(lambda x: x.norm(dim=1), [[0.0, 0.0], [3.0, 4.0]])
    assert_close(g, [[0, 0], [0.6, 0.8]])
    assert np.all(np.isfinite(grad_of(lambda x: x.norm(0.5), [[0.0, 1.0]])))
    assert np.all(grad_of(lambda x: x.norm(0), [[2.0, 1.0]]) == 0)


# ---------------------------------------------------------------- logsumexp


def np_logsumexp(a, axis, keepdims=False):
    m = a.max(axis, keepdims=True)
    out = np.log(np.exp(a - m).sum(axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


@pytest.mark.parametrize("dim", [0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_logsumexp_matches_numpy(dim, keepdim, dtype):
    a = rand(3, 4, dtype=NP_DTYPE[dtype]) * 10
    assert_close(kiln.logsumexp(kiln.tensor(a), dim, keepdim),
                 np_logsumexp(a.astype(np.float64), dim, keepdim), dtype)
    assert_close(noncontig(a).logsumexp(dim, keepdim=keepdim),
                 np_logsumexp(a.astype(np.float64), dim, keepdim), dtype)


def test_logsumexp_stable_inf_int_0d():
    x = kiln.tensor([[1000.0, 1000.0], [-1000.0, -1001.0]])
    assert_close(x.logsumexp(1), [1000 + math.log(2), -1000 + math.log1p(math.exp(-1))],
                 kiln.float32)
    assert x.logsumexp(1).isfinite().all().item()
    inf = kiln.tensor([[-math.inf, -math.inf], [math.inf, 1.0]])
    assert inf.logsumexp(1).tolist() == [-math.inf, math.inf]
    i = kiln.logsumexp(kiln.tensor([1, 2, 3]), 0)
    assert i.dtype == kiln.float32
    assert_close(i, np_logsumexp(np.array([1.0, 2, 3]), 0), kiln.float32)
    assert_close(kiln.tensor(2.0).logsumexp(0), 2.0)
    assert kiln.zeros(2, 0).logsumexp(1).tolist() == [-math.inf, -math.inf]


def test_logsumexp_grad():
    gradcheck(lambda x: x.logsumexp(1), rand(2, 3))
    gradcheck(lambda x: kiln.logsumexp(x * 300, (0, 1), keepdim=True), rand(2, 3))


# ---------------------------------------------------------------- cumsum / cumprod


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.int32])
def test_cumsum_cumprod_match_numpy(dim, dtype):
    a = rand(2, 3, 4, dtype=NP_DTYPE[dtype])
    cs, cp = kiln.tensor(a).cumsum(dim), kiln.cumprod(kiln.tensor(a), dim)
    want_dtype = kiln.int64 if dtype == kiln.int32 else dtype
    assert cs.dtype == want_dtype and cp.dtype == want_dtype
    assert_close(cs, np.cumsum(a, dim), dtype)
    assert_close(cp, np.cumprod(a, dim), dtype)
    assert_close(noncontig(a).cumsum(dim), np.cumsum(a, dim), dtype)
    assert cs.is_contiguous()


def test_scan_dtype_bool_0d_empty():
    b = rand(5, dtype=np.bool_)
    assert kiln.tensor(b).cumsum(0).dtype == kiln.int64
    assert_close(kiln.tensor(b).cumsum(0), np.cumsum(b))
    a = rand(3, 4, dtype=np.int64)
    got = kiln.cumsum(kiln.tensor(a), 1, dtype=kiln.float64)
    assert got.dtype == kiln.float64
    assert_close(got, np.cumsum(a, 1))
    assert kiln.tensor(3.0).cumprod(0).item() == 3.0 and kiln.tensor(2).cumsum(-1).item() == 2
    assert kiln.zeros(2, 0).cumsum(1).shape == (2, 0)
    assert kiln.zeros(0, 3).cumprod(1).shape == (0, 3)
    h = kiln.full((1000,), 0.1, dtype=kiln.float16).cumsum(0)
    assert h.tolist()[-1] == pytest.approx(100.0, rel=2e-3)


def test_cumsum_grad():
    gradcheck(lambda x: x.cumsum(1), rand(2, 3))
    gradcheck(lambda x: kiln.cumsum(x, 0), rand(2, 3))
    gradcheck(lambda x: x.cumsum(0), rand())


@pytest.mark.parametrize("a", [
    rand(3, 4),
    [[0.0, 1.5, -2.0, 0.7], [1.2, 0.0, 0.9, -1.1], [1.1, 0.8, -0.6, 0.0]],   # one zero
    [[0.0, 0.0, 2.0, 0.7], [1.2, 0.0, 0.9, 0.0], [0.0, 0.0, 0.0, 0.0]],      # several
])
def test_cumprod_grad_with_zeros(a):
    gradcheck(lambda x: x.cumprod(1), a)
    gradcheck(lambda x: x.cumprod(0), a)


def test_cumprod_grad_zero_exact():
    # y = [2, 0, 0]; dL/dx1 = x0 + x0*x2 = 2 + 6, dL/dx2 = x0*x1 = 0.
    assert_close(grad_of(lambda x: x.cumprod(0), [2.0, 0.0, 3.0]), [1.0, 8.0, 0.0])


@pytest.mark.parametrize("op", [
    lambda x: x.prod(1),
    lambda x: x.cumprod(1),
    lambda x: x.cumsum(0),
    lambda x: x.max(1).values,
    lambda x: x.amin(0),
    lambda x: x.norm(dim=1),
    lambda x: x.norm(3),
    lambda x: x.var(1),
    lambda x: x.logsumexp(1),
])
def test_double_backward(op):
    # Squaring makes the second derivative depend on the backward rule's own derivative.
    def first_grad(x):
        out = op(x)
        (g,) = kiln.autograd.grad((out * out).sum(), x, create_graph=True)
        return g

    gradcheck(first_grad, rand(2, 3))


# ---------------------------------------------------------------- half types, nan-aware and extras


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_half_types_reduce_and_scan(dtype):
    a = np.array([[1.5, -2.0, 4.0, 0.5], [3.0, 3.0, -1.0, 2.0]])
    x = kiln.tensor(a, dtype=dtype)
    v, i = x.max(1)
    assert v.dtype == dtype and v.tolist() == [4.0, 3.0] and i.tolist() == [2, 0]
    assert x.amin().item() == -2.0 and x.argmin(1).tolist() == [1, 2]
    assert x.prod(1).tolist() == [-6.0, -18.0]
    assert x.cumsum(1).tolist() == np.cumsum(a, 1).tolist()
    assert x.mean().item() == pytest.approx(a.mean(), rel=1e-2)
    assert x.std().item() == pytest.approx(a.std(ddof=1), rel=2e-2)
    assert x.norm().item() == pytest.approx(np.linalg.norm(a), rel=1e-2)
    assert x.logsumexp(1).tolist() == pytest.approx(np_logsumexp(a, 1), rel=1e-2)


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_nanmean_count_nonzero(dim, keepdim):
    a = rand(3, 4)
    a[0, 1] = a[2, 3] = np.nan
    a[1, 2] = 0.0
    ax = axis(dim)
    assert_close(kiln.nansum(kiln.tensor(a), dim, keepdim), np.nansum(a, ax, keepdims=keepdim))
    assert_close(noncontig(a).nanmean(dim, keepdim), np.nanmean(a, ax, keepdims=keepdim))
    got = kiln.count_nonzero(kiln.tensor(a), dim)
    assert got.dtype == kiln.int64
    assert_close(got, np.count_nonzero(a, ax))
    gradcheck(lambda x: kiln.nansum(x, dim, keepdim), rand(2, 3))
    gradcheck(lambda x: x.nanmean(dim, keepdim), rand(2, 3))


def test_aminmax():
    a = rand(3, 4)
    r = kiln.aminmax(kiln.tensor(a))
    assert_close(r.min, a.min())
    assert_close(r.max, a.max())
    lo, hi = kiln.tensor(a).aminmax(dim=1, keepdim=True)
    assert_close(lo, a.min(1, keepdims=True))
    assert_close(hi, a.max(1, keepdims=True))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("call, op", [
    (lambda x: x.sum(3), "sum"),
    (lambda x: x.mean(-4), "mean"),
    (lambda x: x.prod(2), "prod"),
    (lambda x: x.max(2), "max"),
    (lambda x: x.min(-3), "min"),
    (lambda x: x.amax(5), "amax"),
    (lambda x: x.argmax(2), "argmax"),
    (lambda x: x.all(2), "all"),
    (lambda x: x.var(2), "var"),
    (lambda x: x.norm(2, 7), "norm"),
    (lambda x: x.logsumexp(2), "logsumexp"),
    (lambda x: x.cumsum(2), "cumsum"),
    (lambda x: x.cumprod(-3), "cumprod"),
    (lambda x: kiln.tensor(1.0).sum(1), "sum"),
    (lambda x: kiln.tensor(1.0).cumsum(1), "cumsum"),
])
def test_dim_out_of_range_is_index_error(call, op):
    with pytest.raises(IndexError, match=rf"\[{op}\]"):
        call(kiln.ones(2, 3))


def test_empty_extremes_raise_like_pytorch():
    with pytest.raises(RuntimeError, match=r"\[max\]"):
        kiln.zeros(0).max()
    with pytest.raises(RuntimeError, match=r"\[min\]"):
        kiln.zeros(0, 2).min()
    with pytest.raises(IndexError, match=r"\[argmax\]"):
        kiln.zeros(0).argmax()
    with pytest.raises(IndexError, match=r"\[max\]"):
        kiln.zeros(0, 2).max(0)
    with pytest.raises(IndexError, match=r"\[amax\]"):
        kiln.zeros(2, 0).amax(1)
    with pytest.raises(IndexError, match=r"\[argmin\]"):
        kiln.zeros(0, 2).argmin(0)
    assert kiln.zeros(0, 2).max(1).values.shape == (0,)


def test_bad_argument_errors():
    with pytest.raises(RuntimeError, match=r"\[mean\]"):
        kiln.tensor([1, 2]).mean()
    with pytest.raises(RuntimeError, match=r"\[var\]"):
        kiln.tensor([1, 2]).var()
    with pytest.raises(RuntimeError, match=r"\[std\]"):
        kiln.std(kiln.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"\[var\]"):
        kiln.ones(3).var(unbiased=True, correction=0)
    with pytest.raises(RuntimeError, match=r"\[norm\]"):
        kiln.tensor([1, 2]).norm()
    with pytest.raises(RuntimeError, match=r"\[linalg.vector_norm\]"):
        kiln.linalg.vector_norm(kiln.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"\[norm\] p='nuc' without dim needs a 2-D input"):
        kiln.ones(2, 2, 2).norm("nuc")
    with pytest.raises(TypeError, match=r"\[prod\]"):
        kiln.ones(2, 2).prod((0, 1))
    with pytest.raises(TypeError, match=r"\[max\]"):
        kiln.ones(2, 2).max("a")
    with pytest.raises(TypeError, match=r"\[min\]"):
        kiln.ones(2, 2).min(keepdim=True)
    with pytest.raises(RuntimeError, match=r"\[nanmean\]"):
        kiln.tensor([1, 2]).nanmean()
    with pytest.raises(RuntimeError, match=r"\[max\]|\[maximum\]"):
        kiln.max(kiln.ones(2), kiln.ones(3))
    with pytest.raises(RuntimeError, match=r"\[sum\]"):
        kiln.ones(2, 3).sum((0, 0))
