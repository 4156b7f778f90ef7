"""Ops added for PyTorch API coverage (issue 17): windows, integer ops, scans, mode and
unique_consecutive, linalg composites, frexp/mvlgamma, real-dtype conj API, view copies
and scatters. NumPy references on the CPU; PyTorch where installed."""

import math

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand


def test_windows_match_numpy_symmetric_definitions():
    assert_close(kiln.hann_window(6, periodic=False, dtype=kiln.float64), np.hanning(6))
    assert_close(kiln.hamming_window(6, periodic=False, dtype=kiln.float64), np.hamming(6))
    assert_close(kiln.blackman_window(6, periodic=False, dtype=kiln.float64), np.blackman(6),
                 atol=1e-12)
    assert_close(kiln.bartlett_window(6, periodic=False, dtype=kiln.float64), np.bartlett(6))
    assert_close(kiln.kaiser_window(6, periodic=False, beta=5.0, dtype=kiln.float64),
                 np.kaiser(6, 5.0), atol=1e-10)
    assert_close(kiln.hann_window(5, dtype=kiln.float64), np.hanning(6)[:5])
    assert tuple(kiln.hann_window(0).shape) == (0,)
    assert_close(kiln.hann_window(1), [1.0])


def test_window_errors():
    with pytest.raises(RuntimeError, match="non-negative window_length"):
        kiln.hann_window(-1)
    with pytest.raises(RuntimeError, match="floating point"):
        kiln.blackman_window(5, dtype=kiln.int64)


def test_gcd_lcm_match_numpy():
    a, b = np.array([0, -4, 6, 0, 12, 7]), np.array([0, 6, -9, 5, 18, 0])
    assert_close(kiln.gcd(kiln.tensor(a), kiln.tensor(b)), np.gcd(a, b))
    assert_close(kiln.lcm(kiln.tensor(a), kiln.tensor(b)), np.lcm(a, b))
    assert_close(kiln.tensor(a).gcd(kiln.tensor([[3], [2]])), np.gcd(a, [[3], [2]]))
    with pytest.raises(NotImplementedError, match=r"\[gcd\]"):
        kiln.gcd(kiln.tensor([1.0]), kiln.tensor([2.0]))


def test_shifts_match_numpy_and_saturate_like_torch():
    a = np.array([1, -2, 5, -16, 100], dtype=np.int64)
    s = np.array([3, 1, 0, 2, 5], dtype=np.int64)
    assert_close(kiln.bitwise_left_shift(kiln.tensor(a), kiln.tensor(s)), np.left_shift(a, s))
    assert_close(kiln.tensor(a) >> kiln.tensor(s), np.right_shift(a, s))
    assert_close(kiln.bitwise_right_shift(kiln.tensor([-16, 16, 5]), kiln.tensor([70, 64, -1])),
                 [-1, 0, 0])
    i8 = kiln.tensor([1, -2], dtype=kiln.int8)
    assert_close(kiln.bitwise_left_shift(i8, kiln.tensor([3, 9], dtype=kiln.int8)), [8, 0])
    assert_close(kiln.bitwise_left_shift(kiln.tensor([1], dtype=kiln.int8), 7), [-128])
    with pytest.raises(NotImplementedError):
        kiln.bitwise_left_shift(kiln.tensor([1.0]), 1)


def test_cummax_cummin_values_indices_and_nan():
    x = kiln.tensor([1.0, 3, 2, 3, float("nan"), 1])
    v, i = kiln.cummax(x, 0)
    assert_close(v, [1, 3, 3, 3, np.nan, np.nan])
    assert i.tolist() == [0, 1, 1, 3, 4, 4]
    v, i = kiln.tensor([3, 1, 2, 1]).cummin(0)
    assert v.tolist() == [3, 1, 1, 1] and i.tolist() == [0, 1, 1, 3]
    a = rand(4, 9)
    assert_close(kiln.cummax(noncontig(a), 1).values, np.maximum.accumulate(a, 1))
    gradcheck(lambda t: kiln.cummax(t, 1).values, rand(3, 7))


