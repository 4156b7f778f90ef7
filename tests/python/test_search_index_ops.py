"""searchsorted, bucketize, bincount, histc, index_fill and index_copy against NumPy,
with gradients and bad inputs; the last section compares with PyTorch where it is
installed (the GPU machine), on CPU and CUDA."""

import numpy as np
import pytest

import kiln
from helpers import RNG, assert_close, gradcheck, noncontig, rand, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def sorted_rows(*shape):
    """Sorted along the last axis, with repeated values so left and right differ."""
    return np.sort(RNG.integers(-4, 5, size=shape).astype(np.float64) / 2, axis=-1)


def np_searchsorted(seq, x, side):
    """NumPy's searchsorted row by row for an N-D sequence."""
    if seq.ndim == 1:
        return np.searchsorted(seq, x, side=side)
    out = np.empty(x.shape, dtype=np.int64)
    for i in np.ndindex(*seq.shape[:-1]):
        out[i] = np.searchsorted(seq[i], x[i], side=side)
    return out


# ---- searchsorted / bucketize ----

@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_1d(side):
    seq = sorted_rows(9)
    x = RNG.integers(-6, 7, size=(3, 4)) / 2
    got = kiln.searchsorted(kiln.tensor(seq), kiln.tensor(x), side=side)
    assert got.dtype == kiln.int64
    np.testing.assert_array_equal(got.numpy(), np_searchsorted(seq, x, side))
    # right=True is side="right".
    got = kiln.searchsorted(kiln.tensor(seq), kiln.tensor(x), right=side == "right")
    np.testing.assert_array_equal(got.numpy(), np_searchsorted(seq, x, side))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_nd_noncontiguous(side):
    seq = sorted_rows(2, 3, 6)
    x = RNG.integers(-6, 7, size=(2, 3, 5)) / 2
    got = kiln.searchsorted(noncontig(seq), noncontig(x), side=side, out_int32=True)
    assert got.dtype == kiln.int32
    np.testing.assert_array_equal(got.numpy(), np_searchsorted(seq, x, side))


def test_searchsorted_dtypes_and_scalar():
    seq = np.array([1, 3, 3, 7, 9], dtype=np.int32)
    x = np.array([[0, 3], [8, 10]], dtype=np.int64)
    got = kiln.searchsorted(kiln.tensor(seq), kiln.tensor(x))
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(seq, x))
    # A Python number gives a 0-d result; 3.5 is compared as a float, not truncated.
    s = kiln.searchsorted(kiln.tensor(seq), 3.5)
    assert s.shape == () and s.item() == 3
    assert kiln.searchsorted(kiln.tensor(seq), 3, right=True).item() == 3
    # Large int64 entries are not rounded through float32.
    big = kiln.tensor([2**40, 2**40 + 1, 2**40 + 2])
    assert kiln.searchsorted(big, kiln.tensor([2**40 + 1])).tolist() == [1]


def test_searchsorted_sorter():
    raw = RNG.permutation(8).astype(np.float64)
    order = np.argsort(raw)
    x = np.array([-1.0, 2.5, 3.0, 9.0])
    for side in ("left", "right"):
        got = kiln.searchsorted(kiln.tensor(raw), kiln.tensor(x), side=side,
                                sorter=kiln.tensor(order))
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(raw, x, side=side, sorter=order))


def test_searchsorted_empty_and_nan():
    assert kiln.searchsorted(kiln.tensor([1.0, 2.0]), kiln.zeros(0)).shape == (0,)
    np.testing.assert_array_equal(
        kiln.searchsorted(kiln.zeros(0), kiln.tensor([1.0, -1.0])).numpy(), [0, 0])
    # As in PyTorch, NaN passes every comparison and lands past the end.
    assert kiln.searchsorted(kiln.tensor([1.0, 2.0]), float("nan")).item() == 2


@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right):
    bounds = np.array([-1.0, 0.0, 0.5, 2.0])
    x = RNG.integers(-4, 5, size=(3, 5)) / 2
    got = kiln.bucketize(noncontig(x), kiln.tensor(bounds), right=right)
    # np.digitize(x, b, right=r) is bucketize(x, b, right=not r) for increasing bins.
    np.testing.assert_array_equal(got.numpy(), np.digitize(x, bounds, right=not right))
    assert kiln.bucketize(0.25, kiln.tensor(bounds), out_int32=True).dtype == kiln.int32
    assert kiln.bucketize(kiln.tensor(0.0), kiln.tensor(bounds)).item() == 1


