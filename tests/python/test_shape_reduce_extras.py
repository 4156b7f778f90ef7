"""Shape helpers, reducing scatters, finite differences and statistics composed from
existing ops (ops/shape_extra.cpp, ops/index_reduce.cpp, ops/calculus.cpp,
ops/statistics.cpp), checked against NumPy and, where installed, PyTorch."""
import itertools

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand, requires_gpu, to_kiln

trapezoid_np = getattr(np, "trapezoid", None) or np.trapz


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize("fn", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (0,)])
def test_atleast(fn, shape):
    a = rand(*shape)
    out = getattr(kiln, fn)(to_kiln(a))
    assert_close(out, getattr(np, fn)(a))
    pair = getattr(kiln, fn)(to_kiln(a), to_kiln(a))
    assert isinstance(pair, tuple) and len(pair) == 2
    seq = getattr(kiln, fn)([to_kiln(a)])
    assert_close(seq[0], getattr(np, fn)(a))


def test_atleast_is_a_view():
    x = kiln.tensor([1.0, 2.0])
    y = kiln.atleast_3d(x)
    y[0, 1, 0] = 7.0
    assert x[1].item() == 7.0


def test_column_row_stack():
    a, b, c = rand(3), rand(3, 2), rand(3)
    assert_close(kiln.column_stack([to_kiln(a), noncontig(b), to_kiln(c)]),
                 np.column_stack([a, b, c]))
    assert_close(kiln.column_stack((kiln.tensor(1.0), kiln.tensor(2.0))),
                 np.column_stack([np.float64(1), np.float64(2)]))
    assert_close(kiln.row_stack([to_kiln(a), to_kiln(c)]), np.vstack([a, c]))
    gradcheck(lambda x, y: kiln.column_stack([x, y]), rand(3), rand(3, 2))


@pytest.mark.parametrize("fn,shape", [("hsplit", (4,)), ("hsplit", (3, 4)), ("vsplit", (4, 3)),
                                      ("dsplit", (2, 3, 4))])
def test_hvd_split(fn, shape):
    a = rand(*shape)
    for ios in (2, [1, 3], [3, 1], [0, 10]):
        ours = getattr(kiln, fn)(noncontig(a), ios)
        ref = getattr(np, fn)(a, ios)
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            assert_close(o, r)
    x = to_kiln(a)
    parts = getattr(x, fn)(2)
    assert parts[0].data_ptr() == x.data_ptr()  # views, not copies


def test_split_errors():
    with pytest.raises(RuntimeError, match=r"\[hsplit\].*not divisible"):
        kiln.hsplit(kiln.zeros(3, 4), 3)
    with pytest.raises(RuntimeError, match=r"\[hsplit\].*0 dimensions"):
        kiln.hsplit(kiln.tensor(1.0), 1)
    with pytest.raises(RuntimeError, match=r"\[vsplit\].*at least 2"):
        kiln.vsplit(kiln.zeros(4), 2)
    with pytest.raises(RuntimeError, match=r"\[dsplit\].*at least 3"):
        kiln.dsplit(kiln.zeros(4, 4), 2)


def test_ravel_argwhere():
    a = rand(3, 4)
    x = to_kiln(a)
    r = x.ravel()
    assert_close(r, a.ravel())
    assert r.data_ptr() == x.data_ptr()
    assert_close(kiln.ravel(noncontig(a)), a.ravel())
    b = a > 0
    assert_close(kiln.argwhere(noncontig(b)), np.argwhere(b))
    assert_close(to_kiln(b).argwhere(), np.argwhere(b))
    assert kiln.argwhere(kiln.tensor(1.0)).shape == (1, 0)


def block_diag_np(*arrays):
    arrays = [np.atleast_2d(a) for a in arrays]
    rows, cols = sum(a.shape[0] for a in arrays), sum(a.shape[1] for a in arrays)
    out = np.zeros((rows, cols), dtype=np.result_type(*arrays))
    r = c = 0
    for a in arrays:
        out[r:r + a.shape[0], c:c + a.shape[1]] = a
        r, c = r + a.shape[0], c + a.shape[1]
    return out


def test_block_diag():
    a, b, c = rand(2, 3), rand(3), np.float64(4.0)
    out = kiln.block_diag(noncontig(a), to_kiln(b), kiln.tensor(c))
    assert_close(out, block_diag_np(a, b, c))
    i = rand(2, 2, dtype=np.int64)
    mixed = kiln.block_diag(to_kiln(i), to_kiln(a))
    assert mixed.dtype == kiln.float64
    assert_close(mixed, block_diag_np(i, a))
    assert kiln.block_diag(kiln.zeros(0, 2), kiln.ones(1, 1)).shape == (1, 3)
    gradcheck(lambda x, y: kiln.block_diag(x, y), rand(2, 3), rand(2))
    with pytest.raises(RuntimeError, match=r"\[block_diag\].*Input 0 has 3 dimensions"):
        kiln.block_diag(kiln.zeros(1, 1, 1))


