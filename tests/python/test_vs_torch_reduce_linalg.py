"""Reductions, scans and matrix products against the installed PyTorch on the same device
(runs where PyTorch is installed: the GPU machine)."""

import math

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

# seeded_data is an autouse fixture: importing it enables it here.
from torch_compare import (  # noqa: E402, F401
    DEVICES, Fixed, GRAD_DTYPES, HALF_DTYPES, Strided, U, bools, check, check_raises, distinct,
    ints, reseed, seeded_data)

reseed(__name__)


INF = math.inf

REDUCE = [
    ("sum_all", lambda lib, x: x.sum()),
    ("sum_dim", lambda lib, x: lib.sum(x, 1)),
    ("sum_dims_keepdim", lambda lib, x: x.sum(dim=(0, 2), keepdim=True)),
    ("sum_neg_dim", lambda lib, x: x.sum(-1)),
    ("sum_dtype", lambda lib, x: x.sum(1, dtype=lib.float64)),
    ("mean_all", lambda lib, x: lib.mean(x)),
    ("mean_dims", lambda lib, x: lib.mean(x, (0, -1))),
    ("mean_keepdim", lambda lib, x: x.mean(1, keepdim=True)),
    ("prod_all", lambda lib, x: x.prod()),
    ("prod_dim", lambda lib, x: lib.prod(x, 1, keepdim=True)),
    ("amax_dims", lambda lib, x: x.amax(dim=(0, 2))),
    ("amin_keepdim", lambda lib, x: lib.amin(x, 1, keepdim=True)),
    ("amax_all", lambda lib, x: lib.amax(x)),
    ("max_all", lambda lib, x: x.max()),
    ("min_all", lambda lib, x: lib.min(x)),
    ("max_dim", lambda lib, x: x.max(1)),
    ("min_dim_keepdim", lambda lib, x: lib.min(x, dim=-1, keepdim=True)),
    ("max_binary", lambda lib, x: lib.max(x, x.flip(0) * 0.9)),
    ("argmax_all", lambda lib, x: x.argmax().to(x.dtype) + x),
    ("argmax_dim", lambda lib, x: lib.argmax(x, dim=1, keepdim=True)),
    ("argmin_dim", lambda lib, x: x.argmin(2)),
    ("var_all", lambda lib, x: x.var()),
    ("var_correction0", lambda lib, x: lib.var(x, dim=1, correction=0)),
    ("var_dims_keepdim", lambda lib, x: x.var((0, 2), keepdim=True)),
    ("std_correction2", lambda lib, x: x.std(dim=-1, correction=2)),
    ("std_unbiased_false", lambda lib, x: lib.std(x, dim=1, unbiased=False)),
    ("var_mean", lambda lib, x: lib.var_mean(x, dim=1, correction=1)),
    ("std_mean", lambda lib, x: lib.std_mean(x, dim=(0, 1))),
    ("norm_fro", lambda lib, x: x.norm()),
    ("norm_p1_dim", lambda lib, x: lib.norm(x, p=1, dim=1)),
    ("norm_inf_dims", lambda lib, x: x.norm(p=INF, dim=(1, 2))),
    ("norm_p3_keepdim", lambda lib, x: x.norm(3, dim=0, keepdim=True)),
    ("vector_norm", lambda lib, x: lib.linalg.vector_norm(x, ord=2, dim=(0, 2))),
    ("vector_norm_1.5", lambda lib, x: lib.linalg.vector_norm(x, ord=1.5)),
    ("vector_norm_-inf", lambda lib, x: lib.linalg.vector_norm(x, ord=-INF, dim=1)),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, dim=1)),
    ("logsumexp_dims", lambda lib, x: x.logsumexp((0, 2), keepdim=True)),
    ("cumsum", lambda lib, x: lib.cumsum(x, dim=1)),
    ("cumprod", lambda lib, x: x.cumprod(-1)),
    ("cumsum_dtype", lambda lib, x: x.cumsum(0, dtype=lib.float64)),
    ("cumprod_dim0", lambda lib, x: lib.cumprod(x, 0)),
    ("cummax", lambda lib, x: lib.cummax(x, dim=1)),
    ("cummin", lambda lib, x: x.cummin(-1)),
    ("logcumsumexp", lambda lib, x: lib.logcumsumexp(x, 1)),
    ("logcumsumexp_dim0", lambda lib, x: x.logcumsumexp(0)),
    ("median_all", lambda lib, x: x.median()),
    ("median_dim", lambda lib, x: lib.median(x, dim=1)),
    ("kthvalue", lambda lib, x: lib.kthvalue(x, 2, dim=1)),
    ("kthvalue_keepdim", lambda lib, x: x.kthvalue(3, 0, keepdim=True)),
    ("aminmax", lambda lib, x: lib.aminmax(x, dim=0)),
    ("nansum", lambda lib, x: lib.nansum(x, 1)),
    ("nanmean", lambda lib, x: lib.nanmean(x, dim=(0, 2))),
    ("all_dim", lambda lib, x: lib.all(x > -1.2, dim=1)),
    ("any_all", lambda lib, x: (x > 1.4).any()),
    ("count_nonzero", lambda lib, x: lib.count_nonzero(x > 0, dim=(0, 2))),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("name,fn", [pytest.param(n, f, id=n) for n, f in REDUCE])
