"""Indexing: Python x[...] / x[...] = v and the index ops, against NumPy."""

import numpy as np
import pytest

import kiln
from helpers import RNG, assert_close, gradcheck, noncontig, rand

# ---------------------------------------------------------------- __getitem__

BASIC = [
    1, -1, (0, 2), (slice(None), 1), slice(1, 3), slice(None, None, 2), (slice(0, 3, 2), -2),
    (Ellipsis, 1), (None, 0), (0, None, slice(1, 4)), Ellipsis, (), (1, Ellipsis, None),
    (slice(-2, None), slice(None, -1)), slice(5, 9),
]


@pytest.mark.parametrize("idx", BASIC, ids=repr)
def test_basic_matches_numpy_and_is_view(idx):
    a = rand(3, 4, 5)
    x = kiln.tensor(a)
    r = x[idx]
    assert_close(r, a[idx])
    if r.numel():
        r.fill_(7.0)
        b = a.copy()
        b[idx] = 7.0
        assert_close(x, b)


def test_chained_setitem_and_slice_iadd_write_through():
    x = kiln.zeros(3, 4)
    x[0][1] = 5
    x[:, 1:3] += 1
    b = np.zeros((3, 4))
    b[0][1] = 5
    b[:, 1:3] += 1
    assert_close(x, b, dtype=kiln.float32)


ADVANCED = [
    [0, 2, 2],
    [[0, 1], [2, 0]],
    ([0, 2], [1, 3]),
    ([0, 2], slice(None), [1, 3]),
    (slice(None), [3, 0, 3]),
    (slice(1, 3), [0, 0], [4, 1]),
    ([[0], [2]], [1, 3, 3]),
    (Ellipsis, [0, -1]),
    ([0, 1], None, slice(None), [2, 4]),
    (None, [1, 2], slice(0, 4, 2)),
    ([-1, -3],),
    ([],),
    ((0, 2, 2),),
]


@pytest.mark.parametrize("idx", ADVANCED, ids=repr)
def test_advanced_matches_numpy(idx):
    a = rand(3, 4, 5)
    np_idx = tuple(np.array(i, dtype=np.int64) if isinstance(i, (list, tuple)) else i
                   for i in (idx if isinstance(idx, tuple) else (idx,)))
    assert_close(kiln.tensor(a)[idx], a[np_idx])
    assert_close(noncontig(a)[idx], a[np_idx])


def test_int_then_advanced_follows_pytorch_select_rule():
    # ints are selects, so x[0, :, [0, 1]] is x[0][:, [0, 1]] (NumPy would give (2, 4)).
    a = rand(3, 4, 5)
    assert_close(kiln.tensor(a)[0, :, [0, 1]], a[0][:, [0, 1]])


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32])
def test_tensor_index_dtypes(dtype):
    a = rand(4, 3)
    i = np.array([3, 0, 3, -1])
    assert_close(kiln.tensor(a)[kiln.tensor(i, dtype=dtype)], a[i])
    assert_close(kiln.tensor(a)[:, kiln.tensor(1, dtype=dtype)], a[:, 1])


def test_bool_masks():
    a = rand(3, 4, 5)
    x = kiln.tensor(a)
    m2 = a[..., 0] > 0
    assert_close(x[kiln.tensor(m2)], a[m2])
    m3 = a > 0
    assert_close(x[kiln.tensor(m3)], a[m3])
    m1 = a[0, :, 0] > 0
    assert_close(x[:, kiln.tensor(m1)], a[:, m1])
    assert_close(x[x > 0], a[a > 0])
    assert_close(x[[True, False, True]], a[[True, False, True]])
    assert_close(x[np.array([True, False, True])], a[np.array([True, False, True])])
    assert_close(x[kiln.tensor(m2.astype(np.uint8))], a[m2])


def test_bool_scalars_and_0d_tensors():
    a = rand(2, 3)
    x = kiln.tensor(a)
    assert_close(x[True], a[True])
    assert_close(x[False], a[False])
    assert_close(x[None, True, 1], a[None, True, 1])
    s = kiln.tensor(2.5)
    assert_close(s[None], np.array([2.5]))
    assert_close(s[...], np.array(2.5))
    assert_close(s[kiln.tensor(True)], np.array([2.5]))
    assert_close(x[kiln.tensor(1)], a[1])