def diag_embed_np(a, offset, dim1, dim2):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)
    for idx in np.ndindex(*a.shape[:-1]):
        out[idx] = np.diag(a[idx], offset)
    nd = a.ndim + 1
    return np.moveaxis(out, [nd - 2, nd - 1], [dim1 % nd, dim2 % nd])


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (2, 1, 0)])
def test_diag_embed(offset, dim1, dim2):
    a = rand(2, 3)
    assert_close(kiln.diag_embed(noncontig(a), offset, dim1, dim2),
                 diag_embed_np(a, offset, dim1, dim2))
    assert_close(to_kiln(a).diag_embed(offset=offset, dim1=dim1, dim2=dim2),
                 diag_embed_np(a, offset, dim1, dim2))
    gradcheck(lambda x: kiln.diag_embed(x, offset, dim1, dim2), rand(2, 3))
    with pytest.raises(RuntimeError, match=r"\[diag_embed\].*identical"):
        kiln.diag_embed(to_kiln(a), 0, 1, 1)


def test_diagflat():
    a = rand(2, 2)
    for k in (0, 1, -2):
        assert_close(kiln.diagflat(noncontig(a), k), np.diagflat(a, k))
        assert_close(to_kiln(a).diagflat(offset=k), np.diagflat(a, k))
    gradcheck(lambda x: kiln.diagflat(x, 1), rand(2, 2))


@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (4, 3, 1), (3, 5, -1), (0, 3, 0), (3, 3, 9)])
def test_triangle_indices(row, col, offset):
    assert_close(kiln.tril_indices(row, col, offset), np.stack(np.tril_indices(row, offset, col)))
    assert_close(kiln.triu_indices(row, col, offset), np.stack(np.triu_indices(row, offset, col)))
    out = kiln.tril_indices(row, col, offset, dtype=kiln.int32)
    assert out.dtype == kiln.int32 and out.shape[0] == 2
    assert kiln.triu_indices(row, col).dtype == kiln.int64
    with pytest.raises(RuntimeError, match=r"\[tril_indices\] row must be non-negative"):
        kiln.tril_indices(-1, 3)


@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations(r, with_replacement):
    a = rand(4)
    out = kiln.combinations(to_kiln(a), r, with_replacement)
    if r == 0:
        assert out.shape == (0,)
        return
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    ref = np.array(list(gen(a, r))).reshape(-1, r)
    assert_close(out, ref)


def test_combinations_grad_and_errors():
    gradcheck(lambda x: kiln.combinations(x, 2), rand(4))
    with pytest.raises(RuntimeError, match=r"\[combinations\] Expect a 1D vector"):
        kiln.combinations(kiln.zeros(2, 2))
    with pytest.raises(RuntimeError, match=r"\[combinations\] Expect a non-negative"):
        kiln.combinations(kiln.zeros(3), -1)


@pytest.mark.parametrize("N,increasing", [(None, False), (4, True), (1, False), (0, False)])
def test_vander(N, increasing):
    a = rand(3)
    assert_close(kiln.vander(to_kiln(a), N=N, increasing=increasing),
                 np.vander(a, N, increasing=increasing))
    i = np.array([1, 2, 3], dtype=np.int32)
    out = kiln.vander(to_kiln(i), N=N, increasing=increasing)
    assert out.dtype == kiln.int64
    assert_close(out, np.vander(i.astype(np.int64), N, increasing=increasing))


def test_vander_grad_and_errors():
    gradcheck(lambda x: kiln.vander(x, 3), rand(3))
    with pytest.raises(RuntimeError, match=r"\[vander\] x must be a one-dimensional"):
        kiln.vander(kiln.zeros(2, 2))
    with pytest.raises(RuntimeError, match=r"\[vander\] N must be non-negative"):
        kiln.vander(kiln.zeros(2), N=-1)


def test_take_along_dim():
    a = rand(3, 4)
    idx = np.argsort(a, axis=1)
    assert_close(kiln.take_along_dim(noncontig(a), to_kiln(idx), 1), np.take_along_axis(a, idx, 1))
    assert_close(to_kiln(a).take_along_dim(to_kiln(idx[:, :2]), dim=1),
                 np.take_along_axis(a, idx[:, :2], 1))
    flat = np.array([0, 5, 11])
    assert_close(kiln.take_along_dim(to_kiln(a), to_kiln(flat)), np.take_along_axis(a.ravel(), flat, 0))
    # indices broadcast against input except along dim
    col = np.array([[1], [0], [3]])
    assert_close(kiln.take_along_dim(to_kiln(a), to_kiln(col[:1]), 1),
                 np.take_along_axis(a, np.broadcast_to(col[:1], (3, 1)), 1))
    gradcheck(lambda x: kiln.take_along_dim(x, to_kiln(idx[:, :2]), 1), a)
    with pytest.raises(RuntimeError, match=r"\[take_along_dim\].*int64"):
        kiln.take_along_dim(to_kiln(a), to_kiln(idx.astype(np.int32)), 1)
    with pytest.raises(RuntimeError, match=r"\[take_along_dim\].*same number of dimensions"):
        kiln.take_along_dim(to_kiln(a), to_kiln(flat), 1)


