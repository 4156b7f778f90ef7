"""LU factorization in kiln ops (kiln/_lu.py, Note [LU in kiln ops]) and the exact
Poisson / binomial samplers (kiln/_discrete_sampling.py, Note [Discrete samplers])."""

import math
import warnings

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (3, 5), (5, 3)])
def test_lu_reconstructs_with_lapack_pivots(shape):
    a = rand(*shape)
    LU, pivots = kiln.linalg.lu_factor(kiln.tensor(a))
    assert pivots.dtype == kiln.int32 and tuple(pivots.shape) == shape[:-2] + (min(shape[-2:]),)
    P, L, U = kiln.lu_unpack(LU, pivots)
    assert_close(P @ L @ U, a, atol=1e-12)
    assert_close(L, np.tril(L.numpy()))
    assert np.allclose(np.diagonal(L.numpy(), axis1=-2, axis2=-1), 1)
    assert (np.abs(np.tril(L.numpy(), -1)) <= 1 + 1e-12).all()  # partial pivoting bound


def test_lu_solve_and_gradients():
    a, b = rand(2, 4, 4) + 4 * np.eye(4), rand(2, 4, 3)
    LU, pivots = kiln.linalg.lu_factor(kiln.tensor(a))
    assert_close(kiln.lu_solve(kiln.tensor(b), LU, pivots), np.linalg.solve(a, b), atol=1e-10)
    assert_close(kiln.linalg.lu_solve(LU, pivots, kiln.tensor(b)), np.linalg.solve(a, b),
                 atol=1e-10)
    gradcheck(lambda m: kiln.linalg.lu_factor(m).LU, rand(3, 3))
    gradcheck(lambda m, r: kiln.lu_solve(r, *kiln.linalg.lu_factor(m)),
              rand(3, 3) + 3 * np.eye(3), rand(3, 2))


def test_lu_info_and_errors():
    singular = kiln.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=kiln.float64)
    _, _, info = kiln.linalg.lu_factor_ex(singular)
    assert int(info) == 2
    with pytest.warns(UserWarning, match="deprecated"):
        LU, pivots, infos = singular.lu(get_infos=True)
    assert int(infos) == 2
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        kiln.linalg.lu_factor(kiln.ones(3))


def test_lu_against_torch():
    torch = pytest.importorskip("torch")
    a = rand(3, 5, 5)
    LU, piv = kiln.linalg.lu_factor(kiln.tensor(a))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    np.testing.assert_allclose(LU.numpy(), tLU.numpy(), atol=1e-12)
    assert piv.tolist() == tpiv.tolist()
    P, L, U = kiln.lu_unpack(LU, piv)
    tP, _, _ = torch.lu_unpack(tLU, tpiv)
    np.testing.assert_array_equal(P.numpy(), tP.numpy())


def _check_pmf(samples, pmf, support):
    """Observed frequencies within 5 standard errors of the pmf on the support."""
    values = samples.numpy()
    n = values.size
    for k in support:
        p = pmf(k)
        observed = float((values == k).mean())
        assert abs(observed - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-4, (k, observed, p)


@pytest.mark.parametrize("rate", [0.7, 4.0, 25.0])
def test_poisson_matches_pmf(rate):
    kiln.manual_seed(3)
    s = kiln.poisson(kiln.full((60000,), rate, dtype=kiln.float64))
    assert s.dtype == kiln.float64 and float(s.min()) >= 0
    assert np.array_equal(s.numpy(), np.floor(s.numpy()))
    _check_pmf(s, lambda k: math.exp(k * math.log(rate) - rate - math.lgamma(k + 1)),
               range(int(rate) - 2 if rate > 2 else 0, int(rate) + 3))


@pytest.mark.parametrize("n, p", [(12, 0.3), (200, 0.4), (60, 0.95)])
def test_binomial_matches_pmf(n, p):
    kiln.manual_seed(4)
    s = kiln.binomial(kiln.full((60000,), float(n)), kiln.full((60000,), p))
    assert s.dtype == kiln.float32 and float(s.max()) <= n
    mean = n * p
    _check_pmf(s, lambda k: math.comb(n, k) * p ** k * (1 - p) ** (n - k),
               range(int(mean) - 2, min(int(mean) + 3, n + 1)))


def test_sampling_edges_seeding_and_errors():
    assert kiln.poisson(kiln.zeros(5)).tolist() == [0.0] * 5
    assert kiln.binomial(kiln.full((3,), 7.0), kiln.ones(3)).tolist() == [7.0] * 3
    kiln.manual_seed(0)
    first = kiln.poisson(kiln.full((100,), 30.0))
    kiln.manual_seed(0)
    assert kiln.equal(first, kiln.poisson(kiln.full((100,), 30.0)))
    with pytest.raises(RuntimeError, match="non-negative"):
        kiln.poisson(kiln.tensor([-1.0]))
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        kiln.binomial(kiln.tensor([3.0]), kiln.tensor([1.5]))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_geqrf_matches_lapack_raw_qr(shape):
    a = rand(*shape)
    h, tau = np.linalg.qr(a, mode="raw")  # LAPACK's dgeqrf output, h transposed
    got_a, got_tau = kiln.geqrf(kiln.tensor(a))
    assert_close(got_a, h.T, atol=1e-12)
    assert_close(got_tau, tau, atol=1e-12)


def test_orgqr_ormqr_rebuild_q_and_differentiate():
    a = rand(2, 5, 3)
    h, tau = kiln.geqrf(kiln.tensor(a))
    q = kiln.linalg.householder_product(h, tau)
    r = h.triu()[..., :3, :]
    assert_close(q @ r, a, atol=1e-12)
    assert_close(q.transpose(-2, -1) @ q, np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-12)
    other = rand(2, 5, 2)
    full_q = h.ormqr(tau, kiln.tensor(np.broadcast_to(np.eye(5), (2, 5, 5)).copy()))
    assert_close(h.ormqr(tau, kiln.tensor(other), True, True),
                 np.swapaxes(full_q.numpy(), -1, -2) @ other, atol=1e-12)
    assert_close(kiln.ormqr(h, tau, kiln.tensor(other.swapaxes(-1, -2)), False),
                 other.swapaxes(-1, -2) @ full_q.numpy(), atol=1e-12)
    gradcheck(lambda m: kiln.linalg.householder_product(*kiln.geqrf(m)), rand(4, 3))
    with pytest.raises(RuntimeError, match="greater than or equal"):
        kiln.orgqr(kiln.ones(2, 3), kiln.ones(2))


def test_householder_against_torch():
    torch = pytest.importorskip("torch")
    a = rand(3, 4, 4)
    h, tau = kiln.geqrf(kiln.tensor(a))
    th, ttau = torch.geqrf(torch.tensor(a))
    np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-12)
    np.testing.assert_allclose(kiln.orgqr(h, tau).numpy(), torch.orgqr(th, ttau).numpy(),
                               atol=1e-12)
