"""cat/stack/split/chunk/unbind/flip/roll/repeat/tile/tril/triu against NumPy."""

import numpy as np
import pytest

import kiln
from helpers import NP_DTYPE, assert_close, gradcheck, noncontig, rand

DTYPES = [kiln.float32, kiln.float64, kiln.int64, kiln.int32, kiln.bool]


def _np(dtype):
    return NP_DTYPE[dtype]


# --- cat / stack -------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat_matches_numpy(dtype, dim):
    a, b, c = rand(2, 3, dtype=_np(dtype)), rand(2, 1, dtype=_np(dtype)), rand(2, 3, dtype=_np(dtype))
    if dim in (0, -2):
        b = rand(4, 3, dtype=_np(dtype))
    out = kiln.cat([kiln.tensor(a), kiln.tensor(b), kiln.tensor(c)], dim)
    assert out.dtype == dtype
    assert_close(out, np.concatenate([a, b, c], axis=dim))


def test_cat_aliases_and_tuple_input():
    a, b = rand(2, 3), rand(2, 3)
    ta, tb = kiln.tensor(a), kiln.tensor(b)
    assert_close(kiln.concat((ta, tb), dim=1), np.concatenate([a, b], 1))
    assert_close(kiln.concatenate([ta, tb], axis=1), np.concatenate([a, b], 1))
    assert_close(kiln.cat([ta], 0), a)


def test_cat_noncontiguous_inputs():
    a, b = rand(3, 4), rand(3, 2)
    out = kiln.cat([noncontig(a), noncontig(b)], dim=1)
    assert_close(out, np.concatenate([a, b], 1))
    assert out.is_contiguous()


def test_cat_promotes_dtypes():
    i = kiln.tensor(np.array([1, 2], dtype=np.int32))
    f = kiln.tensor(np.array([0.5], dtype=np.float32))
    d = kiln.tensor(np.array([7], dtype=np.int64))
    out = kiln.cat([i, f])
    assert out.dtype == kiln.float32
    assert_close(out, [1.0, 2.0, 0.5])
    assert kiln.cat([i, d]).dtype == kiln.int64
    b = kiln.tensor(np.array([True]))
    assert kiln.cat([b, i]).dtype == kiln.int32


def test_cat_skips_legacy_empty_and_handles_empty():
    a = rand(2, 3)
    e = kiln.tensor(np.zeros((0,), dtype=np.float64))
    assert_close(kiln.cat([e, kiln.tensor(a), e], dim=1), a)
    z = kiln.tensor(np.zeros((0, 3)))
    assert_close(kiln.cat([z, kiln.tensor(a)], 0), a)
    assert tuple(kiln.cat([e, e]).shape) == (0,)
    assert tuple(kiln.cat([e, e], dim=1).shape) == (0,)
    assert_close(kiln.cat([kiln.tensor(a), kiln.tensor(np.zeros((2, 0)))], 1), a)


def test_cat_errors():
    with pytest.raises(RuntimeError, match=r"\[cat\].*\[2, 3\].*\[2, 4\]"):
        kiln.cat([kiln.ones(2, 3), kiln.ones(2, 4)], 0)
    with pytest.raises(RuntimeError, match=r"\[cat\].*same number of dimensions"):
        kiln.cat([kiln.ones(2, 3), kiln.ones(2, 3, 1)])
    with pytest.raises(IndexError, match=r"\[cat\]"):
        kiln.cat([kiln.ones(2, 3), kiln.ones(2, 3)], 2)
    with pytest.raises(ValueError, match=r"\[cat\]"):
        kiln.cat([])
    with pytest.raises(RuntimeError, match=r"\[cat\].*zero-dimensional"):
        kiln.cat([kiln.ones(()), kiln.ones(())])
    with pytest.raises(TypeError, match=r"\[cat\]"):
        kiln.cat([kiln.ones(2), 3])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack_matches_numpy(dtype, dim):
    arrs = [rand(2, 3, dtype=_np(dtype)) for _ in range(3)]
    out = kiln.stack([kiln.tensor(a) for a in arrs], dim)
    assert_close(out, np.stack(arrs, axis=dim))


def test_stack_noncontig_0d_and_errors():
    a, b = rand(3, 4), rand(3, 4)
    assert_close(kiln.stack([noncontig(a), noncontig(b)], 1), np.stack([a, b], 1))
    s = kiln.stack([kiln.tensor(1.5), kiln.tensor(2.5)])
    assert_close(s, [1.5, 2.5])
    with pytest.raises(RuntimeError, match=r"\[stack\].*\[2, 3\].*\[3, 2\]"):
        kiln.stack([kiln.ones(2, 3), kiln.ones(3, 2)])
    with pytest.raises(RuntimeError, match=r"\[stack\]"):
        kiln.stack([])
    with pytest.raises(IndexError, match=r"\[stack\]"):
        kiln.stack([kiln.ones(2, 3), kiln.ones(2, 3)], 3)