def test_empty_strided_and_unsafe_aliases():
    t = kiln.empty_strided((2, 3), (1, 2), dtype=kiln.float64)
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype == kiln.float64
    assert kiln.empty_strided((0, 3), (3, 1)).numel() == 0
    with pytest.raises(RuntimeError, match=r"\[empty_strided\] mismatch"):
        kiln.empty_strided((2, 3), (1,))
    x = to_kiln(rand(4, 2))
    for a, b in zip(kiln.unsafe_chunk(x, 2), x.chunk(2)):
        assert_close(a, b.numpy())
    for a, b in zip(x.unsafe_split(3), x.split(3)):
        assert_close(a, b.numpy())


# ---------------------------------------------------------------- reducing scatters


def scatter_reduce_np(self, dim, index, src, reduce, include_self):
    out = self.copy()
    groups = {}
    for pos in np.ndindex(*index.shape):
        tgt = list(pos)
        tgt[dim] = index[pos]
        groups.setdefault(tuple(tgt), []).append(src[pos])
    for tgt, vals in groups.items():
        vals = list(vals) + ([self[tgt]] if include_self else [])
        if reduce == "sum":
            out[tgt] = np.sum(vals)
        elif reduce == "prod":
            out[tgt] = np.prod(vals)
        elif reduce == "mean":
            out[tgt] = np.sum(vals) / len(vals) if out.dtype.kind == "f" else np.sum(vals) // len(vals)
        elif reduce == "amax":
            out[tgt] = np.max(vals)
        else:
            out[tgt] = np.min(vals)
    return out


REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    self_, src = rand(3, 4, dtype=dtype), rand(3, 5, dtype=dtype)
    index = np.random.default_rng(1).integers(0, 4, size=(2, 5))
    ref = scatter_reduce_np(self_, 1, index, src, reduce, include_self)
    out = kiln.scatter_reduce(noncontig(self_), 1, to_kiln(index), noncontig(src), reduce,
                              include_self=include_self)
    assert_close(out, ref)
    ref0 = scatter_reduce_np(self_.T.copy(), 0, index.T.copy(), src.T.copy(), reduce, include_self)
    assert_close(to_kiln(self_.T.copy()).scatter_reduce(0, to_kiln(index.T.copy()),
                                                        to_kiln(src.T.copy()), reduce,
                                                        include_self=include_self), ref0)
    x = to_kiln(self_)
    x.scatter_reduce_(1, to_kiln(index), to_kiln(src), reduce, include_self=include_self)
    assert_close(x, ref)


def test_scatter_reduce_nan_and_empty():
    self_ = np.array([0.0, 0.0])
    src = np.array([1.0, np.nan, 2.0])
    index = np.array([0, 0, 1])
    for reduce in ("amax", "amin"):
        out = kiln.scatter_reduce(to_kiln(self_), 0, to_kiln(index), to_kiln(src), reduce)
        assert np.isnan(out[0].item()) and not np.isnan(out[1].item())
    empty = kiln.scatter_reduce(to_kiln(self_), 0, kiln.zeros(0, dtype=kiln.int64),
                                to_kiln(src), "sum")
    assert_close(empty, self_)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_grad(reduce, include_self):
    index = to_kiln(np.array([[0, 1, 0], [2, 2, 1]]))
    # Distinct values keep amax/amin away from ties, where the gradient is not smooth.
    a = np.arange(1.0, 13.0).reshape(3, 4) * 0.37
    b = np.arange(1.0, 13.0).reshape(2, 6)[:, ::-1] * 0.29
    gradcheck(lambda x, y: kiln.scatter_reduce(x, 1, index, y, reduce, include_self=include_self),
              a, b)


def test_scatter_reduce_prod_grad_with_zeros():
    index = to_kiln(np.array([0, 0, 1, 1, 1]))
    self_ = np.array([2.0, 3.0])
    src = np.array([0.0, 1.5, 0.0, 0.0, 2.0])
    x = kiln.tensor(self_, requires_grad=True)
    y = kiln.tensor(src, requires_grad=True)
    kiln.scatter_reduce(x, 0, index, y, "prod").sum().backward()
    # position 0: one zero (src[0]); position 1: two zeros.
    assert_close(x.grad, np.array([0.0, 0.0]))
    assert_close(y.grad, np.array([2.0 * 1.5, 0.0, 0.0, 0.0, 0.0]))
    # without self: untouched positions pass the gradient on even when self is zero there.
    x = kiln.tensor([0.0, 0.0, 5.0], requires_grad=True)
    y = kiln.tensor([0.0, 3.0], requires_grad=True)
    out = kiln.scatter_reduce(x, 0, kiln.tensor([2, 2]), y, "prod", include_self=False)
    out.backward(kiln.tensor([1.0, 2.0, 4.0]))
    assert_close(out, np.array([0.0, 0.0, 0.0]))
    assert_close(x.grad, np.array([1.0, 2.0, 0.0]))
    assert_close(y.grad, np.array([12.0, 0.0]))