def test_search_bad_inputs():
    seq = kiln.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*side"):
        kiln.searchsorted(seq, seq, side="middle")
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*opposites"):
        kiln.searchsorted(seq, seq, side="left", right=True)
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*\[2, 3\].*\[3, 3\]"):
        kiln.searchsorted(kiln.zeros(2, 3), kiln.zeros(3, 3))
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*scalar"):
        kiln.searchsorted(kiln.zeros(2, 3), 1.0)
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*0-d"):
        kiln.searchsorted(kiln.tensor(1.0), seq)
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*bool"):
        kiln.searchsorted(kiln.tensor([True, False]), seq)
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*int64"):
        kiln.searchsorted(seq, seq, sorter=kiln.tensor([0, 1, 2], dtype=kiln.int32))
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*shape"):
        kiln.searchsorted(seq, seq, sorter=kiln.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"\[searchsorted\].*out of range"):
        kiln.searchsorted(seq, seq, sorter=kiln.tensor([0, 1, 3]))
    with pytest.raises(RuntimeError, match=r"\[bucketize\].*\[2, 2\]"):
        kiln.bucketize(seq, kiln.zeros(2, 2))
    with pytest.raises(TypeError, match=r"\[searchsorted\]"):
        kiln.searchsorted(seq, "a")


# ---- bincount / histc ----

def test_bincount():
    x = RNG.integers(0, 7, size=20)
    got = kiln.bincount(kiln.tensor(x))
    assert got.dtype == kiln.int64
    np.testing.assert_array_equal(got.numpy(), np.bincount(x))
    got = kiln.tensor(x, dtype=kiln.uint8).bincount(minlength=10)
    np.testing.assert_array_equal(got.numpy(), np.bincount(x, minlength=10))
    # Non-contiguous input (every other element).
    wide = kiln.tensor(np.stack([x, x + 3], axis=-1).reshape(-1))
    np.testing.assert_array_equal(kiln.bincount(wide[::2]).numpy(), np.bincount(x))


@pytest.mark.parametrize("wdtype,out", [(kiln.float32, kiln.float32), (kiln.float64, kiln.float64),
                                        (kiln.int64, kiln.float64), (kiln.float16, kiln.float64)])
def test_bincount_weights(wdtype, out):
    x = RNG.integers(0, 5, size=12)
    w = RNG.integers(-3, 4, size=12).astype(np.float64)
    got = kiln.bincount(kiln.tensor(x), kiln.tensor(w, dtype=wdtype), minlength=3)
    assert got.dtype == out
    assert_close(got, np.bincount(x, weights=w, minlength=3))


def test_bincount_empty():
    got = kiln.bincount(kiln.zeros(0, dtype=kiln.int64), minlength=4)
    assert got.dtype == kiln.int64 and got.tolist() == [0, 0, 0, 0]
    # PyTorch returns int64 zeros for an empty input even with weights.
    assert kiln.bincount(kiln.zeros(0, dtype=kiln.int64), kiln.zeros(0)).dtype == kiln.int64


def test_bincount_bad_inputs():
    with pytest.raises(RuntimeError, match=r"\[bincount\].*minimum of -1"):
        kiln.bincount(kiln.tensor([1, -1, 2]))
    with pytest.raises(RuntimeError, match=r"\[bincount\].*\[2, 2\]"):
        kiln.bincount(kiln.tensor([[1, 2], [3, 4]]))
    with pytest.raises(RuntimeError, match=r"\[bincount\].*0-d|\[bincount\].*\[\]"):
        kiln.bincount(kiln.tensor(3))
    with pytest.raises(NotImplementedError, match=r"\[bincount\].*float32"):
        kiln.bincount(kiln.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"\[bincount\].*minlength"):
        kiln.bincount(kiln.tensor([1, 2]), minlength=-1)
    with pytest.raises(RuntimeError, match=r"\[bincount\].*weights \[3\]"):
        kiln.bincount(kiln.tensor([1, 2]), kiln.ones(3))