def test_hstack_vstack():
    a, b = rand(2, 3), rand(2, 2)
    assert_close(kiln.hstack([kiln.tensor(a), kiln.tensor(b)]), np.hstack([a, b]))
    u, v = rand(3), rand(2)
    assert_close(kiln.hstack([kiln.tensor(u), kiln.tensor(v)]), np.hstack([u, v]))
    w = rand(3)
    assert_close(kiln.vstack([kiln.tensor(u), kiln.tensor(w)]), np.vstack([u, w]))
    c = rand(1, 3)
    assert_close(kiln.vstack([kiln.tensor(c), kiln.tensor(u)]), np.vstack([c, u]))


def test_cat_stack_gradcheck():
    gradcheck(lambda x, y: kiln.cat([x, y], 1) * 2, rand(2, 3), rand(2, 2))
    gradcheck(lambda x, y: kiln.cat([y, x, y], 0), rand(2, 3), rand(1, 3))
    gradcheck(lambda x, y: kiln.stack([x, y], 1), rand(2, 3), rand(2, 3))
    gradcheck(lambda x, y: kiln.hstack([x, y]), rand(2, 3), rand(2, 1))


def test_cat_backward_mixed_dtypes():
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    i = kiln.tensor(np.array([[1, 2, 3]], dtype=np.int64))
    out = kiln.cat([x, i])
    assert out.dtype == kiln.float64 and out.grad_fn is not None
    (out * kiln.tensor(rand(3, 3))).sum().backward()
    assert tuple(x.grad.shape) == (2, 3)


# --- split / chunk / unbind ---------------------------------------------------

def _torch_split_reference(a, size, axis):
    n = a.shape[axis]
    cuts = list(range(size, n, size))
    return np.split(a, cuts, axis=axis)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_split_int_matches_numpy(size):
    a = rand(5, 4)
    parts = kiln.split(kiln.tensor(a), size)
    ref = _torch_split_reference(a, size, 0)
    assert isinstance(parts, tuple) and len(parts) == len(ref)
    for p, r in zip(parts, ref):
        assert_close(p, r)


def test_split_sections_dim_and_method():
    a = rand(3, 6)
    parts = kiln.tensor(a).split([1, 2, 3], dim=-1)
    for p, r in zip(parts, np.split(a, [1, 3], axis=1)):
        assert_close(p, r)
    parts = kiln.split(noncontig(a), 4, dim=1)
    assert [tuple(p.shape) for p in parts] == [(3, 4), (3, 2)]
    assert_close(parts[1], a[:, 4:])


def test_split_returns_views():
    x = kiln.tensor(rand(4, 3))
    a, b = kiln.split(x, 2)
    a.mul_(0)
    np.testing.assert_array_equal(x.numpy()[:2], np.zeros((2, 3)))
    assert b.storage_offset() == 6


def test_split_edge_cases_and_errors():
    e = kiln.tensor(np.zeros((0, 3)))
    assert len(kiln.split(e, 2)) == 1
    assert len(kiln.split(e, 0)) == 1
    with pytest.raises(RuntimeError, match=r"\[split\].*sum exactly to 5"):
        kiln.split(kiln.ones(5), [2, 2])
    with pytest.raises(RuntimeError, match=r"\[split\]"):
        kiln.split(kiln.ones(5), 0)
    with pytest.raises(IndexError, match=r"\[split\]"):
        kiln.split(kiln.ones(5), 2, dim=1)
    with pytest.raises(RuntimeError, match=r"\[split\]"):
        kiln.split(kiln.ones(()), 1)