def test_scatter_reduce_errors():
    x, idx = kiln.zeros(3), kiln.tensor([0, 1])
    with pytest.raises(RuntimeError, match=r"\[scatter_reduce\] reduce argument must be"):
        kiln.scatter_reduce(x, 0, idx, kiln.ones(2), "max")
    with pytest.raises(RuntimeError, match=r"\[scatter_reduce\].*int64"):
        kiln.scatter_reduce(x, 0, idx.int(), kiln.ones(2), "sum")
    with pytest.raises(RuntimeError, match=r"\[scatter_reduce\].*same dtype"):
        kiln.scatter_reduce(x, 0, idx, kiln.ones(2, dtype=kiln.float64), "sum")
    with pytest.raises(RuntimeError, match=r"\[scatter_reduce\] index 5 is out of bounds"):
        kiln.scatter_reduce(x, 0, kiln.tensor([5]), kiln.ones(1), "sum")


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    self_, source = rand(3, 4), rand(3, 5)
    index = np.array([0, 3, 0, 1, 3])
    full_index = np.broadcast_to(index, source.shape)
    ref = scatter_reduce_np(self_, 1, full_index, source, reduce, include_self)
    assert_close(kiln.index_reduce(noncontig(self_), 1, to_kiln(index), noncontig(source), reduce,
                                   include_self=include_self), ref)
    x = to_kiln(self_)
    x.index_reduce_(1, to_kiln(index), to_kiln(source), reduce, include_self=include_self)
    assert_close(x, ref)
    a = np.arange(1.0, 13.0).reshape(3, 4) * 0.41
    b = np.arange(1.0, 16.0).reshape(3, 5) * 0.23
    gradcheck(lambda s, t: kiln.index_reduce(s, 1, to_kiln(index), t, reduce,
                                             include_self=include_self), a, b)
    with pytest.raises(RuntimeError, match=r"\[index_reduce\] reduce argument must be one of prod"):
        kiln.index_reduce(to_kiln(self_), 1, to_kiln(index), to_kiln(source), "sum")
    with pytest.raises(IndexError, match=r"\[index_reduce\] index out of range in self: index 4"):
        kiln.index_reduce(to_kiln(self_), 1, to_kiln(index + 1), to_kiln(source), reduce)
    with pytest.raises(RuntimeError, match=r"\[index_reduce\] source \[3, 4\] must match"):
        kiln.index_reduce(to_kiln(self_), 1, to_kiln(index), to_kiln(self_), reduce)


def test_masked_scatter():
    a, src = rand(3, 4), rand(20)
    mask = rand(3, 4) > 0
    ref = a.copy()
    ref[mask] = src[:mask.sum()]
    assert_close(kiln.masked_scatter(noncontig(a), to_kiln(mask), to_kiln(src)), ref)
    row_mask = np.array([True, False, True, True])
    ref_b = a.copy()
    ref_b[np.broadcast_to(row_mask, a.shape)] = src[:9]
    assert_close(to_kiln(a).masked_scatter(to_kiln(row_mask), to_kiln(src)), ref_b)
    x = to_kiln(a)
    x.masked_scatter_(to_kiln(mask), to_kiln(src))
    assert_close(x, ref)
    m = to_kiln(mask)
    gradcheck(lambda s, t: kiln.masked_scatter(s, m, t), a, src)
    with pytest.raises(RuntimeError, match=r"\[masked_scatter\] Number of elements of source"):
        kiln.masked_scatter(to_kiln(a), kiln.ones(3, 4, dtype=kiln.bool), to_kiln(src[:5]))
    with pytest.raises(RuntimeError, match=r"\[masked_scatter\] only supports boolean masks"):
        kiln.masked_scatter(to_kiln(a), to_kiln(mask.astype(np.uint8)), to_kiln(src))


# ---------------------------------------------------------------- calculus


@pytest.mark.parametrize("n,dim", [(1, -1), (2, 0), (3, 1), (0, 1), (7, 1)])
def test_diff(n, dim):
    a = rand(3, 4)
    assert_close(kiln.diff(noncontig(a), n, dim), np.diff(a, n, dim))
    pre, app = rand(3, 2), rand(3, 1)
    assert_close(to_kiln(a).diff(n=n, dim=1, prepend=to_kiln(pre), append=to_kiln(app)),
                 np.diff(a, n, 1, prepend=pre, append=app))
    b = a > 0
    assert_close(kiln.diff(to_kiln(b), 1, dim), np.diff(b, 1, dim))
    i = rand(3, 4, dtype=np.int64)
    assert_close(kiln.diff(to_kiln(i), n, dim), np.diff(i, n, dim))