def test_logcumsumexp_is_stable_and_differentiable():
    a = rand(3, 10)
    assert_close(kiln.logcumsumexp(kiln.tensor(a), 1), np.logaddexp.accumulate(a, 1))
    big = kiln.tensor([1000.0, 1000.0, -1000.0], dtype=kiln.float64)
    assert_close(kiln.logcumsumexp(big, 0), np.logaddexp.accumulate([1000.0, 1000, -1000]))
    gradcheck(lambda t: kiln.logcumsumexp(t, 0), rand(6))


def test_mode_ties_and_indices_match_torch_convention():
    x = kiln.tensor([[1, 2, 2, 3, 3, 1], [5, 5, 4, 4, 0, 0]])
    v, i = kiln.mode(x)
    assert v.tolist() == [1, 0] and i.tolist() == [5, 5]
    v, i = x.mode(0, keepdim=True)
    assert tuple(v.shape) == (1, 6)
    with pytest.raises(IndexError):
        kiln.mode(kiln.zeros(2, 0))


def test_msort_unique_consecutive_unravel_nonzero_static():
    assert kiln.msort(kiln.tensor([[3, 1], [1, 2]])).tolist() == [[1, 1], [3, 2]]
    out, inv, counts = kiln.unique_consecutive(kiln.tensor([1, 1, 2, 2, 3, 1, 1, 2]),
                                               return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 2, 3, 1, 2] and counts.tolist() == [2, 2, 1, 2, 1]
    assert inv.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    out, counts = kiln.tensor([[1, 1], [1, 1], [2, 3]]).unique_consecutive(
        dim=0, return_counts=True)
    assert out.tolist() == [[1, 1], [2, 3]] and counts.tolist() == [2, 1]
    rows, cols = kiln.unravel_index(kiln.tensor([4, 1, 5]), (2, 3))
    assert (rows.tolist(), cols.tolist()) == ([1, 0, 1], [1, 1, 2])
    with pytest.raises(TypeError):
        kiln.unravel_index(kiln.tensor([1.0]), (2,))
    with pytest.raises(RuntimeError):
        kiln.unravel_index(kiln.tensor([6]), (2, 3))
    assert kiln.nonzero_static(kiln.tensor([0, 1, 0, 2]), size=3).tolist() == [[1], [3], [-1]]


def test_tensordot_vdot_chain_matmul_match_numpy():
    a, b = rand(2, 3, 4), rand(3, 4, 5)
    assert_close(kiln.tensordot(kiln.tensor(a), kiln.tensor(b)), np.tensordot(a, b))
    assert_close(kiln.tensordot(kiln.tensor(a), kiln.tensor(b), dims=([1], [0])),
                 np.tensordot(a, b, axes=([1], [0])))
    gradcheck(lambda x, y: kiln.tensordot(x, y, 1), rand(2, 3), rand(3, 2))
    assert_close(kiln.vdot(kiln.tensor([1.0, 2]), kiln.tensor([3.0, 4])), 11.0)
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        kiln.vdot(kiln.ones(1, 2), kiln.ones(2))
    m = [rand(2, 3), rand(3, 4), rand(4, 2)]
    with pytest.warns(UserWarning, match="deprecated"):
        got = kiln.chain_matmul(*[kiln.tensor(x) for x in m])
    assert_close(got, m[0] @ m[1] @ m[2])


def test_renorm_matches_reference_and_errors():
    a = np.array([[1.0, 2], [3, 4]])
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    expected = np.where(norms > 3, a * 3 / (norms + 1e-7), a)
    assert_close(kiln.renorm(kiln.tensor(a), 2, 0, 3), expected)
    with pytest.raises(RuntimeError, match="non-positive-norm"):
        kiln.renorm(kiln.tensor(a), -1, 0, 3)
    gradcheck(lambda t: kiln.renorm(t, 2, 1, 0.5), rand(3, 4))