def test_reduction(name, fn, dtype, device):
    # Half types round partial sums differently between implementations.
    tol = (3e-2, 3e-2) if dtype in HALF_DTYPES else None
    grad = name != "aminmax"  # PyTorch has no derivative for aminmax to compare with
    check(fn, [distinct(3, 4, 5)], device, dtype, tol=tol, grad=grad)
    check(fn, [Strided(distinct(3, 4, 5))], device, dtype, tol=tol, grad=grad)


@pytest.mark.parametrize("device", DEVICES)
def test_reduction_nan_inputs(device):
    x = distinct(3, 4)
    x[0, 1] = x[2, 3] = math.nan
    for fn in [lambda lib, x: lib.nansum(x), lambda lib, x: x.nanmean(1),
               lambda lib, x: x.sum(0), lambda lib, x: x.amax(1), lambda lib, x: x.max(1)[0],
               lambda lib, x: x.argmax(1), lambda lib, x: lib.nan_to_num(x).sum(),
               lambda lib, x: x.isnan().any(1)]:
        check(fn, [x], device, grad=False)
    check(lambda lib, x: lib.nansum(x, 0), [x], device)


def ARGMIN(lib, x):
    return x.argmin()


INT_REDUCE = [
    ("argmin", ARGMIN),
    ("sum", lambda lib, x: x.sum()),
    ("sum_dim", lambda lib, x: x.sum(0)),
    ("prod", lambda lib, x: x.prod(1)),
    ("amax", lambda lib, x: x.amax(1)),
    ("max_dim", lambda lib, x: x.max(0)),
    ("min_all", lambda lib, x: x.min()),
    ("all", lambda lib, x: x.all()),
    ("any_dim", lambda lib, x: lib.any(x, 1)),
    ("all_dim_keepdim", lambda lib, x: x.all(dim=0, keepdim=True)),
    ("cumsum", lambda lib, x: x.cumsum(1)),
    ("cumprod", lambda lib, x: x.cumprod(0)),
    ("cummax_ties", lambda lib, x: x.cummax(1)),
    ("cummin_ties", lambda lib, x: lib.cummin(x, 0)),
    ("count_nonzero", lambda lib, x: x.count_nonzero()),
    ("mean_dtype", lambda lib, x: x.mean(dtype=lib.float64)),
    ("norm_of_float", lambda lib, x: x.float().norm()),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in INT_REDUCE])
def test_integer_and_bool_reduction(fn, dtype, device):
    # Small values keep prod/cumprod inside int8.
    x = bools(3, 4) if dtype == np.bool_ else ints(3, 4, low=0 if dtype == np.uint8 else -2,
                                                  high=3, dtype=dtype)
    if dtype == np.bool_ and fn is ARGMIN:  # PyTorch has no argmin for bool: NumPy's
        got = kiln.tensor(x, device=device).argmin()
        assert got.device.type == device and got.item() == int(np.argmin(x))
        return
    check(fn, [Fixed(x)], device)


