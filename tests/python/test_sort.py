"""sort/argsort/topk/kthvalue/median/unique against NumPy."""

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand

DTYPES = [kiln.float32, kiln.float64, kiln.float16, kiln.int64, kiln.int32, kiln.uint8, kiln.bool]


def _np(dtype):
    return NP_DTYPE[dtype]


def _with_ties(shape, dtype):
    """Small-range data so ties are common and stability matters."""
    if dtype == np.bool_:
        return rand(*shape, dtype=np.bool_)
    return rand(*shape, dtype=np.int64).astype(dtype)


def _stable_desc(a, axis):
    """NumPy stable descending argsort (ties keep input order)."""
    n = a.shape[axis]
    flipped = np.flip(a, axis)
    idx = np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis)
    return n - 1 - idx


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_numpy_stable(dtype, dim, descending):
    a = _with_ties((4, 7), _np(dtype))
    values, indices = kiln.sort(kiln.tensor(a), dim=dim, descending=descending, stable=True)
    if descending:
        ref_idx = _stable_desc(a, dim)
    else:
        ref_idx = np.argsort(a, axis=dim, kind="stable")
    assert values.dtype == dtype and indices.dtype == kiln.int64
    assert_close(indices, ref_idx)
    assert_close(values, np.take_along_axis(a, ref_idx, axis=dim))


def test_sort_namedtuple_method_and_noncontig():
    a = rand(3, 5)
    r = noncontig(a).sort(0)
    assert_close(r.values, np.sort(a, 0))
    assert_close(r.indices, np.argsort(a, 0, kind="stable"))
    values, indices = r
    assert values is r.values and indices is r.indices
    assert type(r).__name__ == "sort"
    assert r.values.is_contiguous() and r.indices.is_contiguous()


def test_sort_nan_is_largest():
    a = np.array([3.0, np.nan, -1.0, np.nan, 2.0, -np.inf, np.inf])
    v, i = kiln.sort(kiln.tensor(a))
    assert_close(v, np.sort(a))
    assert_close(i, np.argsort(a, kind="stable"))
    v, i = kiln.sort(kiln.tensor(a), descending=True, stable=None)
    assert_close(i, [1, 3, 6, 0, 4, 2, 5])


def test_sort_0d_empty_3d():
    v, i = kiln.sort(kiln.tensor(2.5))
    assert tuple(v.shape) == () and i.item() == 0
    v, i = kiln.sort(kiln.tensor(np.zeros((0, 3))), dim=0)
    assert tuple(v.shape) == (0, 3)
    a = rand(2, 3, 4)
    v, i = kiln.sort(kiln.tensor(a), dim=1, descending=True)
    assert_close(v, -np.sort(-a, axis=1))
    with pytest.raises(IndexError, match=r"\[sort\]"):
        kiln.sort(kiln.ones(2, 3), dim=2)


@pytest.mark.parametrize("dim", [0, -1])
def test_argsort(dim):
    a = _with_ties((5, 6), np.float32)
    assert_close(kiln.argsort(kiln.tensor(a), dim, stable=True), np.argsort(a, dim, kind="stable"))
    assert_close(kiln.tensor(a).argsort(dim=dim, descending=True), _stable_desc(a, dim))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.int16])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_match_numpy(dtype, largest):
    a = rand(4, 9, dtype=_np(dtype))
    for k in (0, 1, 4, 9):
        v, i = kiln.topk(kiln.tensor(a), k, largest=largest)
        ref = -np.sort(-a, axis=1)[:, :k] if largest else np.sort(a, axis=1)[:, :k]
        assert_close(v, ref)
        assert_close(v, np.take_along_axis(a, i.numpy(), axis=1))


def test_topk_dim_noncontig_nan_and_method():
    a = rand(6, 3)
    r = noncontig(a).topk(2, dim=0)
    assert_close(r.values, -np.sort(-a, axis=0)[:2])
    assert type(r).__name__ == "topk"
    b = np.array([1.0, np.nan, 5.0, 2.0])
    assert np.isnan(kiln.topk(kiln.tensor(b), 1).values.item())
    assert_close(kiln.topk(kiln.tensor(b), 2, largest=False).values, [1.0, 2.0])
    v, i = kiln.topk(kiln.tensor(1.5), 1)
    assert tuple(v.shape) == () and i.item() == 0


def test_topk_errors():
    with pytest.raises(RuntimeError, match=r"\[topk\].*k = 4"):
        kiln.topk(kiln.ones(3), 4)
    with pytest.raises(RuntimeError, match=r"\[topk\]"):
        kiln.topk(kiln.ones(3), -1)
    with pytest.raises(IndexError, match=r"\[topk\]"):
        kiln.topk(kiln.ones(3), 1, dim=1)