@pytest.mark.parametrize("make", [np.int64, kiln.tensor,
                                  lambda i: kiln.tensor(i, dtype=kiln.int32)])
def test_integer_scalar_index_is_view(make):
    x = kiln.tensor(rand(3, 2))
    r = x[make(1)]
    r.fill_(0.0)
    assert x[1].tolist() == [0.0, 0.0]
    x[make(2), make(0)] = 4.0
    assert x[2, 0].item() == 4.0


def test_empty_results():
    a = rand(3, 4)
    x = kiln.tensor(a)
    assert_close(x[[]], a[np.array([], dtype=np.int64)])
    assert_close(x[2:1], a[2:1])
    assert_close(x[x > 100], a[a > 100])
    e = kiln.tensor(np.zeros((0, 3)))
    assert_close(e[:, [0, 2]], np.zeros((0, 2)))


def test_getitem_dtypes():
    for dt in (kiln.int64, kiln.bool, kiln.float16, kiln.uint8):
        a = rand(4, 3) > 0 if dt == kiln.bool else np.abs(rand(4, 3, dtype=np.int64))
        x = kiln.tensor(a).to(dt)
        got = x[[0, 2], 1:]
        assert got.dtype == dt
        want = a[[0, 2], 1:].astype(np.float32)
        np.testing.assert_array_equal(got.to(kiln.float32).numpy(), want)


# ---------------------------------------------------------------- __setitem__

SETS = [
    (1, 3.0), ((slice(None), 2), rand(5)), ([0, 2], rand(2, 4, 5)), ((0, [1, 1, 3]), 9.0),
    ((slice(None), [0, 2], slice(1, 3)), rand(3, 2, 2)), ((Ellipsis, [4, 0]), rand(2)),
    ((None, 1), rand(4, 5)), ((slice(0, 3, 2), slice(None), 1), rand(2, 4)),
]


@pytest.mark.parametrize("idx,val", SETS, ids=lambda v: repr(v)[:30])
def test_setitem_matches_numpy(idx, val):
    a = rand(3, 4, 5)
    np_idx = tuple(np.array(i) if isinstance(i, list) else i
                   for i in (idx if isinstance(idx, tuple) else (idx,)))
    for x in (kiln.tensor(a), noncontig(a)):
        x[idx] = kiln.tensor(val) if isinstance(val, np.ndarray) else val
        b = a.copy()
        b[np_idx] = val
        assert_close(x, b)


