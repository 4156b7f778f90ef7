"""Ops built from other kiln ops (addcmul/addcdiv, lerp_, diag/diagonal/trace,
repeat_interleave, isclose/allclose/equal, N-d inner, movedim with tuples) against NumPy,
with float64 gradchecks and PyTorch's error types."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand


# --- addcmul / addcdiv / lerp_ ----------------------------------------------------------

def test_addcmul_addcdiv_broadcast_and_value():
    a, t1, t2 = rand(3, 4), rand(4), rand(3, 1, low=0.5, high=2)
    x, y, z = kiln.tensor(a), kiln.tensor(t1), noncontig(t2)
    assert_close(kiln.addcmul(x, y, z), a + t1 * t2)
    assert_close(kiln.addcmul(x, y, z, value=-0.5), a - 0.5 * t1 * t2)
    assert_close(x.addcdiv(y, z, value=2), a + 2 * t1 / t2)
    assert_close(kiln.addcdiv(x, y, z), a + t1 / t2)


def test_addcmul_addcdiv_inplace():
    a, t1, t2 = rand(3, 4), rand(4), rand(3, 4, low=0.5, high=2)
    x = kiln.tensor(a)
    x.addcmul_(kiln.tensor(t1), kiln.tensor(t2), value=3)
    assert_close(x, a + 3 * t1 * t2)
    x.addcdiv_(kiln.tensor(t1), kiln.tensor(t2))
    assert_close(x, a + 3 * t1 * t2 + t1 / t2)
    assert x._version == 2
    with pytest.raises(RuntimeError, match=r"\[addcmul_\]"):
        kiln.tensor(rand(4)).addcmul_(kiln.tensor(rand(3, 4)), kiln.tensor(rand(4)))


def test_addc_gradcheck_and_inplace_gradient():
    gradcheck(lambda a, b, c: kiln.addcmul(a, b, c, value=0.7), rand(2, 3), rand(3), rand(2, 1))
    gradcheck(lambda a, b, c: kiln.addcdiv(a, b, c, value=-1.5), rand(2, 3), rand(3),
              rand(2, 1, low=0.5, high=2))
    gradcheck(lambda a, b, c: (a * 1).addcdiv_(b, c), rand(2, 3), rand(3), rand(2, 3, low=0.5))
    gradcheck(lambda a, b, c: (a * 1).addcmul_(b, c, value=2) * a, rand(2, 3), rand(3), rand(3))


def test_addcdiv_rejects_integer_division():
    i = kiln.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"\[addcdiv\]"):
        kiln.addcdiv(i, i, i)


def test_lerp_inplace():
    a, b, w = rand(3, 4), rand(4), rand(3, 1, low=0, high=1)
    x = kiln.tensor(a)
    x.lerp_(kiln.tensor(b), 0.25)
    assert_close(x, a + 0.25 * (b - a))
    x = kiln.tensor(a)
    x.lerp_(kiln.tensor(b), kiln.tensor(w))
    assert_close(x, a + w * (b - a))
    gradcheck(lambda s, e, wt: (s * 1).lerp_(e, wt), rand(2, 3), rand(3), rand(2, 3))
    with pytest.raises(RuntimeError, match=r"\[lerp_\]"):
        kiln.tensor(rand(4)).lerp_(kiln.tensor(rand(3, 4)), 0.5)


# --- diag / diagonal / trace ------------------------------------------------------------

@pytest.mark.parametrize("k", [0, 1, -1, 2, -3, 5])
def test_diag_both_ways(k):
    v = rand(3)
    assert_close(kiln.diag(kiln.tensor(v), k), np.diag(v, k))
    m = rand(3, 4)
    assert_close(kiln.diag(kiln.tensor(m), k), np.diag(m, k))
    assert_close(noncontig(m).diag(diagonal=k), np.diag(m, k))
    assert kiln.diag(kiln.tensor([1, 2]), k).dtype == kiln.int64


def test_diag_gradcheck_and_errors():
    gradcheck(lambda v: kiln.diag(v, 1) * 2, rand(3))
    gradcheck(lambda m: kiln.diag(m, -1), rand(3, 4))
    with pytest.raises(RuntimeError, match=r"\[diag\]"):
        kiln.diag(kiln.tensor(rand(2, 2, 2)))


@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (0, 2, 0),
                                              (1, -1, 1), (-2, 1, 2), (7, 0, 1)])
def test_diagonal_is_a_view(offset, dim1, dim2):
    a = rand(3, 4, 5)
    x = kiln.tensor(a)
    d = kiln.diagonal(x, offset, dim1, dim2)
    assert_close(d, np.diagonal(a, offset, dim1, dim2))
    assert_close(noncontig(a).diagonal(offset=offset, dim1=dim1, dim2=dim2),
                 np.diagonal(a, offset, dim1, dim2))
    if d.numel():
        d.fill_(7)  # writes through to x
        expected = a.copy()
        np.diagonal(expected, offset, dim1, dim2).setflags(write=True)
        idx = np.arange(d.shape[-1])
        sl = [slice(None)] * 3
        sl[dim1 % 3] = idx + max(-offset, 0)
        sl[dim2 % 3] = idx + max(offset, 0)
        expected[tuple(sl)] = 7
        assert_close(x, expected)


def test_diagonal_gradcheck_and_errors():
    gradcheck(lambda x: kiln.diagonal(x, 1, 2, 0) * 3, rand(3, 2, 4))
    gradcheck(lambda x: x.t().diagonal(-1), rand(3, 4))
    with pytest.raises(RuntimeError, match=r"\[diagonal\]"):
        kiln.diagonal(kiln.tensor(rand(3, 3)), 0, 1, 1)
    with pytest.raises(IndexError):
        kiln.diagonal(kiln.tensor(rand(3)))


def test_trace():
    m = rand(3, 4)
    assert_close(kiln.trace(kiln.tensor(m)), np.trace(m))
    assert_close(noncontig(m).trace(), np.trace(m))
    assert kiln.trace(kiln.tensor([[1, 2], [3, 4]])).item() == 5
    gradcheck(lambda x: kiln.trace(x), rand(3, 3))
    with pytest.raises(RuntimeError, match=r"\[trace\]"):
        kiln.trace(kiln.tensor(rand(3)))


# --- repeat_interleave ------------------------------------------------------------------

def test_repeat_interleave_int():
    a = rand(2, 3)
    assert_close(kiln.repeat_interleave(kiln.tensor(a), 2), np.repeat(a, 2))
    assert_close(kiln.tensor(a).repeat_interleave(3, dim=1), np.repeat(a, 3, axis=1))
    assert_close(noncontig(a).repeat_interleave(2, dim=-2), np.repeat(a, 2, axis=0))
    assert_close(kiln.repeat_interleave(kiln.tensor(a), 0, dim=0), np.repeat(a, 0, axis=0))
    assert_close(kiln.repeat_interleave(kiln.tensor(2.5), 3), np.full(3, 2.5))
    gradcheck(lambda x: x.repeat_interleave(2, dim=1), rand(2, 3))


def test_repeat_interleave_tensor():
    a = rand(3, 2)
    r = np.array([2, 0, 3])
    got = kiln.repeat_interleave(kiln.tensor(a), kiln.tensor(r), dim=0)
    assert_close(got, np.repeat(a, r, axis=0))
    assert_close(kiln.tensor(a).repeat_interleave(kiln.tensor([1, 2]), dim=1),
                 np.repeat(a, [1, 2], axis=1))
    assert_close(kiln.repeat_interleave(kiln.tensor(a), kiln.tensor([2])), np.repeat(a, 2))
    assert_close(kiln.repeat_interleave(kiln.tensor(r)), np.repeat(np.arange(3), r))
    assert_close(kiln.repeat_interleave(kiln.tensor(a), kiln.tensor(r), dim=0, output_size=5),
                 np.repeat(a, r, axis=0))
    gradcheck(lambda x: kiln.repeat_interleave(x, kiln.tensor([1, 3, 0]), dim=0) * 2, rand(3, 2))


def test_repeat_interleave_errors():
    x = kiln.tensor(rand(3, 2))
    with pytest.raises(RuntimeError, match=r"\[repeat_interleave\] repeats can not be negative"):
        x.repeat_interleave(-1)
    with pytest.raises(RuntimeError, match=r"\[repeat_interleave\] repeats can not be negative"):
        x.repeat_interleave(kiln.tensor([1, -1, 2]), dim=0)
    with pytest.raises(RuntimeError, match=r"\[repeat_interleave\] repeats must have the same"):
        x.repeat_interleave(kiln.tensor([1, 2]), dim=0)
    with pytest.raises(RuntimeError, match=r"\[repeat_interleave\] repeats must be an integer"):
        x.repeat_interleave(kiln.tensor([1.0, 2.0, 1.0]), dim=0)
    with pytest.raises(RuntimeError, match=r"\[repeat_interleave\] output_size"):
        x.repeat_interleave(2, dim=0, output_size=5)


# --- isclose / allclose / equal ---------------------------------------------------------

def test_isclose_matches_numpy():
    a = np.array([1.0, 0.0, np.inf, -np.inf, np.nan, 1.0, 100.0, np.inf])
    b = np.array([1.0 + 1e-9, 1e-9, np.inf, np.inf, np.nan, 1.1, 100.0005, 1.0])
    for rtol, atol, equal_nan in [(1e-5, 1e-8, False), (1e-5, 1e-8, True), (0.2, 0, False),
                                  (0, 1e-3, True)]:
        got = kiln.isclose(kiln.tensor(a), kiln.tensor(b), rtol=rtol, atol=atol,
                           equal_nan=equal_nan)
        assert got.dtype == kiln.bool
        np.testing.assert_array_equal(got.numpy(), np.isclose(a, b, rtol, atol, equal_nan))
        assert kiln.tensor(a).allclose(kiln.tensor(b), rtol, atol, equal_nan) == \
            np.allclose(a, b, rtol, atol, equal_nan)
    c = rand(3, 4)
    assert kiln.allclose(kiln.tensor(c), noncontig(c + 1e-9))
    assert not kiln.allclose(kiln.tensor(c), kiln.tensor(c + 1e-3))
    ints = kiln.tensor([1, 5, 10])
    np.testing.assert_array_equal(kiln.isclose(ints, kiln.tensor([1, 6, 11]), atol=1).numpy(),
                                  [True, True, True])
    np.testing.assert_array_equal(kiln.isclose(ints, kiln.tensor([2, 5, 11]), rtol=0.1).numpy(),
                                  [False, True, True])


def test_isclose_errors():
    with pytest.raises(RuntimeError, match=r"\[isclose\]"):
        kiln.isclose(kiln.ones(2), kiln.ones(2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[isclose\] rtol"):
        kiln.isclose(kiln.ones(2), kiln.ones(2), rtol=-1)
    with pytest.raises(RuntimeError, match=r"\[isclose\] atol"):
        kiln.allclose(kiln.ones(2), kiln.ones(2), atol=-1)


def test_equal():
    a = rand(3, 4)
    assert kiln.equal(kiln.tensor(a), noncontig(a))
    assert kiln.tensor(a).equal(kiln.tensor(a))
    b = a.copy()
    b[1, 2] += 1
    assert not kiln.equal(kiln.tensor(a), kiln.tensor(b))
    assert not kiln.equal(kiln.tensor(a), kiln.tensor(a[:2]))
    assert kiln.equal(kiln.tensor([True, False]), kiln.tensor([True, False]))


# --- inner / movedim --------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((2, 4), (3, 4)), ((2, 3, 4), (5, 4)),
                                   ((4,), (2, 3, 4)), ((), (2, 3)), ((2, 0), (3, 0))])
def test_inner_nd(sa, sb):
    a, b = rand(*sa), rand(*sb)
    assert_close(kiln.inner(kiln.tensor(a), kiln.tensor(b)), np.inner(a, b))
    if len(sa) > 1:
        assert_close(noncontig(a).inner(kiln.tensor(b)), np.inner(a, b))


def test_inner_gradcheck_and_errors():
    gradcheck(lambda a, b: kiln.inner(a, b), rand(2, 3), rand(4, 3))
    with pytest.raises(RuntimeError, match=r"\[inner\]"):
        kiln.inner(kiln.tensor(rand(2, 3)), kiln.tensor(rand(3, 2)))


@pytest.mark.parametrize("src,dst", [((0, 1), (2, 0)), ([0], [-1]), ((2, 0), (0, 1)),
                                     ((0, 1, 2), (2, 1, 0)), (1, 2), ((), ())])
def test_movedim_sequences(src, dst):
    a = rand(2, 3, 4)
    assert_close(kiln.movedim(kiln.tensor(a), src, dst), np.moveaxis(a, src, dst))
    assert_close(kiln.tensor(a).moveaxis(src, dst), np.moveaxis(a, src, dst))
    gradcheck(lambda x: kiln.movedim(x, src, dst), a)


def test_movedim_errors():
    x = kiln.tensor(rand(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"\[movedim\]"):
        kiln.movedim(x, (0, 1), (2,))
    with pytest.raises(RuntimeError, match=r"\[movedim\] repeated dim"):
        kiln.movedim(x, (0, 0), (1, 2))
    with pytest.raises(RuntimeError, match=r"\[movedim\] repeated dim"):
        kiln.movedim(x, (0, 1), (2, 2))
    with pytest.raises(IndexError):
        kiln.movedim(x, (0, 3), (1, 2))