def np_histc(x, bins, lo, hi):
    x = x.reshape(-1)
    if lo == hi and x.size:
        lo, hi = x.min(), x.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return np.histogram(x[(x >= lo) & (x <= hi)], bins=bins, range=(lo, hi))[0]


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_histc(dtype):
    # Values on a 1/64 grid never sit on a bin edge of these ranges, so rounding
    # cannot move them between bins.
    x = (RNG.integers(-150, 150, size=(6, 7)) + 0.5) / 64
    got = kiln.histc(kiln.tensor(x, dtype=dtype), bins=10, min=-1, max=1)
    assert got.dtype == dtype
    assert_close(got, np_histc(x, 10, -1, 1), dtype)
    # Default range: the data's min and max (its max lands in the last bin).
    got = noncontig(x).to(dtype).histc(bins=7)
    assert_close(got, np_histc(x, 7, 0, 0), dtype)
    assert got.sum().item() == x.size


def test_histc_edge_cases():
    # One repeated value: the range widens to [v - 1, v + 1].
    assert kiln.histc(kiln.full((5,), 2.0), bins=4).tolist() == [0, 0, 5, 0]
    assert kiln.histc(kiln.zeros(0), bins=3).tolist() == [0, 0, 0]
    assert kiln.histc(kiln.tensor(1.5), bins=2, min=1, max=2).tolist() == [0, 1]
    # NaN and out-of-range values are not counted.
    x = kiln.tensor([float("nan"), -5.0, 0.1, 0.9, 1.0, 7.0])
    assert kiln.histc(x, bins=2, min=0, max=1).tolist() == [1, 2]
    assert kiln.histc(kiln.tensor([0.5, 1.5], dtype=kiln.float16), bins=2).dtype == kiln.float16


def test_histc_bad_inputs():
    with pytest.raises(RuntimeError, match=r"\[histc\].*int64"):
        kiln.histc(kiln.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"\[histc\].*bins"):
        kiln.histc(kiln.ones(3), bins=0)
    with pytest.raises(RuntimeError, match=r"\[histc\].*max must be larger"):
        kiln.histc(kiln.ones(3), min=2, max=1)
    with pytest.raises(RuntimeError, match=r"\[histc\].*not finite"):
        kiln.histc(kiln.tensor([0.0, float("inf")]))


# ---- index_fill / index_copy ----

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_fill(dim):
    x = rand(3, 4)
    idx = np.array([2, 0, -1, 0])
    want = x.copy()
    sel = [slice(None)] * 2
    sel[dim] = idx % x.shape[dim]
    want[tuple(sel)] = 7.5
    assert_close(kiln.index_fill(noncontig(x), dim, kiln.tensor(idx), 7.5), want)
    assert_close(kiln.tensor(x).index_fill(dim, kiln.tensor(idx), kiln.tensor(7.5)), want)
    t = kiln.tensor(x)
    assert t.index_fill_(dim, kiln.tensor(idx), 7.5) is t
    assert_close(t, want)
    # Integer self takes the value cast to its dtype.
    xi = kiln.tensor(x).long()
    got = xi.index_fill(dim, kiln.tensor(idx), 3)
    assert got.dtype == kiln.int64
    want_int = np.where(want == 7.5, 3, x.astype(np.int64))
    np.testing.assert_array_equal(got.numpy(), want_int)


def test_index_fill_0d_and_empty():
    assert kiln.tensor(2.0).index_fill(0, kiln.tensor([0]), -1.0).item() == -1.0
    assert kiln.tensor(2.0).index_fill(-1, kiln.tensor(0), -1.0).item() == -1.0
    x = rand(2, 3)
    assert_close(kiln.tensor(x).index_fill(1, kiln.zeros(0, dtype=kiln.int64), 1.0), x)
    assert kiln.zeros(0, 3).index_fill(1, kiln.tensor([1]), 1.0).shape == (0, 3)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_copy(dim):
    x = rand(4, 3)
    idx = np.array([3, 1])
    src_shape = (2, 3) if dim == 0 else (4, 2)
    idx = idx if dim == 0 else np.array([2, 0])
    src = rand(*src_shape)
    want = x.copy()
    if dim == 0:
        want[idx] = src
    else:
        want[:, idx] = src
    assert_close(kiln.index_copy(noncontig(x), dim, kiln.tensor(idx), noncontig(src)), want)
    t = kiln.tensor(x)
    assert t.index_copy_(dim, kiln.tensor(idx), kiln.tensor(src)) is t
    assert_close(t, want)