def test_matrix_exp_against_eigendecomposition_and_gradcheck():
    a = rand(4, 4)
    s = a + a.T  # symmetric: exp via eigh
    w, v = np.linalg.eigh(s)
    assert_close(kiln.matrix_exp(kiln.tensor(s)), v @ np.diag(np.exp(w)) @ v.T, atol=1e-9,
                 rtol=1e-9)
    assert_close(kiln.tensor(np.zeros((2, 3, 3))).matrix_exp(), np.broadcast_to(np.eye(3),
                                                                                   (2, 3, 3)))
    gradcheck(kiln.matrix_exp, rand(3, 3) / 2)
    with pytest.raises(RuntimeError, match="square"):
        kiln.matrix_exp(kiln.ones(2, 3))


def test_frexp_matches_numpy():
    a = np.array([0.0, 1.0, -3.5, 1e-40, 1e-310, np.inf, np.nan, 1024.0])
    m, e = kiln.frexp(kiln.tensor(a))
    nm, ne = np.frexp(a)
    assert_close(m, nm)
    assert e.dtype == kiln.int32 and e.tolist() == ne.tolist()
    m32, _ = kiln.tensor(a.astype(np.float32)).frexp()
    assert m32.dtype == kiln.float32
    with pytest.raises(RuntimeError, match="floating-point"):
        kiln.frexp(kiln.tensor([1, 2]))


def test_mvlgamma_matches_definition_and_gradcheck():
    from math import lgamma, log, pi
    x = np.array([2.5, 4.0])
    expected = [3 * log(pi) / 2 + sum(lgamma(v - j / 2) for j in range(3)) for v in x]
    assert_close(kiln.mvlgamma(kiln.tensor(x), 3), expected)
    gradcheck(lambda t: kiln.mvlgamma(t, 2), x)


def test_real_tensor_complex_api():
    x = kiln.arange(4.0)
    assert x.real is x and kiln.conj(x) is x and x.resolve_conj() is x and x.resolve_neg() is x
    assert kiln.conj_physical(x) is x
    with pytest.raises(TypeError, match="non-complex"):
        x.imag
    signs = kiln.tensor([-1.0, 0.0, float("nan"), 2.0, -math.inf], dtype=kiln.float64)
    assert_close(kiln.angle(signs),
                 [math.pi, 0, np.nan, 0, math.pi])
    assert kiln.angle(kiln.tensor([-1, 2])).dtype == kiln.float32
    m = kiln.tensor(rand(2, 3, 4))
    assert tuple(m.mH.shape) == (2, 4, 3) and tuple(m.adjoint().shape) == (2, 4, 3)
    assert tuple(m[0].H.shape) == (4, 3)
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        m.H
    with pytest.raises(RuntimeError, match="mH"):
        kiln.ones(3).mH


def test_view_copies_are_contiguous_copies():
    a = rand(3, 4)
    x = kiln.tensor(a)
    t = kiln.t_copy(x)
    assert t.is_contiguous() and t.data_ptr() != x.data_ptr()
    assert_close(t, a.T)
    parts = kiln.split_copy(x, 2, 1)
    assert len(parts) == 2 and all(p.is_contiguous() for p in parts)
    assert_close(kiln.slice_copy(x, 1, 1, 3), a[:, 1:3])
    assert_close(kiln.narrow_copy(x, 0, 1, 2), a[1:3])