def test_diff_grad_and_errors():
    gradcheck(lambda x, p: kiln.diff(x, 2, prepend=p), rand(2, 3), rand(2, 1))
    with pytest.raises(RuntimeError, match=r"\[diff\].*at least one-dimensional"):
        kiln.diff(kiln.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"\[diff\] order must be non-negative"):
        kiln.diff(kiln.zeros(3), -1)
    with pytest.raises(RuntimeError, match=r"\[diff\] expected prepend"):
        kiln.diff(kiln.zeros(3, 3), prepend=kiln.zeros(2, 1))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    a = rand(4, 5)
    ours = kiln.gradient(noncontig(a), edge_order=edge_order)
    ref = np.gradient(a, edge_order=edge_order)
    assert isinstance(ours, tuple) and len(ours) == 2
    for o, r in zip(ours, ref):
        assert_close(o, r)
    (g1,) = kiln.gradient(to_kiln(a), spacing=0.5, dim=1, edge_order=edge_order)
    assert_close(g1, np.gradient(a, 0.5, axis=1, edge_order=edge_order))
    gs = kiln.gradient(to_kiln(a), spacing=[2.0, 3.0], edge_order=edge_order)
    for o, r in zip(gs, np.gradient(a, 2.0, 3.0, edge_order=edge_order)):
        assert_close(o, r)
    cx, cy = np.sort(rand(4)) + np.arange(4), np.sort(rand(5)) + np.arange(5)
    gs = kiln.gradient(to_kiln(a), spacing=(to_kiln(cx), to_kiln(cy)), edge_order=edge_order)
    for o, r in zip(gs, np.gradient(a, cx, cy, edge_order=edge_order)):
        assert_close(o, r)
    gradcheck(lambda x: kiln.gradient(x, spacing=(to_kiln(cy),), dim=1, edge_order=edge_order)[0],
              rand(3, 5))
    i = rand(4, 5, dtype=np.int64)
    assert_close(kiln.gradient(to_kiln(i), dim=0)[0], np.gradient(i.astype(np.float64), axis=0),
                 dtype=kiln.float32)


def test_gradient_errors():
    with pytest.raises(RuntimeError, match=r"\[gradient\].*edge_order\+1"):
        kiln.gradient(kiln.zeros(2, 5), edge_order=2)
    with pytest.raises(RuntimeError, match=r"\[gradient\] only supports edge_order"):
        kiln.gradient(kiln.zeros(4), edge_order=3)
    with pytest.raises(RuntimeError, match=r"\[gradient\] expected spacing"):
        kiln.gradient(kiln.zeros(4, 4), spacing=[1.0, 2.0, 3.0])


@pytest.mark.parametrize("dim", [-1, 0])
def test_trapezoid(dim):
    a = rand(3, 4)
    n = a.shape[dim]
    xs = np.sort(rand(n))
    assert_close(kiln.trapezoid(noncontig(a), dim=dim), trapezoid_np(a, axis=dim))
    assert_close(kiln.trapz(to_kiln(a), to_kiln(xs), dim=dim), trapezoid_np(a, xs, axis=dim))
    assert_close(kiln.trapezoid(to_kiln(a), dx=0.25, dim=dim), trapezoid_np(a, dx=0.25, axis=dim))
    xfull = np.cumsum(rand(3, 4, low=0.1, high=1.0), axis=dim)
    assert_close(kiln.trapezoid(to_kiln(a), to_kiln(xfull), dim=dim),
                 trapezoid_np(a, xfull, axis=dim))
    gradcheck(lambda y, x: kiln.trapezoid(y, x, dim=dim), a, xs)
    gradcheck(lambda y: kiln.cumulative_trapezoid(y, dx=0.5, dim=dim), a)


def test_cumulative_trapezoid():
    a = rand(3, 5)
    xs = np.sort(rand(5))
    ref = np.cumsum((a[:, 1:] + a[:, :-1]) * np.diff(xs) / 2, axis=1)
    assert_close(kiln.cumulative_trapezoid(noncontig(a), to_kiln(xs)), ref)
    ref_dx = np.cumsum((a[:, 1:] + a[:, :-1]) * 0.5 / 2, axis=1)
    assert_close(kiln.cumulative_trapezoid(to_kiln(a), dx=0.5), ref_dx)
    assert kiln.cumulative_trapezoid(kiln.zeros(3, 0)).shape == (3, 0)
    assert_close(kiln.trapezoid(kiln.zeros(3, 0, dtype=kiln.float64)), np.zeros(3))


def test_trapezoid_errors():
    with pytest.raises(TypeError, match=r"\[trapezoid\]"):
        kiln.trapezoid(kiln.zeros(3), kiln.zeros(3), dx=1.0)
    with pytest.raises(RuntimeError, match=r"\[trapezoid\] There must be one `x` value"):
        kiln.trapezoid(kiln.zeros(3), kiln.zeros(4))


# ---------------------------------------------------------------- statistics