def test_setitem_mask_list_and_casts():
    a = rand(3, 4)
    x = kiln.tensor(a)
    x[x > 0] = 0
    x[[0, 1]] = [[1, 2, 3, 4], [5, 6, 7, 8]]
    b = a.copy()
    b[b > 0] = 0
    b[[0, 1]] = [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert_close(x, b)
    i = kiln.zeros(4, dtype=kiln.int64)
    i[1:3] = 2.7
    assert i.tolist() == [0, 2, 2, 0]
    y = kiln.zeros(2, 3)
    y[0] = kiln.ones(1, 3)  # leading size-1 dims of the value are dropped
    assert y.sum().item() == 3


def test_setitem_bumps_version_and_writes_view_of_view():
    x = kiln.zeros(4, 5)
    v = x[1:3]
    before = x._version
    v[:, [0, 4]] = 1.0
    assert x._version > before
    b = np.zeros((4, 5))
    b[1:3, [0, 4]] = 1
    assert_close(x, b, dtype=kiln.float32)


def test_setitem_autograd_non_leaf():
    x = kiln.tensor(rand(3, 4), requires_grad=True)
    y = x * 2
    y[0] = 0
    y[:, [1, 1]] = 5.0
    y.sum().backward()
    g = np.full((3, 4), 2.0)
    g[0] = 0
    g[:, 1] = 0
    assert_close(x.grad, g)


def test_setitem_value_gets_gradient():
    x = kiln.zeros(3, 4)
    v = kiln.tensor(rand(4), requires_grad=True)
    x[[0, 2]] = v
    assert x.requires_grad
    (x * kiln.tensor(rand(3, 4))).sum().backward()
    assert v.grad is not None and tuple(v.grad.shape) == (4,)


def test_setitem_no_grad_on_leaf_and_leaf_error():
    x = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[index_put_\]"):
        x[0] = 1.0
    with kiln.no_grad():
        x[0] = 1.0
    assert x[0].item() == 1.0


def test_getitem_gradients_accumulate_duplicates():
    a = rand(4, 3)
    x = kiln.tensor(a, requires_grad=True)
    idx = [0, 2, 2, 2, -1]
    w = rand(5, 3)
    (x[idx] * kiln.tensor(w)).sum().backward()
    ref = np.zeros((4, 3))
    np.add.at(ref, np.array(idx), w)
    assert_close(x.grad, ref)


def test_getitem_gradcheck():
    gradcheck(lambda x: x[[0, 1, 1], 1:], rand(2, 3))
    gradcheck(lambda x: x[x > 0], rand(2, 3))
    gradcheck(lambda x: x[:, None, [2, 0, 2]], rand(2, 3))
    gradcheck(lambda x: x[1, ::2], rand(2, 3))


# ---------------------------------------------------------------- errors


def test_getitem_errors():
    x = kiln.zeros(3, 4)
    with pytest.raises(IndexError, match=r"\[index\] index 5 is out of bounds for"
                       r" dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match=r"\[index\] index 4 is out of bounds for"
                       r" dimension 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match=r"\[index\] index -5 is out of bounds for dimension 1"):
        x[:, [0, -5]]
    with pytest.raises(IndexError, match=r"\[index\] tensors used as indices must be"
                       r" long, int, byte or bool"):
        x[kiln.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match=r"\[index\] The shape of the mask \[2\] at index 0"):
        x[kiln.tensor([True, False])]
    with pytest.raises(IndexError, match=r"\[index\] too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match=r"\[index\] step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match=r"\[index\] only integers"):
        x[1.5]
    with pytest.raises(IndexError, match=r"\[index\] shape mismatch"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match=r"\[index\] an index can only have a single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match=r"\[index\] invalid index of a 0-dim tensor"):
        kiln.tensor(1.0)[0]


def test_setitem_errors():
    x = kiln.zeros(3, 4)
    with pytest.raises(IndexError, match=r"\[index\] index 3 is out of bounds"):
        x[3] = 1.0
    with pytest.raises(RuntimeError, match=r"\[index_put_\] shape mismatch"):
        x[[0, 1]] = kiln.ones(3, 4)
    with pytest.raises(RuntimeError, match=r"\[copy_\]"):
        x[0] = kiln.ones(3)


# ---------------------------------------------------------------- gather / scatter


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    a = rand(3, 4)
    idx = RNG.integers(0, a.shape[dim], size=(2, 4) if dim == 0 else (3, 6))
    ref = np.take_along_axis(a, idx, axis=dim)
    assert_close(kiln.gather(kiln.tensor(a), dim, kiln.tensor(idx)), ref)
    assert_close(noncontig(a).gather(dim, kiln.tensor(idx)), ref)
    # index may be smaller than input in the other dims
    small = idx[:, :3] if dim == 0 else idx[:2]
    sub = a[:, :3] if dim == 0 else a[:2]
    want = np.take_along_axis(sub, small, dim)
    assert_close(kiln.tensor(a).gather(dim, kiln.tensor(small)), want)


def test_gather_0d_and_empty():
    assert kiln.gather(kiln.tensor(3.0), 0, kiln.tensor(0)).item() == 3.0
    e = kiln.gather(kiln.ones(2, 3), 1, kiln.zeros(2, 0, dtype=kiln.int64))
    assert tuple(e.shape) == (2, 0)


def scatter_ref(a, dim, idx, src, op):
    out = a.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        tgt = tuple(tgt)
        if op == "add":
            out[tgt] += src[pos]
        elif op == "multiply":
            out[tgt] *= src[pos]
        else:
            out[tgt] = src[pos]
    return out


@pytest.mark.parametrize("op", [None, "add", "multiply"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(op, dim):
    a, src = rand(3, 4), rand(3, 5)
    idx = RNG.integers(0, a.shape[dim], size=(2, 3))
    ref = scatter_ref(a, dim, idx, src, op)
    got = kiln.tensor(a).scatter(dim, kiln.tensor(idx), kiln.tensor(src), reduce=op)
    if op is None:  # duplicates in a plain scatter keep one unspecified value; compare uniquely hit
        idx = np.stack([RNG.permutation(a.shape[dim])[:2] for _ in range(3)], axis=1)
        ref = scatter_ref(a, dim, idx, src, op)
        got = kiln.scatter(kiln.tensor(a), dim, kiln.tensor(idx), kiln.tensor(src))
    assert_close(got, ref)
    x = noncontig(a)
    x.scatter_(dim, kiln.tensor(idx), kiln.tensor(src), reduce=op)
    assert_close(x, ref)


def test_scatter_value_and_scatter_add_duplicates():
    a = rand(3, 4)
    idx = np.array([[0, 1, 2, 0], [2, 2, 2, 2]])
    assert_close(kiln.tensor(a).scatter(0, kiln.tensor(idx), 1.5),
                 scatter_ref(a, 0, idx, np.full(idx.shape, 1.5), None))
    src = rand(2, 4)
    ref = scatter_ref(a, 0, idx, src, "add")
    assert_close(kiln.scatter_add(kiln.tensor(a), 0, kiln.tensor(idx), kiln.tensor(src)), ref)
    x = kiln.tensor(a)
    x.scatter_add_(0, kiln.tensor(idx), kiln.tensor(src))
    assert_close(x, ref)
    x = kiln.tensor(a)
    x.scatter_(1, kiln.tensor([[3], [0]]), -1.0)
    b = a.copy()
    b[0, 3] = b[1, 0] = -1
    assert_close(x, b)


def test_gather_scatter_gradcheck():
    idx = kiln.tensor([[0, 1, 1], [1, 0, 0]])
    gradcheck(lambda x: kiln.gather(x, 0, idx), rand(2, 3))
    gradcheck(lambda x: kiln.gather(x, 1, idx), rand(2, 3))
    uidx = kiln.tensor([[0, 1, 0], [1, 0, 1]])
    gradcheck(lambda x, s: kiln.scatter(x, 0, uidx, s), rand(2, 3), rand(2, 4))
    gradcheck(lambda x: kiln.scatter(x, 1, idx, 2.0), rand(2, 3))
    gradcheck(lambda x, s: kiln.scatter_add(x, 1, idx, s), rand(2, 3), rand(3, 3))
    gradcheck(lambda x, s: x.scatter(0, idx, s, reduce="add"), rand(2, 3), rand(2, 3))


def test_gather_backward_accumulates():
    x = kiln.tensor(rand(3), requires_grad=True)
    kiln.gather(x, 0, kiln.tensor([2, 2, 0, 2])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 3.0]


def test_gather_scatter_errors():
    x = kiln.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"\[gather\] index 5 is out of bounds for"
                       r" dimension 0 with size 3"):
        kiln.gather(x, 0, kiln.tensor([[5]]))
    with pytest.raises(RuntimeError, match=r"\[gather\] index -1 is out of bounds"):
        kiln.gather(x, 1, kiln.tensor([[-1]]))
    with pytest.raises(RuntimeError, match=r"\[gather\] Expected dtype int64 for index"):
        kiln.gather(x, 0, kiln.tensor([[0]], dtype=kiln.int32))
    with pytest.raises(RuntimeError, match=r"\[gather\] Index tensor must have the same number"):
        kiln.gather(x, 0, kiln.tensor([0]))
    with pytest.raises(RuntimeError, match=r"\[gather\] Size does not match at dimension 1"):
        kiln.gather(x, 0, kiln.zeros(1, 5, dtype=kiln.int64))
    with pytest.raises(IndexError, match=r"\[gather\] Dimension out of range"):
        kiln.gather(x, 2, kiln.zeros(1, 1, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[scatter\] index 3 is out of bounds"):
        x.scatter(0, kiln.tensor([[3]]), 1.0)
    with pytest.raises(RuntimeError, match=r"\[scatter\] reduce argument must be"
                       r" either add or multiply"):
        x.scatter(0, kiln.tensor([[0]]), 1.0, reduce="max")
    with pytest.raises(RuntimeError, match=r"\[scatter_add\] Size does not match at dimension 0"):
        kiln.scatter_add(x, 1, kiln.zeros(2, 1, dtype=kiln.int64), kiln.ones(1, 1))
    with pytest.raises(RuntimeError, match=r"\[scatter\] expected self and source"
                       r" to have the same dtype"):
        x.scatter(0, kiln.tensor([[0]]), kiln.ones(1, 1, dtype=kiln.float64))


# ---------------------------------------------------------------- index_select / index_add


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    a = rand(3, 4, 2)
    idx = np.array([1, 0, 1, 1])
    idx = idx % a.shape[dim]
    ref = np.take(a, idx, axis=dim)
    assert_close(kiln.index_select(kiln.tensor(a), dim, kiln.tensor(idx)), ref)
    assert_close(noncontig(a).index_select(dim, kiln.tensor(idx, dtype=kiln.int32)), ref)


def test_index_select_0d_and_empty():
    assert kiln.index_select(kiln.tensor(4.0), 0, kiln.tensor([0])).item() == 4.0
    r = kiln.index_select(kiln.ones(3, 2), 0, kiln.zeros(0, dtype=kiln.int64))
    assert tuple(r.shape) == (0, 2)
    assert tuple(kiln.ones(3, 2).index_select(1, kiln.tensor(1)).shape) == (3, 1)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_duplicates(dim):
    a = rand(3, 4)
    idx = np.array([0, 2, 0, 0])[: 4 if dim else 3] % a.shape[dim]
    shape = (len(idx), 4) if dim == 0 else (3, len(idx))
    src = rand(*shape)
    ref = a.copy()
    np.add.at(ref, (idx,) if dim == 0 else (slice(None), idx), src * 2.5)
    got = kiln.index_add(kiln.tensor(a), dim, kiln.tensor(idx), kiln.tensor(src), alpha=2.5)
    assert_close(got, ref)
    x = noncontig(a)
    x.index_add_(dim, kiln.tensor(idx), kiln.tensor(src), alpha=2.5)
    assert_close(x, ref)


def test_index_select_add_gradcheck():
    idx = kiln.tensor([2, 0, 2])
    gradcheck(lambda x: kiln.index_select(x, 1, idx), rand(2, 3))
    gradcheck(lambda x, s: kiln.index_add(x, 1, idx, s, alpha=-2.0), rand(2, 3), rand(2, 3))
    x = kiln.tensor(rand(3), requires_grad=True)
    x.index_select(0, kiln.tensor([1, 1, 1])).sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0]


def test_index_select_add_errors():
    x = kiln.zeros(3, 4)
    with pytest.raises(IndexError, match=r"\[index_select\] index out of range in self"):
        kiln.index_select(x, 0, kiln.tensor([3]))
    with pytest.raises(IndexError, match=r"\[index_select\] index out of range in self"):
        kiln.index_select(x, 0, kiln.tensor([-1]))
    with pytest.raises(IndexError, match=r"\[index_select\] Expected dtype int32 or int64"):
        kiln.index_select(x, 0, kiln.tensor([0.0]))
    with pytest.raises(IndexError, match=r"\[index_select\] Index is supposed to be a vector"):
        kiln.index_select(x, 0, kiln.tensor([[0]]))
    with pytest.raises(IndexError, match=r"\[index_add\] index out of range in self"):
        kiln.index_add(x, 1, kiln.tensor([4]), kiln.ones(3, 1))
    with pytest.raises(RuntimeError, match=r"\[index_add\] source \[3, 2\] must match self"):
        kiln.index_add(x, 1, kiln.tensor([0]), kiln.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"\[index_add_\] expected self and source"
                       r" to have the same dtype"):
        x.index_add_(1, kiln.tensor([0]), kiln.ones(3, 1, dtype=kiln.float64))


# ---------------------------------------------------------------- masked ops


def test_masked_fill_broadcast_and_inplace():
    a = rand(3, 4)
    m = rand(4, dtype=np.bool_)
    ref = np.where(m, -1.0, a)
    assert_close(kiln.masked_fill(kiln.tensor(a), kiln.tensor(m), -1.0), ref)
    assert_close(noncontig(a).masked_fill(kiln.tensor(m), kiln.tensor(-1.0)), ref)
    x = noncontig(a)
    x.masked_fill_(kiln.tensor(m), -1)
    assert_close(x, ref)
    # out of place, self broadcasts against a larger mask
    m2 = rand(2, 3, 4, dtype=np.bool_)
    assert_close(kiln.tensor(a).masked_fill(kiln.tensor(m2), 0.5), np.where(m2, 0.5, a))
    i = kiln.tensor([1, 2, 3]).masked_fill(kiln.tensor([True, False, True]), 2.9)
    assert i.dtype == kiln.int64 and i.tolist() == [2, 2, 2]


def test_masked_fill_grads():
    m = kiln.tensor(rand(2, 3, dtype=np.bool_))
    gradcheck(lambda x: kiln.masked_fill(x, m, 3.0), rand(2, 3))
    gradcheck(lambda x, v: kiln.masked_fill(x, m, v), rand(2, 3), np.array(0.7))
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    x.masked_fill(m, 1.0).sum().backward()
    assert_close(x.grad, np.where(m.numpy(), 0.0, 1.0))
    y = x * 1.0
    y.masked_fill_(m, 0.0)
    y.sum().backward()


def test_masked_select_and_grad():
    a = rand(3, 4)
    m = rand(3, 4, dtype=np.bool_)
    assert_close(kiln.masked_select(kiln.tensor(a), kiln.tensor(m)), a[m])
    m1 = rand(4, dtype=np.bool_)
    want = np.broadcast_to(a, (3, 4))[np.broadcast_to(m1, (3, 4))]
    assert_close(noncontig(a).masked_select(kiln.tensor(m1)), want)
    mk = kiln.tensor(m)
    gradcheck(lambda x: kiln.masked_select(x, mk), a)


def test_masked_errors():
    x = kiln.zeros(3)
    with pytest.raises(RuntimeError, match=r"\[masked_fill\] only supports boolean masks"):
        x.masked_fill(kiln.tensor([1, 0, 1]), 1.0)
    with pytest.raises(RuntimeError, match=r"\[masked_fill\] only supports a 0-dimensional value"):
        x.masked_fill(x > 0, kiln.ones(1))
    with pytest.raises(RuntimeError, match=r"\[masked_fill_\] mask of shape \[2,"
                       r" 3\] cannot be broadcast"):
        x.masked_fill_(kiln.zeros(2, 3).to(kiln.bool), 1.0)
    with pytest.raises(RuntimeError, match=r"\[masked_select\] expected a bool tensor"):
        x.masked_select(kiln.zeros(3))
    with pytest.raises(RuntimeError, match=r"\[masked_fill\]"):
        x.masked_fill(kiln.zeros(4).to(kiln.bool), 1.0)


# ---------------------------------------------------------------- nonzero / take / put / index_put


def test_nonzero():
    a = rand(3, 4, dtype=np.int64)
    a[0, 0] = 0
    got = kiln.nonzero(kiln.tensor(a))
    assert got.dtype == kiln.int64
    np.testing.assert_array_equal(got.numpy(), np.argwhere(a))
    tup = noncontig(a).nonzero(as_tuple=True)
    assert len(tup) == 2
    for g, r in zip(tup, np.nonzero(a)):
        np.testing.assert_array_equal(g.numpy(), r)
    assert tuple(kiln.nonzero(kiln.zeros(2, 3)).shape) == (0, 2)
    assert tuple(kiln.nonzero(kiln.tensor(5.0)).shape) == (1, 0)
    assert kiln.nonzero(kiln.tensor(5.0), as_tuple=True)[0].tolist() == [0]
    np.testing.assert_array_equal(kiln.tensor([True, False, True]).nonzero().numpy(), [[0], [2]])


def test_take_put():
    a = rand(3, 4)
    idx = np.array([[0, 11], [-1, 5]])
    assert_close(kiln.take(noncontig(a), kiln.tensor(idx)), np.take(a, idx))
    src = rand(4)
    flat = np.array([1, 1, 7, 0])
    ref = a.copy().reshape(-1)
    np.add.at(ref, flat, src)
    got = kiln.tensor(a).put(kiln.tensor(flat), kiln.tensor(src), accumulate=True)
    assert_close(got, ref.reshape(3, 4))
    x = noncontig(a)
    x.put_(kiln.tensor([1, 7]), kiln.tensor([9.0, 8.0], dtype=kiln.float64))
    b = a.copy()
    b.reshape(-1)[[1, 7]] = [9.0, 8.0]
    assert_close(x, b)
    t = kiln.tensor(rand(2, 3))
    gradcheck(lambda x: kiln.take(x, kiln.tensor([5, 0, 5])), rand(2, 3))
    gradcheck(lambda x, s: x.put(kiln.tensor([4, 1]), s), rand(2, 3), rand(2))
    with pytest.raises(IndexError, match=r"\[take\] out of range: tried to access"
                       r" index 6 on a tensor of 6"):
        t.take(kiln.tensor([6]))


def test_index_put():
    a = rand(4, 3)
    i0, i1 = np.array([0, 3, 0]), np.array([2, 1, 2])
    v = rand(3)
    ref = a.copy()
    np.add.at(ref, (i0, i1), v)
    got = kiln.index_put(kiln.tensor(a), (kiln.tensor(i0), kiln.tensor(i1)), kiln.tensor(v), True)
    assert_close(got, ref)
    x = noncontig(a)
    x.index_put_((None, kiln.tensor([0, 2])), kiln.tensor(2.0, dtype=kiln.float64))
    b = a.copy()
    b[:, [0, 2]] = 2.0
    assert_close(x, b)
    gradcheck(lambda x, v: kiln.index_put(x, (kiln.tensor([1, 0]),), v), rand(2, 3), rand(3))
    ii = (kiln.tensor([1, 1]), kiln.tensor([0, 0]))
    gradcheck(lambda x, v: x.index_put(ii, v, accumulate=True),
              rand(2, 3), rand(2))
    with pytest.raises(IndexError, match=r"\[index_put\] index 4 is out of bounds for dimension 0"):
        kiln.index_put(kiln.tensor(a), (kiln.tensor([4]),), kiln.tensor(1.0, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[index_put\] expected self and source"
                       r" to have the same dtype"):
        kiln.index_put(kiln.tensor(a), (kiln.tensor([0]),), kiln.tensor(1.0))


def test_double_backward_through_gather():
    x = kiln.tensor(rand(3), requires_grad=True)
    y = kiln.gather(x * x, 0, kiln.tensor([0, 0, 2]))
    (g,) = kiln.autograd.grad(y.sum(), x, create_graph=True)
    g.sum().backward()
    assert x.grad.tolist() == [4.0, 0.0, 2.0]


def test_inplace_variants_gradcheck():
    idx = kiln.tensor([[1, 0, 1]])
    m = kiln.tensor([[True, False, True], [False, False, True]])
    gradcheck(lambda x, s: (x * 1).scatter_(0, idx, s), rand(2, 3), rand(1, 3))
    gradcheck(lambda x, s: (x * 1).scatter_add_(1, idx, s), rand(2, 3), rand(1, 3))
    gradcheck(lambda x, s: (x * 1).index_add_(0, kiln.tensor([1, 1]), s), rand(2, 3), rand(2, 3))
    gradcheck(lambda x, v: (x * 1).masked_fill_(m, v), rand(2, 3), np.array(1.5))
    gradcheck(lambda x, v: (x * 1).index_put_((kiln.tensor([0, 0]),), v, accumulate=True),
              rand(2, 3), rand(3))
    gradcheck(lambda x, s: (x * 1).put_(kiln.tensor([5, 0]), s), rand(2, 3), rand(2))


def test_setitem_gradcheck():
    def f(x, v):
        y = x * 3
        y[:, [2, 0]] = v
        y[0, 1:] = 0.5
        return y
    gradcheck(f, rand(2, 3), rand(2))


def test_half_and_bool_put():
    x = kiln.zeros(4, dtype=kiln.float16)
    x[[1, 3]] = 2.5
    assert x.tolist() == [0.0, 2.5, 0.0, 2.5]
    b = kiln.zeros(2, 2, dtype=kiln.bool)
    b[0, [1]] = True
    assert b.tolist() == [[False, True], [False, False]]
    ones = kiln.tensor([1, 1, 1], dtype=kiln.int32)
    acc = kiln.zeros(3, dtype=kiln.int32).index_put((kiln.tensor([2, 2, 0]),), ones, True)
    assert acc.tolist() == [1, 0, 2]


def test_autograd_limits():
    x = kiln.tensor(rand(2, 3), requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"\[scatter\] the backward of reduce='multiply'"):
        x.scatter(0, kiln.tensor([[0]]), kiln.ones(1, 1, dtype=kiln.float64), reduce="multiply")
    # Writing through a view of a non-leaf works (Note [In-place on views]).
    y = x * 2
    y[0][1] = 3.0
    y.sum().backward()
    expected = np.full((2, 3), 2.0)
    expected[0, 1] = 0.0
    assert_close(x.grad, expected)
    assert_close(y, np.where(expected == 0, 3.0, x.detach().numpy() * 2))