def test_scatters_match_numpy_and_differentiate():
    z = np.zeros((3, 3))
    expected = z.copy()
    expected[1] = 1
    assert_close(kiln.select_scatter(kiln.tensor(z), kiln.ones(3, dtype=kiln.float64), 0, 1),
                 expected)
    expected = z.copy()
    np.fill_diagonal(expected[:, 1:], 1)
    assert_close(kiln.diagonal_scatter(kiln.tensor(z), kiln.ones(2, dtype=kiln.float64), 1),
                 expected)
    expected = np.zeros((4, 2))
    expected[0::2] = 1
    assert_close(kiln.slice_scatter(kiln.zeros(4, 2, dtype=kiln.float64),
                                    kiln.ones(2, 2, dtype=kiln.float64), 0, 0, None, 2), expected)
    assert_close(kiln.as_strided_scatter(kiln.zeros(4, dtype=kiln.float64),
                                         kiln.ones(2, dtype=kiln.float64), (2,), (2,)),
                 [1, 0, 1, 0])
    with pytest.raises(RuntimeError, match="slice size"):
        kiln.select_scatter(kiln.zeros(2, 2), kiln.ones(3), 0, 0)
    gradcheck(lambda x, s: kiln.select_scatter(x, s, 1, 0), rand(3, 2), rand(3))


def test_sum_to_size_fill_diagonal_new_empty_strided():
    x = kiln.ones(2, 3)
    assert_close(x.sum_to_size(1, 3), [[2.0, 2, 2]])
    assert_close(x.sum_to_size((3,)), [2.0, 2, 2])
    with pytest.raises(RuntimeError, match="expandable"):
        x.sum_to_size(2, 2)
    expected = np.zeros((7, 3))
    for r in (0, 1, 2, 4, 5, 6):
        expected[r, r % 4 if r < 3 else r - 4] = 5
    assert_close(kiln.zeros(7, 3).fill_diagonal_(5, wrap=True), expected)
    assert_close(kiln.zeros(7, 3).fill_diagonal_(5), np.eye(7, 3) * 5)
    with pytest.raises(RuntimeError, match="equal length"):
        kiln.zeros(2, 3, 4).fill_diagonal_(1)
    assert kiln.zeros(2, 3).new_empty_strided((2, 2), (1, 2)).stride() == (1, 2)


def test_against_torch():
    torch = pytest.importorskip("torch")
    a = rand(4, 6)
    for name in ("cummax", "cummin"):
        kv, ki = getattr(kiln, name)(kiln.tensor(a), 1)
        tv, ti = getattr(torch, name)(torch.tensor(a), 1)
        np.testing.assert_allclose(kv.numpy(), tv.numpy())
        assert ki.tolist() == ti.tolist()
    np.testing.assert_allclose(kiln.logcumsumexp(kiln.tensor(a), 0).numpy(),
                               torch.logcumsumexp(torch.tensor(a), 0).numpy(), rtol=1e-12)
    for w in ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
              "kaiser_window"):
        np.testing.assert_allclose(getattr(kiln, w)(7).numpy(), getattr(torch, w)(7).numpy(),
                                   atol=1e-6)
    ints = np.array([[3, 3, 1, 1, 2], [0, 4, 4, 0, 9]])
    kv, ki = kiln.mode(kiln.tensor(ints), 1)
    tv, ti = torch.mode(torch.tensor(ints), 1)
    assert kv.tolist() == tv.tolist() and ki.tolist() == ti.tolist()
    s = np.array([[0.5, 0.2], [0.1, 0.3]])
    np.testing.assert_allclose(kiln.matrix_exp(kiln.tensor(s)).numpy(),
                               torch.matrix_exp(torch.tensor(s)).numpy(), rtol=1e-12)
    x = np.array([-40, 17, 3, -1])
    sh = np.array([1, 3, 63, 62])
    assert (kiln.bitwise_right_shift(kiln.tensor(x), kiln.tensor(sh)).tolist()
            == torch.bitwise_right_shift(torch.tensor(x), torch.tensor(sh)).tolist())
    assert (kiln.bitwise_left_shift(kiln.tensor(x), kiln.tensor(sh)).tolist()
            == torch.bitwise_left_shift(torch.tensor(x), torch.tensor(sh)).tolist())