@pytest.mark.parametrize("n,chunks", [(6, 3), (5, 3), (5, 2), (2, 4), (7, 7), (3, 1)])
def test_chunk_matches_torch_semantics(n, chunks):
    a = rand(2, n)
    parts = kiln.chunk(kiln.tensor(a), chunks, dim=1)
    size = -(-n // chunks)
    ref = _torch_split_reference(a, size, 1)
    assert len(parts) == len(ref) <= chunks
    for p, r in zip(parts, ref):
        assert_close(p, r)


def test_chunk_empty_and_errors():
    parts = kiln.tensor(np.zeros((0, 2))).chunk(3)
    assert len(parts) == 3 and all(tuple(p.shape) == (0, 2) for p in parts)
    with pytest.raises(RuntimeError, match=r"\[chunk\]"):
        kiln.chunk(kiln.ones(4), 0)
    with pytest.raises(IndexError, match=r"\[chunk\]"):
        kiln.chunk(kiln.ones(4), 2, dim=-2)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind_matches_numpy(dim):
    a = rand(2, 3, 4)
    parts = kiln.unbind(noncontig(a), dim)
    assert len(parts) == a.shape[dim]
    for i, p in enumerate(parts):
        assert_close(p, np.take(a, i, axis=dim))
    assert len(kiln.tensor(a).unbind(dim=1)) == 3


def test_unbind_errors():
    with pytest.raises(IndexError, match=r"\[unbind\]"):
        kiln.unbind(kiln.ones(()))
    with pytest.raises(IndexError, match=r"\[unbind\]"):
        kiln.unbind(kiln.ones(2, 3), 2)


def test_split_chunk_unbind_gradcheck():
    gradcheck(lambda x: kiln.split(x, 2, dim=1), rand(2, 3))
    gradcheck(lambda x: kiln.split(x, [1, 2], dim=1)[1] * 3, rand(2, 3))
    gradcheck(lambda x: kiln.chunk(x, 2, 0), rand(3, 2))
    gradcheck(lambda x: kiln.unbind(x, 1), rand(2, 3))
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    a, b, c = x.unbind(1)
    (a * 2 + c).sum().backward()
    assert_close(x.grad, np.array([[2.0, 0.0, 1.0]] * 2))


# --- flip / roll --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [(0,), (1,), (-1,), (0, 2), (0, 1, 2), ()])
def test_flip_matches_numpy(dtype, dims):
    a = rand(2, 3, 4, dtype=_np(dtype))
    assert_close(kiln.flip(kiln.tensor(a), dims), np.flip(a, dims) if dims else a)
    assert_close(noncontig(a).flip(dims), np.flip(a, dims) if dims else a)
    if dims:
        assert_close(noncontig(a).flip(*dims), np.flip(a, dims))


def test_flip_variants_and_errors():
    a = rand(3, 4)
    assert_close(kiln.tensor(a).flip(0), a[::-1])
    assert_close(kiln.tensor(a).flip([0, 1]), a[::-1, ::-1])
    assert_close(kiln.tensor(a).flip(0, 1), a[::-1, ::-1])
    assert_close(kiln.fliplr(kiln.tensor(a)), np.fliplr(a))
    assert_close(kiln.flipud(kiln.tensor(a)), np.flipud(a))
    assert_close(kiln.flip(kiln.tensor(2.5), [0]), 2.5)
    assert tuple(kiln.flip(kiln.tensor(np.zeros((0, 3))), [0]).shape) == (0, 3)
    with pytest.raises(TypeError, match=r"\[flip\]"):
        kiln.ones(2).flip()
    with pytest.raises(IndexError, match=r"\[flip\]"):
        kiln.flip(kiln.ones(2, 3), [2])
    with pytest.raises(RuntimeError, match=r"\[flip\]"):
        kiln.flip(kiln.ones(2, 3), [0, -2])


def test_flip_of_sliced_view():
    a = rand(4, 6)
    t = kiln.tensor(a).narrow(0, 1, 3).unfold(1, 1, 2).squeeze(-1)
    assert_close(kiln.flip(t, [0, 1]), a[1:, ::2][::-1, ::-1])


@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), (5, -1), ((1, 2), (0, 1)),
                                         ((3, -1), (1, 1)), (0, 0), (7, None), ((2,), None)])
def test_roll_matches_numpy(shifts, dims):
    a = rand(3, 4)
    out = kiln.roll(kiln.tensor(a), shifts, dims)
    assert_close(out, np.roll(a, shifts, dims))
    assert_close(noncontig(a).roll(shifts, dims), np.roll(a, shifts, dims))


def test_roll_dtypes_edge_and_errors():
    for dtype in DTYPES:
        a = rand(5, dtype=_np(dtype))
        assert_close(kiln.roll(kiln.tensor(a), 2), np.roll(a, 2))
    assert tuple(kiln.roll(kiln.tensor(np.zeros((0, 2))), 1, 0).shape) == (0, 2)
    assert_close(kiln.roll(kiln.tensor(3.0), 1), 3.0)
    with pytest.raises(IndexError, match=r"\[roll\]"):
        kiln.roll(kiln.tensor(3.0), 1, 0)
    with pytest.raises(RuntimeError, match=r"\[roll\]"):
        kiln.roll(kiln.ones(2, 3), (1, 2), 0)
    with pytest.raises(RuntimeError, match=r"\[roll\]"):
        kiln.roll(kiln.ones(2, 3), (1, 2))
    with pytest.raises(IndexError, match=r"\[roll\]"):
        kiln.roll(kiln.ones(2, 3), 1, 2)


def test_flip_roll_gradcheck():
    w = kiln.tensor(rand(2, 3))
    gradcheck(lambda x: kiln.flip(x, [0, 1]) * w, rand(2, 3))
    gradcheck(lambda x: kiln.roll(x, (1, -1), (0, 1)) * w, rand(2, 3))
    gradcheck(lambda x: kiln.roll(x, 4) * w, rand(2, 3))