@pytest.mark.parametrize("device", DEVICES)
def test_reduction_empty_and_0d(device):
    empty = U(0, 3)
    for fn in [lambda lib, x: x.sum(), lambda lib, x: x.sum(0), lambda lib, x: x.mean(1),
               lambda lib, x: x.prod(), lambda lib, x: x.amax(1), lambda lib, x: x.all(),
               lambda lib, x: x.any(), lambda lib, x: x.cumsum(0), lambda lib, x: x.norm(),
               lambda lib, x: x.logsumexp(0)]:
        check(fn, [empty], device, grad=False)
    check_raises(lambda lib, x: x.amax(0), [empty], device)
    check_raises(lambda lib, x: x.argmax(), [empty], device)
    check_raises(lambda lib, x: x.mean(), [Fixed(ints(3))], device)
    for fn in [lambda lib, x: x.sum(), lambda lib, x: x.mean(), lambda lib, x: x.amax(),
               lambda lib, x: x.sum(0, keepdim=True), lambda lib, x: x.cumsum(0),
               lambda lib, x: x.prod(), lambda lib, x: x.logsumexp(0), lambda lib, x: x.norm(),
               lambda lib, x: x.max(0)]:
        check(fn, [U(low=0.5, high=1.5)], device)
    check(lambda lib, x: x.argmax(), [U()], device)


MATMUL = [
    ("vec_vec", lambda lib, a, b: lib.matmul(a, b), [U(4), U(4)]),
    ("mat_vec", lambda lib, a, b: a @ b, [U(3, 4), U(4)]),
    ("vec_mat", lambda lib, a, b: a @ b, [U(3), U(3, 4)]),
    ("mat_mat", lambda lib, a, b: lib.matmul(a, b), [U(3, 4), U(4, 5)]),
    ("mat_mat_transposed", lambda lib, a, b: a @ b, [Strided(U(3, 4)), Strided(U(4, 5))]),
    ("mat_mat_sliced", lambda lib, a, b: a @ b.mT, [Strided(U(3, 4), "step"), U(5, 4)]),
    ("batched_broadcast", lambda lib, a, b: a @ b, [U(2, 1, 3, 4), U(5, 4, 2)]),
    ("batched_transposed", lambda lib, a, b: a.transpose(-1, -2) @ b,
     [Strided(U(2, 4, 3)), U(2, 4, 2)]),
    ("batched_vec", lambda lib, a, b: lib.matmul(a, b), [U(2, 3, 4), U(4)]),
    ("vec_batched", lambda lib, a, b: lib.matmul(a, b), [U(3), U(2, 3, 4)]),
    ("mm", lambda lib, a, b: lib.mm(a, b), [U(3, 4), U(4, 5)]),
    ("mm_method_T", lambda lib, a, b: a.t().mm(b), [U(4, 3), Strided(U(4, 5))]),
    ("bmm", lambda lib, a, b: lib.bmm(a, b), [U(2, 3, 4), U(2, 4, 5)]),
    ("bmm_transposed", lambda lib, a, b: a.bmm(b.transpose(1, 2)), [U(2, 3, 4), U(2, 5, 4)]),
    ("addmm", lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=2.0),
     [U(5), U(3, 4), U(4, 5)]),
    ("addmm_default", lambda lib, c, a, b: c.addmm(a, b), [U(3, 5), U(3, 4), U(4, 5)]),
    ("baddbmm", lambda lib, c, a, b: lib.baddbmm(c, a, b, beta=0.5, alpha=2.0),
     [U(3, 5), U(2, 3, 4), U(2, 4, 5)]),
    ("baddbmm_method", lambda lib, c, a, b: c.baddbmm(a, b), [U(2, 3, 5), U(2, 3, 4), U(2, 4, 5)]),
    ("addbmm", lambda lib, c, a, b: lib.addbmm(c, a, b, beta=0.5, alpha=2.0),
     [U(3, 5), Strided(U(2, 3, 4)), U(2, 4, 5)]),
    ("addmv", lambda lib, c, a, b: lib.addmv(c, a, b, alpha=-1.5), [U(3), U(3, 4), U(4)]),
    ("addr", lambda lib, c, a, b: c.addr(a, b, beta=2.0), [U(3, 4), U(3), U(4)]),
    ("dot", lambda lib, a, b: lib.dot(a, b), [U(5), U(5)]),
    ("dot_method", lambda lib, a, b: a.dot(b), [Strided(U(5), "step"), U(5)]),
    ("outer", lambda lib, a, b: lib.outer(a, b), [U(3), U(4)]),
    ("inner", lambda lib, a, b: lib.inner(a, b), [U(3), U(3)]),
    ("inner_2d", lambda lib, a, b: lib.inner(a, b), [U(2, 3), U(4, 3)]),
    ("inner_3d", lambda lib, a, b: a.inner(b), [Strided(U(2, 3, 4)), U(4)]),
    ("mv", lambda lib, a, b: lib.mv(a, b), [Strided(U(3, 4)), U(4)]),
    ("empty_k", lambda lib, a, b: a @ b, [U(3, 0), U(0, 4)]),
    ("empty_batch", lambda lib, a, b: a @ b, [U(0, 3, 4), U(4, 2)]),
]