def test_index_copy_0d_and_empty():
    got = kiln.tensor([1.0, 2.0]).index_copy(0, kiln.tensor([1]), kiln.tensor(5.0))
    assert got.tolist() == [1, 5]
    assert kiln.tensor(1.0).index_copy(0, kiln.tensor([0]), kiln.tensor(5.0)).item() == 5.0
    x = rand(2, 3)
    empty = kiln.zeros(0, dtype=kiln.int64)
    got = kiln.tensor(x).index_copy(0, empty, kiln.zeros(0, 3, dtype=kiln.float64))
    assert_close(got, x)


def test_index_fill_copy_gradients():
    idx = kiln.tensor([2, 0, 2])
    gradcheck(lambda x: kiln.index_fill(x, 1, idx, 0.5), rand(2, 3))
    # A tensor value gets the sum of the filled positions' gradients, each once.
    gradcheck(lambda x, v: x.index_fill(1, idx, v), rand(2, 3), rand())
    gradcheck(lambda x, s: x.index_copy(0, kiln.tensor([1, 0]), s), rand(3, 2), rand(2, 2))
    gradcheck(lambda x, s: x.index_copy(1, kiln.tensor([2]), s), rand(2, 3), rand(2, 1))

    x = kiln.tensor(rand(2, 3), requires_grad=True)
    v = kiln.tensor(1.0, dtype=kiln.float64, requires_grad=True)
    x.index_fill(1, idx, v).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [0, 1, 0]])
    assert v.grad.item() == 4.0


def test_index_fill_copy_inplace_autograd():
    leaf = kiln.tensor(rand(3, 2), requires_grad=True)
    src = kiln.tensor(rand(1, 2), requires_grad=True)
    y = leaf * 2
    y.index_copy_(0, kiln.tensor([1]), src)
    y.index_fill_(1, kiln.tensor([0]), 0.0)
    y.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [[0, 2], [0, 0], [0, 2]])
    np.testing.assert_array_equal(src.grad.numpy(), [[0, 1]])
    with pytest.raises(RuntimeError):
        leaf.index_fill_(0, kiln.tensor([0]), 1.0)


def test_index_fill_copy_inplace_on_views():
    # Writes through a transposed view land in the base tensor.
    base = kiln.zeros(3, 4, dtype=kiln.float64)
    view = base.t()
    view.index_fill_(0, kiln.tensor([1]), 2.0)
    view.index_copy_(1, kiln.tensor([2]), kiln.ones(4, 1, dtype=kiln.float64) * 5)
    want = np.zeros((3, 4))
    want[:, 1] = 2.0
    want[2] = 5.0
    assert_close(base, want)


def test_results_do_not_require_grad():
    x = kiln.tensor([0.5, 1.5], requires_grad=True)
    assert not kiln.searchsorted(kiln.tensor([1.0]), x).requires_grad
    assert not kiln.histc(x, bins=2).requires_grad
    assert not kiln.bincount(kiln.tensor([0, 1]), x).requires_grad


def test_index_fill_copy_bad_inputs():
    x = kiln.zeros(3, 4)
    with pytest.raises(IndexError, match=r"\[index_fill\].*int64.*int32"):
        x.index_fill(0, kiln.tensor([0], dtype=kiln.int32), 1.0)
    with pytest.raises(RuntimeError, match=r"\[index_fill\].*vector.*\[1, 1\]"):
        x.index_fill(0, kiln.tensor([[0]]), 1.0)
    with pytest.raises(RuntimeError, match=r"\[index_fill\].*0-dimensional"):
        x.index_fill(0, kiln.tensor([0]), kiln.tensor([1.0]))
    with pytest.raises(IndexError, match=r"\[index_fill\].*index 3 .*dimension 0 with size 3"):
        x.index_fill(0, kiln.tensor([3]), 1.0)
    with pytest.raises(IndexError, match=r"\[index_fill_\].*index -5"):
        x.index_fill_(1, kiln.tensor([-5]), 1.0)
    with pytest.raises(IndexError, match=r"\[index_fill\]"):
        x.index_fill(2, kiln.tensor([0]), 1.0)
    src = kiln.zeros(2, 4)
    with pytest.raises(IndexError, match=r"\[index_copy\].*long.*int32"):
        x.index_copy(0, kiln.tensor([0, 1], dtype=kiln.int32), src)
    with pytest.raises(IndexError, match=r"\[index_copy\].*dimension 1 or 0"):
        x.index_copy(0, kiln.tensor([[0, 1]]), src)
    with pytest.raises(RuntimeError, match=r"\[index_copy\].*same dtype"):
        x.index_copy(0, kiln.tensor([0, 1]), src.double())
    with pytest.raises(IndexError, match=r"\[index_copy\].*slice shapes.*\[2, 3\]"):
        x.index_copy(0, kiln.tensor([0, 1]), kiln.zeros(2, 3))
    with pytest.raises(IndexError, match=r"\[index_copy\].*number of indices \(3\)"):
        x.index_copy(0, kiln.tensor([0, 1, 2]), src)
    with pytest.raises(IndexError, match=r"\[index_copy_\].*index -1"):
        x.index_copy_(0, kiln.tensor([0, -1]), src)
    with pytest.raises(IndexError, match=r"\[index_copy\].*index 3"):
        x.index_copy(0, kiln.tensor([0, 3]), src)