def test_igamma_igammac_values_edges_and_gradient():
    from math import exp, factorial
    a = kiln.tensor([2.0, 3.0, 0.0, -1.0, 2.0, 3.0], dtype=kiln.float64)
    x = kiln.tensor([1.0, 10.0, 1.0, 1.0, math.inf, 0.0], dtype=kiln.float64)
    # P(n, x) = 1 - e^-x sum_{k<n} x^k / k! for integer n.
    p2 = 1 - exp(-1) * (1 + 1)
    p3 = 1 - exp(-10) * (1 + 10 + 100 / 2)
    assert_close(kiln.igamma(a, x), [p2, p3, 1.0, np.nan, 1.0, 0.0])
    assert_close(a.igammac(x), [1 - p2, exp(-10) * 61, 0.0, np.nan, 0.0, 1.0], rtol=1e-9)
    assert_close(kiln.special.gammaincc(a[:2], x[:2]), [1 - p2, exp(-10) * 61], rtol=1e-9)
    with pytest.raises(NotImplementedError, match=r"\[igamma\]"):
        kiln.igamma(kiln.tensor([1, 2]), kiln.tensor([1, 2]))
    a0 = kiln.tensor([0.5, 2.0, 7.0], dtype=kiln.float64)
    gradcheck(lambda t: kiln.igamma(a0, t), [0.3, 1.5, 9.0])
    gradcheck(lambda t: kiln.igammac(a0, t), [0.3, 1.5, 9.0])
    with pytest.raises(NotImplementedError, match="derivative for 'igamma: input'"):
        kiln.igamma(kiln.tensor([2.0], requires_grad=True), kiln.tensor([1.0])).sum().backward()
    y = kiln.tensor([2.0, 3.0], dtype=kiln.float64)
    y.igamma_(kiln.tensor([1.0, 10.0], dtype=kiln.float64))
    assert_close(y, [p2, p3])


def test_igamma_against_torch():
    torch = pytest.importorskip("torch")
    a = np.array([0.5, 2.0, 3.0, 50.0, 50.0, 1e-3, 200.0])
    x = np.array([1.0, 0.5, 10.0, 45.0, 60.0, 2.0, 230.0])
    for name in ("igamma", "igammac"):
        np.testing.assert_allclose(getattr(kiln, name)(kiln.tensor(a), kiln.tensor(x)).numpy(),
                                   getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy(),
                                   rtol=1e-8)


def test_stft_real_format_matches_numpy_fft():
    x = rand(2, 40)
    window = np.hanning(8)
    got = kiln.stft(kiln.tensor(x), 8, hop_length=4, window=kiln.tensor(window), center=False,
                    return_complex=False)
    frames = np.stack([x[:, i:i + 8] for i in range(0, 33, 4)], 1) * window
    expected = np.fft.rfft(frames, axis=-1).transpose(0, 2, 1)
    assert_close(got, np.stack([expected.real, expected.imag], -1), atol=1e-12)
    centered = kiln.stft(kiln.tensor(x[0]), 8, window=kiln.ones(8, dtype=kiln.float64),
                         return_complex=False)
    padded = np.pad(x[0], 4, mode="reflect")
    first = np.fft.rfft(padded[:8])
    assert_close(centered[:, 0], np.stack([first.real, first.imag], -1), atol=1e-12)
    gradcheck(lambda t: kiln.stft(t, 4, window=kiln.ones(4, dtype=kiln.float64),
                                  return_complex=False), rand(12))
    with pytest.raises(RuntimeError, match="return_complex"):
        kiln.stft(kiln.tensor(x), 8)
    with pytest.raises(NotImplementedError, match="complex"):
        kiln.stft(kiln.tensor(x), 8, return_complex=True)


def test_stft_against_torch():
    torch = pytest.importorskip("torch")
    x = rand(37)
    window = kiln.hann_window(12, dtype=kiln.float64)
    got = kiln.stft(kiln.tensor(x), 16, hop_length=5, window=window, win_length=12,
                    normalized=True, return_complex=False)
    ref = torch.stft(torch.tensor(x), 16, hop_length=5,
                     window=torch.hann_window(12, dtype=torch.float64), win_length=12,
                     normalized=True, return_complex=False)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-12)