# --- repeat / tile ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reps", [(2, 1), (1, 3), (2, 3), (2, 1, 2), (0, 2)])
def test_repeat_matches_numpy_tile(dtype, reps):
    a = rand(2, 3, dtype=_np(dtype))
    assert_close(kiln.tensor(a).repeat(*reps), np.tile(a, reps))
    assert_close(noncontig(a).repeat(reps), np.tile(a, reps))


def test_repeat_0d_tile_and_errors():
    assert_close(kiln.tensor(1.5).repeat(3), np.array([1.5] * 3))
    assert_close(kiln.tensor(1.5).repeat(()), 1.5)
    a = rand(2, 3)
    assert_close(kiln.tile(kiln.tensor(a), (2,)), np.tile(a, (1, 2)))
    assert_close(kiln.tensor(a).tile(2, 1, 1), np.tile(a, (2, 1, 1)))
    with pytest.raises(RuntimeError, match=r"\[repeat\]"):
        kiln.ones(2, 3).repeat(2)
    with pytest.raises(RuntimeError, match=r"\[repeat\]"):
        kiln.ones(2, 3).repeat(2, -1)


def test_repeat_gradcheck():
    w = kiln.tensor(rand(4, 9))
    gradcheck(lambda x: x.repeat(2, 3) * w, rand(2, 3))
    gradcheck(lambda x: x.repeat(2, 1, 2), rand(2, 3))
    gradcheck(lambda x: kiln.tile(x, (2,)), rand(3))


# --- tril / triu --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0, 1, -1, 5, -5])
def test_tril_triu_match_numpy(dtype, k):
    a = rand(2, 3, 4, dtype=_np(dtype))
    assert_close(kiln.tril(kiln.tensor(a), k), np.tril(a, k))
    assert_close(kiln.triu(kiln.tensor(a), diagonal=k), np.triu(a, k))
    assert_close(noncontig(a).tril(k), np.tril(a, k))
    assert_close(noncontig(a).triu(k), np.triu(a, k))


def test_tril_triu_inplace_empty_and_errors():
    a = rand(3, 3)
    t = kiln.tensor(a)
    assert t.tril_(-1) is t
    assert_close(t, np.tril(a, -1))
    t = kiln.tensor(a)
    t.triu_(1)
    assert_close(t, np.triu(a, 1))
    assert tuple(kiln.tril(kiln.tensor(np.zeros((0, 3)))).shape) == (0, 3)
    with pytest.raises(RuntimeError, match=r"\[tril\]"):
        kiln.tril(kiln.ones(3))
    with pytest.raises(RuntimeError, match=r"\[triu\]"):
        kiln.ones(3).triu()


def test_tril_triu_gradcheck():
    gradcheck(lambda x: kiln.tril(x, 0), rand(3, 3))
    gradcheck(lambda x: kiln.triu(x, -1), rand(2, 3))
    def inplace(x):
        y = x * 1
        y.tril_(1)
        return y
    gradcheck(inplace, rand(3, 4))


def test_tril_inplace_noncontiguous_and_leaf_error():
    a = rand(3, 4)
    t = noncontig(a)
    t.tril_()
    assert_close(t, np.tril(a))
    x = kiln.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[tril_\]"):
        x.tril_()


def test_cat_legacy_empty_requiring_grad():
    e = kiln.tensor(np.zeros(0), requires_grad=True)
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    kiln.cat([e, x]).sum().backward()
    assert tuple(e.grad.shape) == (0,)
    assert_close(x.grad, np.ones((2, 3)))


def test_split_backward_is_one_node_that_concatenates_the_pieces_gradients():
    x = kiln.tensor(rand(4, 9), requires_grad=True)
    a, b, c = x.split([2, 3, 4], dim=1)
    assert a.grad_fn is b.grad_fn is c.grad_fn
    (a * 2 + 0).sum().backward(retain_graph=True)  # b and c unused: their blocks are zeros
    want = np.zeros((4, 9))
    want[:, :2] = 2
    assert_close(x.grad, want)
    x.grad = None
    (a.sum() + (c * c).sum()).backward()
    want = np.zeros((4, 9))
    want[:, :2] = 1
    want[:, 5:] = 2 * x.detach().numpy()[:, 5:]
    assert_close(x.grad, want)
    gradcheck(lambda t: t.split(2, dim=0)[1] * t.split(2, dim=0)[0], rand(4, 3))
    assert kiln.autograd.gradgradcheck(
        lambda t: (t.split([1, 2], dim=1)[1] ** 2), [kiln.tensor(rand(2, 3), requires_grad=True)])