def test_kthvalue_and_median():
    a = rand(4, 7)
    for k in (1, 3, 7):
        v, i = kiln.kthvalue(kiln.tensor(a), k)
        assert_close(v, np.sort(a, 1)[:, k - 1])
        assert_close(v, np.take_along_axis(a, i.numpy()[:, None], 1)[:, 0])
    r = kiln.tensor(a).kthvalue(2, dim=0, keepdim=True)
    assert tuple(r.values.shape) == (1, 7)
    assert_close(r.values, np.sort(a, 0)[1:2])
    with pytest.raises(RuntimeError, match=r"\[kthvalue\]"):
        kiln.kthvalue(kiln.ones(3), 4)
    # Lower median, as PyTorch defines it.
    assert_close(kiln.median(kiln.tensor(a)), np.sort(a.ravel())[(a.size - 1) // 2])
    m = kiln.tensor(a).median(dim=1)
    assert_close(m.values, np.sort(a, 1)[:, 3])
    assert_close(m.indices, np.argsort(a, 1, kind="stable")[:, 3])
    b = np.array([[1.0, np.nan, 3.0], [2.0, 0.0, 1.0]])
    m = kiln.median(kiln.tensor(b), 1)
    mv, mi = m.values.numpy(), m.indices.numpy()
    assert np.isnan(mv[0]) and mi[0] == 1
    assert mv[1] == 1.0 and mi[1] == 2
    assert np.isnan(kiln.median(kiln.tensor(b)).item())
    assert np.isnan(kiln.median(kiln.tensor(np.zeros((0, 2)))).item())
    with pytest.raises(IndexError, match=r"\[median\]"):
        kiln.median(kiln.tensor(np.zeros((0, 2))), 0)
    with pytest.raises(IndexError, match=r"\[kthvalue\]"):
        kiln.kthvalue(kiln.tensor(np.zeros((2, 0))), 1)
    ints = np.array([5, 1, 4, 2], dtype=np.int64)
    assert kiln.median(kiln.tensor(ints)).item() == 2


def test_sort_family_gradcheck():
    a = rand(3, 4)
    gradcheck(lambda x: kiln.sort(x, dim=1)[0], a)
    gradcheck(lambda x: kiln.sort(x, dim=0, descending=True).values, a)
    gradcheck(lambda x: kiln.topk(x, 2, dim=1).values, a)
    gradcheck(lambda x: kiln.topk(x, 2, dim=0, largest=False).values, a)
    gradcheck(lambda x: kiln.kthvalue(x, 2, 1).values, a)
    gradcheck(lambda x: kiln.kthvalue(x, 2, 0, keepdim=True).values, a)
    gradcheck(lambda x: kiln.median(x, 1).values, a)
    gradcheck(lambda x: kiln.median(x), a)


def test_sort_backward_scatters_to_indices():
    a = rand(2, 5)
    x = kiln.tensor(a, requires_grad=True)
    v, i = kiln.topk(x, 2)
    w = rand(2, 2)
    (v * kiln.tensor(w)).sum().backward()
    ref = np.zeros_like(a)
    np.put_along_axis(ref, i.numpy(), w, axis=1)
    assert_close(x.grad, ref)


def test_sort_double_backward():
    a = rand(2, 4)
    x = kiln.tensor(a, requires_grad=True)
    v = kiln.sort(x, 1).values
    (g,) = kiln.autograd.grad((v * v).sum(), [x], create_graph=True)
    assert_close(g, 2 * a)
    g.sum().backward()
    assert_close(x.grad, np.full_like(a, 2.0))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.int8, kiln.bool])
def test_unique_matches_numpy(dtype):
    a = _with_ties((3, 5), _np(dtype))
    out, inverse, counts = kiln.unique(kiln.tensor(a), return_inverse=True, return_counts=True)
    ref, ref_inv, ref_counts = np.unique(a, return_inverse=True, return_counts=True)
    assert out.dtype == dtype
    assert_close(out, ref)
    assert_close(inverse, ref_inv.reshape(a.shape))
    assert_close(counts, ref_counts)


def test_unique_return_forms():
    a = np.array([3, 1, 3, 2, 1], dtype=np.int64)
    t = kiln.tensor(a)
    assert isinstance(kiln.unique(t), kiln.Tensor)
    out, inv = t.unique(return_inverse=True)
    assert_close(inv, [2, 0, 2, 1, 0])
    out, counts = kiln.unique(t, return_counts=True)
    assert_close(counts, [2, 1, 2])
    b = rand(3, 4, dtype=np.int64)
    assert_close(kiln.unique(noncontig(b)), np.unique(b))
    assert tuple(kiln.unique(kiln.tensor(np.zeros((0,)))).shape) == (0,)
    assert_close(kiln.unique(kiln.tensor(4.0)), [4.0])


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_unique_along_a_dim_matches_numpy(dim):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (6, 3, 2)).astype(np.int64)
    x[3] = x[1]  # guaranteed repeats along dim 0
    out, inverse, counts = kiln.unique(kiln.tensor(x), dim=dim, return_inverse=True,
                                       return_counts=True)
    u, inv, cnt = np.unique(x, axis=dim, return_inverse=True, return_counts=True)
    assert out.tolist() == u.tolist()
    assert inverse.tolist() == inv.ravel().tolist() and counts.tolist() == cnt.tolist()
    f = kiln.tensor(x.astype(np.float64)).t() if x.ndim == 2 else kiln.tensor(x * 0.5)
    assert kiln.unique(f, dim=dim).tolist() == np.unique(x * 0.5, axis=dim).tolist()


def test_unique_along_a_dim_of_empty_and_bad_dim():
    out, inverse, counts = kiln.unique(kiln.zeros(0, 3), dim=0, return_inverse=True,
                                       return_counts=True)
    assert out.shape == (0, 3) and inverse.shape == (0,) and counts.shape == (0,)
    with pytest.raises(IndexError, match=r"\[unique\]"):
        kiln.unique(kiln.ones(2, 2), dim=2)