def test_cov_corrcoef():
    a = rand(3, 6)
    assert_close(kiln.cov(noncontig(a)), np.cov(a))
    assert_close(to_kiln(a).cov(correction=0), np.cov(a, ddof=0))
    fw = np.array([1, 2, 1, 3, 1, 2])
    aw = rand(6, low=0.1, high=1.0)
    for corr in (0, 1, 2):
        assert_close(kiln.cov(to_kiln(a), correction=corr, fweights=to_kiln(fw), aweights=to_kiln(aw)),
                     np.cov(a, ddof=corr, fweights=fw, aweights=aw))
    assert_close(kiln.cov(to_kiln(a), fweights=to_kiln(fw)), np.cov(a, fweights=fw))
    assert_close(kiln.cov(to_kiln(a[0])), np.cov(a[0]))
    assert_close(kiln.corrcoef(noncontig(a)), np.corrcoef(a))
    assert_close(to_kiln(a).corrcoef(), np.corrcoef(a))
    i = rand(2, 5, dtype=np.int64)
    assert_close(kiln.cov(to_kiln(i)), np.cov(i), dtype=kiln.float32)
    gradcheck(lambda x: kiln.cov(x), rand(2, 4))
    gradcheck(lambda x, w: kiln.cov(x, aweights=w), rand(2, 4), rand(4, low=0.5, high=1.0))
    gradcheck(lambda x: kiln.corrcoef(x), rand(2, 4))