EINSUM = [
    ("ij,jk->ik", [U(3, 4), U(4, 5)]),
    ("ij,jk", [U(3, 4), U(4, 5)]),
    ("bij,bjk->bik", [U(2, 3, 4), U(2, 4, 5)]),
    ("ij->ji", [Strided(U(3, 4))]),
    ("i,j->ij", [U(3), U(4)]),
    ("...ij,...jk->...ik", [U(2, 1, 3, 4), U(5, 4, 2)]),
    ("bhqd,bhkd->bhqk", [U(2, 2, 3, 4), U(2, 2, 5, 4)]),
    ("ijk->j", [U(2, 3, 4)]),
    ("ij,jk,kl->il", [U(2, 3), U(3, 4), U(4, 2)]),
    ("i,i->", [U(5), U(5)]),
    ("bn,anm,bm->ba", [U(2, 3), U(4, 3, 5), U(2, 5)]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + HALF_DTYPES)
@pytest.mark.parametrize("fn,inputs", [
    c if isinstance(c, type(pytest.param(0))) else pytest.param(c[1], c[2], id=c[0])
    for c in MATMUL] + [
    pytest.param(lambda lib, *ops, eq=eq: lib.einsum(eq, *ops), inputs, id="einsum_" + eq)
    for eq, inputs in EINSUM] + [
    pytest.param(lambda lib, a, eq=eq: lib.einsum(eq, a), [U(4, 4)], id="einsum_" + eq)
    for eq in ("ii->", "ii->i")] + [
    pytest.param(lambda lib, a, b: lib.einsum("bii,bi->b", a, b), [U(2, 3, 3), U(2, 3)],
                 id="einsum_bii,bi->b")])
def test_matmul_family(fn, inputs, dtype, device):
    tol = None
    if dtype in HALF_DTYPES:
        # Three-operand einsums round the pairwise intermediate to 8 bits; kiln and
        # PyTorch contract in different orders, so sums that cancel differ by more.
        tol = (2e-2, 1e-1) if len(inputs) > 2 else (2e-2, 2e-2)
    check(fn, inputs, device, dtype, tol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_shape_errors(device):
    check_raises(lambda lib, a, b: a @ b, [U(3, 4), U(3, 4)], device)
    check_raises(lambda lib, a, b: lib.bmm(a, b), [U(2, 3, 4), U(3, 4, 5)], device)
    check_raises(lambda lib, a, b: lib.mm(a, b), [U(3), U(3, 4)], device)
    check_raises(lambda lib, a, b: lib.dot(a, b), [U(3), U(4)], device)
    check_raises(lambda lib, c, a, b: lib.baddbmm(c, a, b), [U(2, 3, 5), U(2, 3, 4), U(3, 4, 5)],
                 device)
    check_raises(lambda lib, c, a, b: lib.addbmm(c, a, b), [U(4, 5), U(2, 3, 4), U(2, 4, 5)],
                 device)
    check_raises(lambda lib, a, b: a @ b, [U(3, 4), Fixed(ints(4, 2))], device)