# ---- PyTorch comparison (the GPU machine: CPU and CUDA) ----

SEARCH_CASES = [
    ("searchsorted_1d", lambda lib, s, x: lib.searchsorted(s, x), [0, (3, 4)]),
    ("searchsorted_right", lambda lib, s, x: lib.searchsorted(s, x, right=True), [0, (5,)]),
    ("searchsorted_side", lambda lib, s, x: lib.searchsorted(s, x, side="right", out_int32=True),
     [0, (2, 3)]),
    ("searchsorted_nd", lambda lib, s, x: lib.searchsorted(s, x), [(2, 3), (2, 3, 5)]),
    ("searchsorted_nd_T", lambda lib, s, x: lib.searchsorted(s, x.mT, side="left"),
     [(3,), (4, 3)]),
    ("searchsorted_scalar", lambda lib, s, x: lib.searchsorted(s, 0.5), [0, ()]),
    ("bucketize", lambda lib, s, x: lib.bucketize(x, s), [0, (3, 4)]),
    ("bucketize_right", lambda lib, s, x: lib.bucketize(x, s, right=True, out_int32=True),
     [0, (7,)]),
    ("bucketize_scalar", lambda lib, s, x: lib.bucketize(-0.5, s), [0, ()]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,shapes", SEARCH_CASES, ids=[c[0] for c in SEARCH_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_search_vs_torch(device, name, fn, shapes, dtype):
    pytest.importorskip("torch")
    from torch_compare import Fixed, check

    lead, xs = shapes
    seq = sorted_rows(*(lead if isinstance(lead, tuple) else ()), 8)
    x = RNG.integers(-6, 7, size=xs) / 2
    if dtype == "int64":
        seq, x = (seq * 2).astype(np.int64), (x * 2).astype(np.int64)
    else:
        seq, x = seq.astype(dtype), x.astype(dtype)
    check(fn, [Fixed(seq), Fixed(x)], device)


COUNT_CASES = [
    ("bincount", lambda lib, x, w: lib.bincount(x), None),
    ("bincount_minlength", lambda lib, x, w: x.bincount(minlength=12), None),
    ("bincount_w32", lambda lib, x, w: lib.bincount(x, w.float()), None),
    ("bincount_w64", lambda lib, x, w: lib.bincount(x, weights=w, minlength=2), None),
    ("bincount_wint", lambda lib, x, w: lib.bincount(x, w.long()), None),
    ("bincount_strided", lambda lib, x, w: lib.bincount(x[::2]), None),
    ("bincount_empty_w", lambda lib, x, w: lib.bincount(x[:0], w[:0], minlength=3), None),
    ("histc", lambda lib, x, w: lib.histc(w, bins=5, min=-2, max=2), None),
    ("histc_default", lambda lib, x, w: w.float().histc(), None),
    ("histc_range", lambda lib, x, w: lib.histc(w, 4, min=-1, max=0.5), None),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,_", COUNT_CASES, ids=[c[0] for c in COUNT_CASES])
def test_count_vs_torch(device, name, fn, _):
    pytest.importorskip("torch")
    from torch_compare import Fixed, check

    x = RNG.integers(0, 9, size=16)
    w = (RNG.integers(-120, 120, size=16) + 0.5) / 64
    check(fn, [Fixed(x), Fixed(w)], device)


INDEX_CASES = [
    ("index_fill", lambda lib, x, i: lib.index_fill(x, 1, i, -2.5), [(3, 4), [0, 2, -1]]),
    ("index_fill_method", lambda lib, x, i: x.index_fill(0, i, 1), [(3, 2), [2, 2]]),
    ("index_fill_0d", lambda lib, x, i: x.index_fill(0, i, 3.0), [(), [0]]),
    ("index_fill_inplace", lambda lib, x, i: (x * 1).index_fill_(-1, i, 0.5), [(2, 5), [4, 1]]),
    ("index_copy", lambda lib, x, i: lib.index_copy(x, 0, i, x[:2] * 3), [(4, 3), [3, 0]]),
    ("index_copy_dim1", lambda lib, x, i: x.index_copy(1, i, x[:, :2].exp()), [(2, 4), [1, 3]]),
    ("index_copy_inplace", lambda lib, x, i: (x + 1).index_copy_(0, i, x[1:] * 2),
     [(3, 2), [0, 2]]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,specs", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_index_fill_copy_vs_torch(device, name, fn, specs, dtype):
    pytest.importorskip("torch")
    from torch_compare import Fixed, Strided, check

    shape, idx = specs
    x = rand(*shape)
    check(fn, [Strided(x) if len(shape) > 1 else x, Fixed(np.array(idx, dtype=np.int64))],
          device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_index_fill_tensor_value_grad_vs_torch(device):
    pytest.importorskip("torch")
    from torch_compare import Fixed, check

    check(lambda lib, x, v, i: x.index_fill(1, i, v), [rand(2, 4), rand(), Fixed([3, 0, 3])],
          device)


BAD_CASES = [
    ("searchsorted_dims", lambda lib, s, i, x: lib.searchsorted(s.reshape(2, 3), x.reshape(3, 2))),
    ("searchsorted_side", lambda lib, s, i, x: lib.searchsorted(s, x, side="up")),
    ("searchsorted_opposite", lambda lib, s, i, x: lib.searchsorted(s, x, side="left", right=True)),
    ("searchsorted_sorter", lambda lib, s, i, x: lib.searchsorted(s, x, sorter=i[:6].int())),
    ("bucketize_2d", lambda lib, s, i, x: lib.bucketize(x, s.reshape(2, 3))),
    ("bincount_negative", lambda lib, s, i, x: lib.bincount(i - 5)),
    ("bincount_2d", lambda lib, s, i, x: lib.bincount(i.reshape(2, 3))),
    ("bincount_float", lambda lib, s, i, x: lib.bincount(x)),
    ("bincount_weights", lambda lib, s, i, x: lib.bincount(i, x[:2])),
    ("histc_bins", lambda lib, s, i, x: lib.histc(x, bins=0)),
    ("histc_range", lambda lib, s, i, x: lib.histc(x, min=3, max=1)),
    ("index_fill_int32", lambda lib, s, i, x: x.index_fill(0, i.int(), 1.0)),
    ("index_fill_2d", lambda lib, s, i, x: x.index_fill(0, i.reshape(2, 3), 1.0)),
    ("index_fill_value", lambda lib, s, i, x: x.index_fill(0, i, x[:2])),
    ("index_copy_count", lambda lib, s, i, x: x.index_copy(0, i[:2], x)),
    ("index_copy_dtype", lambda lib, s, i, x: x.index_copy(0, i, x.float())),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_inputs_vs_torch(device, name, fn):
    pytest.importorskip("torch")
    from torch_compare import Fixed, check_raises

    seq = np.sort(rand(6))
    check_raises(fn, [Fixed(seq), Fixed(np.arange(6)), Fixed(rand(6))], device)


# Out-of-range indices are a device-side assert in PyTorch's CUDA kernels (which would
# poison the process's CUDA context), so they are compared on the CPU only.
RANGE_CASES = [
    ("index_fill_range", lambda lib, i, x: x.index_fill(0, i + 6, 1.0)),
    ("index_fill_negative_range", lambda lib, i, x: x.index_fill(0, i - 7, 1.0)),
    ("index_copy_range", lambda lib, i, x: x.index_copy(0, i + 6, x)),
    ("index_copy_negative", lambda lib, i, x: x.index_copy(0, i - 1, x)),
]


@pytest.mark.parametrize("name,fn", RANGE_CASES, ids=[c[0] for c in RANGE_CASES])
def test_index_range_errors_vs_torch(name, fn):
    pytest.importorskip("torch")
    from torch_compare import Fixed, check_raises

    check_raises(fn, [Fixed(np.arange(6)), Fixed(rand(6))], "cpu")