def test_cov_errors():
    x = kiln.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"\[cov\].*two or fewer dimensions"):
        kiln.cov(kiln.zeros(2, 2, 2))
    with pytest.raises(RuntimeError, match=r"\[cov\].*fweights to have integral dtype"):
        kiln.cov(x, fweights=kiln.ones(3))
    with pytest.raises(RuntimeError, match=r"\[cov\].*aweights to have floating point"):
        kiln.cov(x, aweights=kiln.ones(3, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[cov\].*same numel.*2 != 3"):
        kiln.cov(x, fweights=kiln.ones(2, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[cov\] fweights cannot be negative"):
        kiln.cov(x, fweights=kiln.tensor([1, -1, 1]))


def lower_nanmedian(a, axis=None):
    def one(v):
        v = np.sort(v[~np.isnan(v)])
        return np.nan if v.size == 0 else v[(v.size - 1) // 2]
    if axis is None:
        return one(a.ravel())
    return np.apply_along_axis(one, axis, a)


def test_nanmedian():
    a = rand(4, 5)
    a[0, 1] = a[2, 3] = a[2, 0] = np.nan
    a[3, :] = np.nan
    assert_close(kiln.nanmedian(noncontig(a)), lower_nanmedian(a))
    for dim in (0, 1, -1):
        values, indices = kiln.nanmedian(to_kiln(a), dim)
        ref = lower_nanmedian(a, dim)
        assert_close(values, ref)
        picked = np.take_along_axis(a, np.expand_dims(indices.numpy(), dim), dim).squeeze(dim)
        np.testing.assert_array_equal(np.isnan(picked), np.isnan(ref))
        np.testing.assert_allclose(picked[~np.isnan(ref)], ref[~np.isnan(ref)])
    r = to_kiln(a).nanmedian(dim=1, keepdim=True)
    assert r.values.shape == (4, 1) and r.indices.dtype == kiln.int64
    assert np.isnan(kiln.nanmedian(kiln.zeros(0)).item())
    assert_close(kiln.nanmedian(kiln.tensor(2.0), 0).values, np.float64(2.0))
    gradcheck(lambda x: kiln.nanmedian(x, 1).values, rand(2, 3))
    gradcheck(lambda x: kiln.nanmedian(x), rand(2, 3))
    with pytest.raises(IndexError, match=r"\[nanmedian\].*non-zero size"):
        kiln.nanmedian(kiln.zeros(2, 0), 1)


METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.filterwarnings("ignore:All-NaN slice encountered")  # NumPy's reference, on purpose
@pytest.mark.parametrize("method", METHODS)
def test_quantile(method):
    a = rand(4, 6)
    q = np.array([0.0, 0.25, 0.5, 0.8, 1.0])
    qk = to_kiln(q)
    assert_close(kiln.quantile(noncontig(a), qk, interpolation=method), np.quantile(a, q, method=method))
    assert_close(kiln.quantile(to_kiln(a), 0.3, dim=1, interpolation=method),
                 np.quantile(a, 0.3, axis=1, method=method))
    assert_close(to_kiln(a).quantile(qk, dim=0, keepdim=True, interpolation=method),
                 np.quantile(a, q, axis=0, keepdims=True, method=method))
    b = a.copy()
    b[1, 2] = np.nan
    b[3, :] = np.nan
    assert_close(kiln.quantile(to_kiln(b), qk, dim=1, interpolation=method),
                 np.quantile(b, q, axis=1, method=method))
    assert_close(kiln.nanquantile(to_kiln(b), qk, dim=1, interpolation=method),
                 np.nanquantile(b, q, axis=1, method=method))
    assert_close(to_kiln(b).nanquantile(0.6, interpolation=method),
                 np.nanquantile(b, 0.6, method=method))


def test_quantile_grad_empty_and_errors():
    gradcheck(lambda x: kiln.quantile(x, 0.3, dim=1), rand(2, 4))
    gradcheck(lambda x: kiln.nanquantile(x, to_kiln(np.array([0.2, 0.9])), dim=0), rand(3, 2))
    assert np.isnan(kiln.quantile(kiln.zeros(0), 0.5).item())
    x = kiln.zeros(3)
    with pytest.raises(RuntimeError, match=r"\[quantile\] q values must be in the range"):
        kiln.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match=r"\[quantile\] input tensor must be either float"):
        kiln.quantile(kiln.zeros(3, dtype=kiln.int64), 0.5)
    with pytest.raises(RuntimeError, match=r"\[nanquantile\] interpolation must be one of"):
        kiln.nanquantile(x, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match=r"\[quantile\] q tensor must be same dtype"):
        kiln.quantile(x, kiln.tensor([0.5], dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[quantile\] q must be a scalar or 1D"):
        kiln.quantile(x, kiln.zeros(1, 1))


def test_aminmax_exists():
    a = rand(3, 4)
    r = kiln.aminmax(to_kiln(a), dim=1)
    assert_close(r.min, a.min(1))
    assert_close(r.max, a.max(1))


def test_histogram():
    a = rand(50)
    h = kiln.histogram(noncontig(rand(5, 10)), 7)
    assert h.hist.shape == (7,) and h.bin_edges.shape == (8,)
    hist, edges = kiln.histogram(to_kiln(a), 6)
    ref_h, ref_e = np.histogram(a, 6)
    assert_close(hist, ref_h)
    assert_close(edges, ref_e)
    w = rand(50, low=0.0, high=1.0)
    for density in (False, True):
        hist, edges = to_kiln(a).histogram(5, range=(-1.0, 1.5), weight=to_kiln(w), density=density)
        ref_h, ref_e = np.histogram(a, 5, range=(-1.0, 1.5), weights=w, density=density)
        assert_close(hist, ref_h)
        assert_close(edges, ref_e)
    bins = np.array([-2.0, -0.5, 0.0, 0.3, 2.0])
    hist, edges = kiln.histogram(to_kiln(a), to_kiln(bins), density=True)
    ref_h, ref_e = np.histogram(a, bins, density=True)
    assert_close(hist, ref_h)
    assert_close(edges, ref_e)
    same = np.full(4, 3.0)
    hist, edges = kiln.histogram(to_kiln(same), 2)
    ref_h, ref_e = np.histogram(same, 2)
    assert_close(hist, ref_h)
    assert_close(edges, ref_e)
    assert kiln.histogram(kiln.tensor([1.0, 2.0]), 3)[0].dtype == kiln.float32


def test_histogram_errors():
    x = kiln.zeros(3)
    with pytest.raises(RuntimeError, match=r"\[histogram\] bins must be > 0"):
        kiln.histogram(x, 0)
    with pytest.raises(RuntimeError, match=r"\[histogram\] min should not exceed max"):
        kiln.histogram(x, 3, range=(1.0, 0.0))
    with pytest.raises(RuntimeError, match=r"\[histogram\] input must be a floating"):
        kiln.histogram(kiln.zeros(3, dtype=kiln.int64), 3)
    with pytest.raises(RuntimeError, match=r"\[histogram\] expected weight"):
        kiln.histogram(x, 3, weight=kiln.ones(4))


# ---------------------------------------------------------------- against PyTorch

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def both(torch, a, device, **kw):
    return (kiln.tensor(a, device=device, **kw), torch.tensor(a, device=device, **kw))


def close(k, t):
    np.testing.assert_allclose(k.detach().cpu().numpy(), t.detach().cpu().numpy(), rtol=1e-6,
                               atol=1e-8, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_shapes(device):
    torch = pytest.importorskip("torch")
    a = rand(3, 4)
    k, t = both(torch, a, device)
    for name in ("atleast_1d", "atleast_2d", "atleast_3d", "ravel", "argwhere", "diagflat"):
        close(getattr(kiln, name)(k), getattr(torch, name)(t))
    close(kiln.column_stack([k, k[:, 0]]), torch.column_stack([t, t[:, 0]]))
    for x, y in zip(kiln.hsplit(k, [1, 3]), torch.hsplit(t, [1, 3])):
        close(x, y)
    close(kiln.block_diag(k, k[0]), torch.block_diag(t, t[0]))
    close(kiln.diag_embed(k, 1, 0, 2), torch.diag_embed(t, 1, 0, 2))
    close(kiln.tril_indices(4, 3, 1, device=device), torch.tril_indices(4, 3, 1, device=device))
    close(kiln.triu_indices(3, 5, -1, device=device), torch.triu_indices(3, 5, -1, device=device))
    close(kiln.combinations(k[0], 3, True), torch.combinations(t[0], 3, True))
    close(kiln.vander(k[0], 3), torch.vander(t[0], 3))
    ki, ti = both(torch, np.argsort(a, 1), device)
    close(kiln.take_along_dim(k, ki, 1), torch.take_along_dim(t, ti, 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_torch_scatter_reduce(device, reduce, include_self):
    torch = pytest.importorskip("torch")
    a = np.arange(1.0, 13.0).reshape(3, 4) * 0.37
    b = np.arange(1.0, 16.0).reshape(3, 5)[:, ::-1].copy() * 0.29
    idx = np.array([[0, 1, 0, 3, 1], [2, 2, 1, 0, 0]])
    ka, ta = both(torch, a, device, requires_grad=True)
    # src has the index's shape here: with a larger src PyTorch's backward returns an
    # index-shaped gradient and its engine rejects it (kiln zero-fills the rest; the NumPy
    # tests cover that case).
    kb, tb = both(torch, b[:2].copy(), device, requires_grad=True)
    ki, ti = both(torch, idx, device)
    ko = kiln.scatter_reduce(ka, 1, ki, kb, reduce, include_self=include_self)
    to = torch.scatter_reduce(ta, 1, ti, tb, reduce, include_self=include_self)
    close(ko, to)
    g = rand(3, 4)
    ko.backward(kiln.tensor(g, device=device))
    to.backward(torch.tensor(g, device=device))
    close(ka.grad, ta.grad)
    close(kb.grad, tb.grad)
    kb, tb = both(torch, b, device)
    if reduce != "sum":
        full = np.array([0, 3, 0, 1, 3])
        kf, tf = both(torch, full, device)
        close(kiln.index_reduce(ka, 1, kf, kb, reduce, include_self=include_self),
              torch.index_reduce(ta, 1, tf, tb, reduce, include_self=include_self))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_calculus_statistics(device):
    torch = pytest.importorskip("torch")
    a = rand(4, 6)
    k, t = both(torch, a, device)
    close(kiln.diff(k, 2, 0), torch.diff(t, 2, 0))
    for x, y in zip(kiln.gradient(k, edge_order=2), torch.gradient(t, edge_order=2)):
        close(x, y)
    close(kiln.trapezoid(k, dx=0.5), torch.trapezoid(t, dx=0.5))
    close(kiln.cumulative_trapezoid(k, dim=0), torch.cumulative_trapezoid(t, dim=0))
    fw = np.array([1, 2, 1, 3, 1, 2])
    kf, tf = both(torch, fw, device)
    close(kiln.cov(k, correction=0, fweights=kf), torch.cov(t, correction=0, fweights=tf))
    close(kiln.corrcoef(k), torch.corrcoef(t))
    b = a.copy()
    b[1, 2] = np.nan
    kb, tb = both(torch, b, device)
    close(kiln.nanmedian(kb, 1).values, torch.nanmedian(tb, 1).values)
    q = np.array([0.1, 0.5, 0.9])
    kq, tq = both(torch, q, device)
    for method in METHODS:
        close(kiln.nanquantile(kb, kq, 1, interpolation=method),
              torch.nanquantile(tb, tq, 1, interpolation=method))
        close(kiln.quantile(k, kq, interpolation=method), torch.quantile(t, tq, interpolation=method))
    if device == "cpu":  # torch.histogram has no CUDA kernel
        kh, th = kiln.histogram(k, 5), torch.histogram(t, 5)
        close(kh.hist, th.hist)
        close(kh.bin_edges, th.bin_edges)
    km, tm = both(torch, a > 0, device)
    ks, ts = both(torch, rand(30), device)
    close(kiln.masked_scatter(k, km, ks), torch.masked_scatter(t, tm, ts))


def test_view_functions_grad():
    gradcheck(lambda x: kiln.atleast_3d(x) * 2, rand(2, 3))
    gradcheck(lambda x: kiln.hsplit(x, [1])[1], rand(2, 3))
    gradcheck(lambda x: kiln.dsplit(x, 2)[0], rand(1, 2, 4))
    gradcheck(lambda x: kiln.ravel(x.t()), rand(2, 3))


def test_uniform_gradient_grad():
    gradcheck(lambda x: kiln.gradient(x, spacing=0.5, edge_order=2)[1], rand(3, 4))
    gradcheck(lambda x: kiln.gradient(x)[0], rand(3, 4))


def test_empty_inputs():
    assert_close(kiln.diff(kiln.zeros(3, 0, dtype=kiln.float64)), np.diff(np.zeros((3, 0))))
    assert_close(kiln.diff(kiln.zeros(0, 3, dtype=kiln.float64), dim=0),
                 np.diff(np.zeros((0, 3)), axis=0))
    a = rand(2, 3)
    empty_idx = np.zeros((2, 0), dtype=np.int64)
    assert_close(kiln.take_along_dim(to_kiln(a), to_kiln(empty_idx), 1),
                 np.take_along_axis(a, empty_idx, 1))
    assert kiln.block_diag().shape == (1, 0)
    assert kiln.argwhere(kiln.zeros(0, 2)).shape == (0, 2)
    hist, edges = kiln.histogram(kiln.zeros(0, dtype=kiln.float64), 3)
    ref_h, ref_e = np.histogram(np.zeros(0), 3)
    assert_close(hist, ref_h)
    assert_close(edges, ref_e)
    out = kiln.masked_scatter(kiln.zeros(0, 2), kiln.zeros(0, 2, dtype=kiln.bool), kiln.zeros(3))
    assert out.shape == (0, 2)
