"""kiln.linalg decompositions, solvers and matrix functions against NumPy (and PyTorch on the
GPU machine): batching, non-contiguous inputs, gradients, and the error paths."""

import numpy as np
import pytest

import kiln
from helpers import RNG, assert_close, gradcheck, noncontig, requires_gpu

LA = kiln.linalg
DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def well_conditioned(*shape):
    """Random square matrices (batch shape + (n, n)) far from singular."""
    n = shape[-1]
    return RNG.uniform(-1, 1, size=shape) + 3 * np.eye(n)


def spd(*shape):
    a = RNG.uniform(-1, 1, size=shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def sym(x):
    return x + x.mT


def gradgradcheck(fn, *arrays):
    """Finite-difference check of the gradient of sum(fn(x)) itself (double backward)."""
    def grad_of(*xs):
        out = fn(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        total = sum((o * o).sum() for o in outs)
        return kiln.autograd.grad(total, xs, create_graph=True)
    gradcheck(grad_of, *arrays)


# ---------------------------------------------------------------- forward against NumPy

@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (0, 3, 3)])
def test_inv_det_slogdet(dtype, shape):
    a = well_conditioned(*shape)
    t = kiln.tensor(a, dtype=dtype)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == kiln.float32 else {}
    assert_close(LA.inv(t), np.linalg.inv(a), dtype, **tol)
    assert_close(LA.det(t), np.linalg.det(a), dtype, **tol)
    sign, logabs = LA.slogdet(t)
    ns, nl = np.linalg.slogdet(a)
    assert_close(sign, ns, dtype)
    assert_close(logabs, nl, dtype, **tol)
    assert LA.inv(t).dtype == dtype
    assert_close(kiln.inverse(t), np.linalg.inv(a), dtype, **tol)
    assert_close(t.det(), np.linalg.det(a), dtype, **tol)
    assert_close(kiln.logdet(t), np.log(np.linalg.det(a)), dtype, **tol)


def test_noncontiguous_inputs():
    a = well_conditioned(3, 4, 4)
    t = noncontig(a)
    assert not t.is_contiguous()
    assert_close(LA.inv(t), np.linalg.inv(a))
    assert_close(LA.det(t), np.linalg.det(a))
    b = RNG.uniform(-1, 1, size=(3, 4, 2))
    assert_close(LA.solve(t, noncontig(b)), np.linalg.solve(a, b))
    s = spd(3, 4, 4)
    assert_close(LA.cholesky(noncontig(s)), np.linalg.cholesky(s))
    assert_close(LA.svdvals(noncontig(a[..., :3])), np.linalg.svd(a[..., :3], compute_uv=False))


def test_det_singular_and_logdet_negative():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert LA.det(kiln.tensor(s)).item() == 0
    sign, logabs = LA.slogdet(kiln.tensor(s))
    assert sign.item() == 0 and logabs.item() == -np.inf
    neg = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert np.isnan(kiln.logdet(kiln.tensor(neg)).item())
    assert kiln.slogdet(kiln.tensor(neg)).sign.item() == -1


@pytest.mark.parametrize("bshape", [(4,), (4, 2), (2, 4, 3), (1, 4, 1)])
def test_solve_batching_and_vectors(bshape):
    a = well_conditioned(2, 4, 4)
    b = RNG.uniform(-1, 1, size=bshape)
    x = LA.solve(kiln.tensor(a), kiln.tensor(b))
    if len(bshape) == 1:
        expected = np.linalg.solve(a, b[None, :, None])[..., 0]
    else:
        expected = np.linalg.solve(a, b)
    assert_close(x, expected)


def test_solve_vector_batch_and_left_false():
    a = well_conditioned(3, 4, 4)
    b = RNG.uniform(-1, 1, size=(3, 4))  # A's shape without the last dim: a batch of vectors
    assert_close(LA.solve(kiln.tensor(a), kiln.tensor(b)), np.linalg.solve(a, b[..., None])[..., 0])
    c = RNG.uniform(-1, 1, size=(3, 2, 4))
    x = LA.solve(kiln.tensor(a), kiln.tensor(c), left=False)
    ct = np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(c, -1, -2))
    assert_close(x, np.swapaxes(ct, -1, -2))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    s = spd(2, 4, 4)
    L = np.linalg.cholesky(s)
    assert_close(LA.cholesky(kiln.tensor(s), upper=upper), np.swapaxes(L, -1, -2) if upper else L)
    assert_close(kiln.tensor(s).cholesky(upper=upper), np.swapaxes(L, -1, -2) if upper else L)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    a = RNG.uniform(-1, 1, size=shape)
    q, r = LA.qr(kiln.tensor(a), mode=mode)
    nr = np.linalg.qr(a, mode=mode if mode != "r" else "r")
    if mode == "r":
        assert tuple(q.shape) == (0,)
        assert_close(r, nr)
        return
    assert_close(q, nr[0])
    assert_close(r, nr[1])
    assert_close(q @ r, a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 2, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(shape, full_matrices):
    a = RNG.uniform(-1, 1, size=shape)
    u, s, vh = LA.svd(kiln.tensor(a), full_matrices=full_matrices)
    nu, ns, nvh = np.linalg.svd(a, full_matrices=full_matrices)
    assert tuple(u.shape) == nu.shape and tuple(vh.shape) == nvh.shape
    assert_close(s, ns)
    k = min(shape[-2:])
    recon = (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]
    assert_close(recon, a)
    # Singular vectors are unique up to sign: compare |U| and |Vh| columns.
    assert_close(abs(u[..., :k]), np.abs(nu[..., :k]))
    assert_close(LA.svdvals(kiln.tensor(a)), ns)


def test_torch_svd_alias():
    a = RNG.uniform(-1, 1, size=(4, 3))
    u, s, v = kiln.svd(kiln.tensor(a))
    assert tuple(u.shape) == (4, 3) and tuple(v.shape) == (3, 3)
    assert_close((u * s) @ v.mT, a)
    u0, s0, v0 = kiln.svd(kiln.tensor(a), compute_uv=False)
    assert tuple(u0.shape) == (4, 4) and tuple(v0.shape) == (3, 3) and (u0 == 0).all().item()
    assert_close(s0, np.linalg.svd(a, compute_uv=False))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    a = RNG.uniform(-1, 1, size=(2, 4, 4))  # not symmetric: only one triangle is read
    tri = np.tril(a) if uplo == "L" else np.triu(a)
    diag = np.eye(4) * np.diagonal(a, axis1=-2, axis2=-1)[..., None, :]
    full = tri + np.swapaxes(tri, -1, -2) - diag
    w, v = LA.eigh(kiln.tensor(a), UPLO=uplo)
    nw, nv = np.linalg.eigh(full)
    assert_close(w, nw)
    assert_close(abs(v), np.abs(nv))
    assert_close(LA.eigvalsh(kiln.tensor(a), UPLO=uplo), nw)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    a = well_conditioned(2, 4, 4)
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        t = t - np.eye(4) * np.diagonal(t, axis1=-2, axis2=-1)[..., None, :] + np.eye(4)
    b = RNG.uniform(-1, 1, size=(2, 4, 3) if left else (2, 3, 4))
    x = LA.solve_triangular(kiln.tensor(a), kiln.tensor(b), upper=upper, left=left,
                            unitriangular=unit)
    expected = np.linalg.solve(t, b) if left else np.swapaxes(
        np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    assert_close(x, expected)


@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_tall(driver):
    a = RNG.uniform(-1, 1, size=(2, 6, 3))
    b = RNG.uniform(-1, 1, size=(2, 6, 2))
    res = LA.lstsq(kiln.tensor(a), kiln.tensor(b), driver=driver)
    sol = np.stack([np.linalg.lstsq(a[i], b[i], rcond=None)[0] for i in range(2)])
    assert_close(res.solution, sol)
    if driver in (None, "gelsy"):
        assert tuple(res.residuals.shape) == (0,)
    else:
        resid = np.stack([np.linalg.lstsq(a[i], b[i], rcond=None)[1] for i in range(2)])
        assert_close(res.residuals, resid)
    if driver == "gels":
        assert tuple(res.rank.shape) == (0,)
    else:
        assert res.rank.tolist() == [3, 3]
    if driver in ("gelsd", "gelss"):
        assert_close(res.singular_values, np.linalg.svd(a, compute_uv=False))
    else:
        assert tuple(res.singular_values.shape) == (0,)


def test_lstsq_rank_deficient_and_wide():
    a = RNG.uniform(-1, 1, size=(5, 2)) @ RNG.uniform(-1, 1, size=(2, 4))  # rank 2, 5 x 4
    b = RNG.uniform(-1, 1, size=(5, 3))
    for driver in ("gelsy", "gelsd"):
        res = LA.lstsq(kiln.tensor(a), kiln.tensor(b), driver=driver)
        assert res.rank.item() == 2
        assert_close(res.solution, np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-8, rtol=1e-8)
    w = RNG.uniform(-1, 1, size=(2, 4))
    c = RNG.uniform(-1, 1, size=(2,))
    assert_close(LA.lstsq(kiln.tensor(w), kiln.tensor(c)).solution,
                 np.linalg.lstsq(w, c, rcond=None)[0])


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_and_matrix_rank(hermitian):
    left = RNG.uniform(-1, 1, size=(2, 5, 2))
    right = np.swapaxes(left, -1, -2) if hermitian else RNG.uniform(-1, 1, size=(2, 2, 5))
    a = left @ right  # rank 2
    t = kiln.tensor(a)
    assert_close(LA.pinv(t, hermitian=hermitian), np.linalg.pinv(a, hermitian=hermitian),
                 atol=1e-8, rtol=1e-8)
    assert LA.matrix_rank(t, hermitian=hermitian).tolist() == [2, 2]
    assert LA.matrix_rank(t, atol=1e3, hermitian=hermitian).tolist() == [0, 0]
    assert LA.matrix_rank(kiln.tensor(well_conditioned(3, 3))).item() == 3
    rect = RNG.uniform(-1, 1, size=(3, 5))
    assert_close(LA.pinv(kiln.tensor(rect)), np.linalg.pinv(rect))
    assert_close(kiln.pinverse(kiln.tensor(rect)), np.linalg.pinv(rect))


MATRIX_ORDS = ["fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norm(ord):
    a = RNG.uniform(-1, 1, size=(2, 3, 4))
    t = kiln.tensor(a)
    expected = np.stack([np.linalg.norm(a[i], ord) for i in range(2)])
    assert_close(LA.matrix_norm(t, ord), expected)
    assert_close(LA.norm(t, ord, dim=(-2, -1)), expected)
    assert_close(LA.matrix_norm(t, ord, keepdim=True), expected[:, None, None])
    # Other dims: the norm over (0, 2) of a [3, 2, 4] tensor.
    moved = np.moveaxis(a, 0, 1)
    assert_close(LA.matrix_norm(kiln.tensor(moved), ord, dim=(0, 2)), expected)
    assert_close(LA.matrix_norm(kiln.tensor(moved), ord, dim=(0, 2), keepdim=True),
                 expected[None, :, None])
    assert_close(LA.norm(kiln.tensor(a[0]), ord), np.linalg.norm(a[0], ord))


@pytest.mark.parametrize("ord", [None, 1, 2, 3.5, np.inf, -np.inf, 0])
def test_norm_vector(ord):
    a = RNG.uniform(-1, 1, size=(3, 4))
    assert_close(LA.norm(kiln.tensor(a[0]), ord), np.linalg.norm(a[0], ord))
    assert_close(LA.norm(kiln.tensor(a), ord, dim=1), np.linalg.norm(a, ord, axis=1))
    if ord is None:
        assert_close(LA.norm(kiln.tensor(a)), np.linalg.norm(a))
        assert LA.norm(kiln.tensor(a), dtype=kiln.float32).dtype == kiln.float32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, -1, -3])
def test_matrix_power(n):
    a = well_conditioned(2, 3, 3) / 3
    assert_close(LA.matrix_power(kiln.tensor(a), n), np.linalg.matrix_power(a, n), atol=1e-9,
                 rtol=1e-9)
    assert_close(kiln.tensor(a).matrix_power(n), np.linalg.matrix_power(a, n), atol=1e-9, rtol=1e-9)


def test_multi_dot_vecdot_diagonal():
    v = RNG.uniform(-1, 1, size=3)
    ms = [RNG.uniform(-1, 1, size=s) for s in [(3, 4), (4, 2), (2, 5)]]
    w = RNG.uniform(-1, 1, size=5)
    assert_close(LA.multi_dot([kiln.tensor(m) for m in ms]), np.linalg.multi_dot(ms))
    assert_close(LA.multi_dot([kiln.tensor(x) for x in [v] + ms + [w]]),
                 np.linalg.multi_dot([v] + ms + [w]))
    x, y = RNG.uniform(-1, 1, size=(2, 3, 4)), RNG.uniform(-1, 1, size=(3, 4))
    assert_close(LA.vecdot(kiln.tensor(x), kiln.tensor(y)), (x * y).sum(-1))
    assert_close(LA.vecdot(kiln.tensor(x), kiln.tensor(y), dim=1), (x * y).sum(1))
    assert_close(LA.diagonal(kiln.tensor(x)), np.diagonal(x, axis1=-2, axis2=-1))
    assert_close(LA.diagonal(kiln.tensor(x), offset=1, dim1=0, dim2=2),
                 np.diagonal(x, offset=1, axis1=0, axis2=2))


# ---------------------------------------------------------------- gradients (float64)

def test_grad_inv_solve_det():
    a = well_conditioned(2, 3, 3)
    b = RNG.uniform(-1, 1, size=(2, 3, 2))
    gradcheck(LA.inv, a)
    gradcheck(LA.solve, a, b)
    gradcheck(lambda x, y: LA.solve(x, y, left=False), a, np.swapaxes(b, -1, -2))
    gradcheck(lambda x, y: LA.solve(x, y), a, b[..., 0])
    gradcheck(LA.det, a)
    gradcheck(lambda x: LA.slogdet(x)[1], a)
    gradcheck(kiln.logdet, a)
    gradgradcheck(LA.inv, a[0])
    gradgradcheck(LA.det, a[0])


def test_grad_cholesky_qr():
    x = RNG.uniform(-1, 1, size=(2, 3, 3))
    spd_of = lambda m: m @ m.mT + 3 * kiln.eye(3, dtype=kiln.float64)
    gradcheck(lambda m: LA.cholesky(spd_of(m)), x)
    gradcheck(lambda m: LA.cholesky(spd_of(m), upper=True), x)
    gradgradcheck(lambda m: LA.cholesky(spd_of(m)), x[0])
    a = RNG.uniform(-1, 1, size=(2, 4, 3))
    gradcheck(lambda m: LA.qr(m), a)
    gradcheck(lambda m: LA.qr(m)[1], a[0, :3])
    gradcheck(lambda m: LA.qr(m, mode="complete"), a[0, :3])


def test_grad_eigh_svd():
    x = RNG.uniform(-1, 1, size=(2, 3, 3))
    # Gauge-invariant functions of the vectors: V * V and reconstructions.
    gradcheck(lambda m: LA.eigh(sym(m))[0], x)
    gradcheck(lambda m: LA.eigh(sym(m))[1] ** 2, x)
    gradcheck(lambda m: LA.eigvalsh(sym(m)), x)
    a = RNG.uniform(-1, 1, size=(2, 4, 3))
    def svd_parts(m):
        u, s, vh = LA.svd(m, full_matrices=False)
        return u * u, s, vh * vh, (u * s.unsqueeze(-2)) @ vh
    gradcheck(svd_parts, a)
    gradcheck(svd_parts, np.swapaxes(a, -1, -2))
    gradcheck(lambda m: LA.svd(m)[1], a)
    gradcheck(LA.svdvals, a)
    gradgradcheck(LA.svdvals, a[0])
    gradgradcheck(lambda m: LA.eigvalsh(sym(m)), x[0])


def test_grad_composites():
    a = RNG.uniform(-1, 1, size=(2, 4, 3))
    gradcheck(LA.pinv, a)
    gradcheck(lambda m: LA.pinv(sym(m), hermitian=True), well_conditioned(3, 3))
    for ord in MATRIX_ORDS:
        gradcheck(lambda m: LA.matrix_norm(m, ord), a)
    sq = well_conditioned(3, 3)
    gradcheck(lambda m: LA.matrix_power(m, 3), sq)
    gradcheck(lambda m: LA.matrix_power(m, -2), sq)
    ms = [RNG.uniform(-1, 1, size=s) for s in [(3,), (3, 4), (4, 2)]]
    gradcheck(lambda *xs: LA.multi_dot(list(xs)), *ms)
    gradcheck(lambda x, y: LA.vecdot(x, y), a, a[0])
    b = RNG.uniform(-1, 1, size=(2, 4, 2))
    gradcheck(lambda x, y: LA.lstsq(x, y).solution, a, b)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_grad_solve_triangular(upper, left, unit):
    a = well_conditioned(3, 3)
    b = RNG.uniform(-1, 1, size=(3, 2) if left else (2, 3))
    gradcheck(lambda x, y: LA.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
              a, b)


def test_qr_grad_errors():
    a = kiln.tensor(RNG.uniform(-1, 1, size=(3, 4)), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[linalg\.qr\]"):
        LA.qr(a)[0].sum().backward()
    b = kiln.tensor(RNG.uniform(-1, 1, size=(4, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[linalg\.qr\].*mode='r'"):
        LA.qr(b, mode="r")[1].sum().backward()


# ---------------------------------------------------------------- errors

def test_singular_errors():
    s = kiln.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(LA.LinAlgError, match=r"^\[linalg\.inv\] The diagonal element 2 is zero, "
                       r"the inversion could not be completed because the input matrix is "
                       r"singular\.$"):
        LA.inv(s)
    assert issubclass(LA.LinAlgError, RuntimeError) and kiln._C._LinAlgError is LA.LinAlgError
    batch = kiln.stack([kiln.eye(2, dtype=kiln.float32), s])
    with pytest.raises(LA.LinAlgError, match=r"\[linalg\.inv\] \(Batch element 1\): The diagonal"):
        kiln.inverse(batch)
    with pytest.raises(LA.LinAlgError, match=r"\[linalg\.solve\] .*singular"):
        LA.solve(s, kiln.ones(2))
    with pytest.raises(LA.LinAlgError, match=r"\[linalg\.cholesky\] .*leading minor of order 2"):
        LA.cholesky(kiln.tensor([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("fn", [LA.inv, LA.det, LA.slogdet, LA.cholesky, LA.eigh, LA.eigvalsh,
                                kiln.inverse, kiln.logdet])
def test_non_square_errors(fn):
    with pytest.raises(RuntimeError, match=r"\[linalg\.\w+\] A must be batches of square "
                       r"matrices, but they are 2 by 3 matrices"):
        fn(kiln.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"\[linalg\.\w+\] .*at least 2 dimensions.*\[3\]"):
        fn(kiln.ones(3))


@pytest.mark.parametrize("fn", [LA.inv, LA.det, LA.svdvals, LA.qr, LA.svd, LA.pinv])
def test_dtype_errors(fn):
    with pytest.raises(RuntimeError, match=r"\[linalg\.\w+\] Low precision dtypes not supported\. "
                       r"Got .*float16"):
        fn(kiln.ones(2, 2, dtype=kiln.float16))
    with pytest.raises(RuntimeError, match=r"\[linalg\.\w+\] Expected a floating point.*int64"):
        fn(kiln.ones(2, 2, dtype=kiln.int64))


def test_shape_and_argument_errors():
    a = kiln.eye(3, dtype=kiln.float64)
    with pytest.raises(RuntimeError,
                       match=r"\[linalg\.solve\] Incompatible shapes .*\[3, 3\] and \[4, 2\]"):
        LA.solve(a, kiln.ones(4, 2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[linalg\.solve_triangular\] Incompatible shapes"):
        LA.solve_triangular(a, kiln.ones(4, 2, dtype=kiln.float64), upper=True)
    with pytest.raises(RuntimeError, match=r"\[linalg\.lstsq\] Incompatible shapes"):
        LA.lstsq(a, kiln.ones(4, 2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[linalg\.lstsq\] parameter `driver`"):
        LA.lstsq(a, a, driver="gesv")
    with pytest.raises(RuntimeError, match=r"\[linalg\.qr\] .*unrecognized mode 'full'"):
        LA.qr(a, mode="full")
    with pytest.raises(RuntimeError, match=r"\[linalg\.eigh\] .*UPLO.*got X$"):
        LA.eigh(a, UPLO="X")
    with pytest.raises(RuntimeError, match=r"\[linalg\.matrix_norm\] Order 3 not supported"):
        LA.matrix_norm(a, 3)
    with pytest.raises(RuntimeError, match=r"\[linalg\.norm\] If dim is not specified but ord is"):
        LA.norm(kiln.ones(2, 2, 2), 2)
    with pytest.raises(RuntimeError, match=r"\[linalg\.multi_dot\] expected at least 2 tensors"):
        LA.multi_dot([a])
    with pytest.raises(RuntimeError, match=r"\[linalg\.multi_dot\] tensor 1 must be 2D"):
        LA.multi_dot([a, kiln.ones(3, dtype=kiln.float64), a])
    with pytest.raises(RuntimeError,
                       match=r"\[linalg\.multi_dot\] tensors 0 and 1 .*\[3, 3\] and \[2, 2\]"):
        LA.multi_dot([a, kiln.eye(2, dtype=kiln.float64)])
    with pytest.raises(RuntimeError, match=r"\[linalg\.matrix_power\] .*square.*\[2, 3\]"):
        LA.matrix_power(kiln.ones(2, 3), 2)
    with pytest.raises(RuntimeError, match=r"\[linalg\.vecdot\] .*same dtype"):
        LA.vecdot(kiln.ones(3), kiln.ones(3, dtype=kiln.float64))


# ---------------------------------------------------------------- PyTorch comparison

def _pair(a, torch, device, requires_grad=False):
    k = kiln.tensor(a, device=device, requires_grad=requires_grad)
    t = torch.tensor(a, device=device, requires_grad=requires_grad)
    return k, t


def _close(k, t, atol=1e-8):
    np.testing.assert_allclose(k.detach().cpu().numpy(), t.detach().cpu().numpy(), atol=atol,
                               rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_against_torch_forward(device):
    torch = pytest.importorskip("torch")
    a = well_conditioned(2, 3, 3)
    ka, ta = _pair(a, torch, device)
    for name in ["inv", "det", "svdvals", "eigvalsh", "matrix_rank", "pinv"]:
        out = getattr(LA, name)(ka)
        assert out.device == ka.device
        _close(out, getattr(torch.linalg, name)(ta))
    _close(LA.slogdet(ka).logabsdet, torch.linalg.slogdet(ta).logabsdet)
    s = spd(2, 3, 3)
    ks, ts = _pair(s, torch, device)
    _close(LA.cholesky(ks, upper=True), torch.linalg.cholesky(ts, upper=True))
    for mode in ["reduced", "complete"]:
        kq, kr = LA.qr(ka[..., :2], mode=mode)
        tq, tr = torch.linalg.qr(ta[..., :2], mode=mode)
        _close(kq, tq)
        _close(kr, tr)
    b = RNG.uniform(-1, 1, size=(2, 3, 2))
    kb, tb = _pair(b, torch, device)
    _close(LA.solve(ka, kb), torch.linalg.solve(ta, tb))
    _close(LA.solve_triangular(ka, kb, upper=True),
           torch.linalg.solve_triangular(ta, tb, upper=True))
    for ord in MATRIX_ORDS:
        _close(LA.matrix_norm(ka, ord), torch.linalg.matrix_norm(ta, ord))
    _close(LA.matrix_power(ka, -2), torch.linalg.matrix_power(ta, -2))
    tall = RNG.uniform(-1, 1, size=(5, 3))
    kt, tt = _pair(tall, torch, "cpu")
    kl = LA.lstsq(kt, kt[:, :2].contiguous())
    tl = torch.linalg.lstsq(tt, tt[:, :2].contiguous())
    _close(kl.solution, tl.solution)
    assert kl.residuals.shape == tuple(tl.residuals.shape) and kl.rank.item() == tl.rank.item()


@pytest.mark.parametrize("device", DEVICES)
def test_against_torch_gradients(device):
    torch = pytest.importorskip("torch")
    a = well_conditioned(2, 3, 3)

    def compare(fn_k, fn_t, x):
        ka, ta = _pair(x, torch, device, requires_grad=True)
        outs_k, outs_t = fn_k(ka), fn_t(ta)
        outs_k = outs_k if isinstance(outs_k, tuple) else (outs_k,)
        outs_t = outs_t if isinstance(outs_t, tuple) else (outs_t,)
        sum(o.sum() for o in outs_k).backward()
        sum(o.sum() for o in outs_t).backward()
        _close(ka.grad, ta.grad, atol=1e-7)

    for name in ["inv", "det", "svdvals", "pinv"]:
        compare(getattr(LA, name), getattr(torch.linalg, name), a)
    compare(lambda m: LA.slogdet(m)[1], lambda m: torch.linalg.slogdet(m)[1], a)
    compare(lambda m: LA.eigh(sym(m))[1] ** 2, lambda m: torch.linalg.eigh(m + m.mT)[1] ** 2, a)
    compare(lambda m: LA.cholesky(m @ m.mT), lambda m: torch.linalg.cholesky(m @ m.mT), a)
    compare(lambda m: LA.qr(m), lambda m: torch.linalg.qr(m), a[..., :2])
    compare(lambda m: LA.matrix_norm(m, "nuc"), lambda m: torch.linalg.matrix_norm(m, "nuc"), a)
    compare(lambda m: LA.solve_triangular(m, m, upper=False),
            lambda m: torch.linalg.solve_triangular(m, m, upper=False), a)


def test_torch_norm_nuclear():
    a = RNG.uniform(-1, 1, size=(2, 3, 4))
    assert_close(kiln.tensor(a[0]).norm("nuc"), np.linalg.norm(a[0], "nuc"))
    assert_close(kiln.norm(kiln.tensor(a), "nuc", dim=(1, 2)),
                 np.stack([np.linalg.norm(m, "nuc") for m in a]))


def test_empty_matrices():
    e = kiln.ones(0, 0, dtype=kiln.float64)
    assert LA.det(e).item() == 1 and tuple(LA.slogdet(e).logabsdet.shape) == ()
    assert tuple(LA.inv(e).shape) == (0, 0) and tuple(LA.cholesky(e).shape) == (0, 0)
    assert tuple(LA.eigh(e).eigenvalues.shape) == (0,) and tuple(LA.svdvals(e).shape) == (0,)
    u, s, vh = LA.svd(kiln.ones(0, 3, dtype=kiln.float64))
    assert tuple(u.shape) == (0, 0) and tuple(s.shape) == (0,)
    assert_close(vh, np.eye(3))
    assert tuple(LA.pinv(kiln.ones(0, 3, dtype=kiln.float64)).shape) == (3, 0)
    assert LA.matrix_rank(kiln.ones(3, 0, dtype=kiln.float64)).item() == 0
    q, r = LA.qr(kiln.ones(3, 0, dtype=kiln.float64), mode="complete")
    assert_close(q, np.eye(3))
    assert tuple(r.shape) == (3, 0)


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond(p):
    a = well_conditioned(2, 3, 3)
    assert_close(LA.cond(kiln.tensor(a), p), np.linalg.cond(a, p), atol=1e-9, rtol=1e-9)
    gradcheck(lambda m: LA.cond(m, p), a[0])


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_inverse_triangular_solve(upper):
    s = spd(2, 3, 3)
    b = RNG.uniform(-1, 1, size=(2, 3, 2))
    f = LA.cholesky(kiln.tensor(s), upper=upper)
    assert_close(kiln.cholesky_solve(kiln.tensor(b), f, upper=upper), np.linalg.solve(s, b))
    assert_close(kiln.tensor(b).cholesky_solve(f, upper), np.linalg.solve(s, b))
    assert_close(kiln.cholesky_inverse(f, upper=upper), np.linalg.inv(s))
    gradcheck(lambda x, y: kiln.cholesky_solve(x, y, upper=upper), b, f.detach().numpy())
    a = well_conditioned(3, 3)
    t = np.triu(a) if upper else np.tril(a)
    for transpose in (False, True):
        x, c = kiln.triangular_solve(kiln.tensor(b), kiln.tensor(a), upper=upper,
                                     transpose=transpose)
        assert_close(x, np.linalg.solve(t.T if transpose else t, b))
        assert_close(c, a)


def test_ex_variants_report_info():
    good = well_conditioned(3, 3)
    bad = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    y, info = LA.inv_ex(kiln.tensor(np.stack([good, bad])))
    assert info.dtype == kiln.int32 and info.tolist()[0] == 0 and info.tolist()[1] > 0
    assert_close(y[0], np.linalg.inv(good))
    with pytest.raises(LA.LinAlgError, match=r"\[linalg\.inv\] \(Batch element 1\)"):
        LA.inv_ex(kiln.tensor(np.stack([good, bad])), check_errors=True)
    l, info = LA.cholesky_ex(kiln.tensor(np.stack([spd(3, 3), -spd(3, 3)])))
    assert info.tolist() == [0, 1]
    l, info = LA.cholesky_ex(kiln.tensor(spd(2, 3, 3)), upper=True, check_errors=True)
    assert info.tolist() == [0, 0] and tuple(info.shape) == (2,)
    gradcheck(lambda m: LA.inv_ex(m).inverse, good)


@requires_gpu
def test_cuda_inputs_round_trip_through_cpu():
    # Note [CUDA linear algebra through the CPU]: results and gradients stay on the GPU.
    a = well_conditioned(2, 3, 3)
    x = kiln.tensor(a, device="cuda", requires_grad=True)
    for out, expected in [(LA.inv(x), np.linalg.inv(a)), (LA.det(x), np.linalg.det(a)),
                          (LA.svdvals(x), np.linalg.svd(a, compute_uv=False)),
                          (LA.eigvalsh(sym(x)), np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2))),
                          (LA.pinv(x), np.linalg.pinv(a)),
                          (LA.matrix_norm(x, "nuc"), np.linalg.norm(a, "nuc", axis=(-2, -1))),
                          (LA.solve(x, x[..., :1]), np.linalg.solve(a, a[..., :1])),
                          (LA.cholesky(x @ x.mT), np.linalg.cholesky(a @ np.swapaxes(a, -1, -2)))]:
        assert out.device.type == "cuda"
        assert_close(out.cpu(), expected, atol=1e-9, rtol=1e-9)
    LA.det(x).sum().backward()
    assert x.grad.device.type == "cuda"
    expected = np.linalg.det(a)[:, None, None] * np.swapaxes(np.linalg.inv(a), -1, -2)
    assert_close(x.grad.cpu(), expected)
    with pytest.raises(LA.LinAlgError, match=r"\[linalg\.inv\]"):
        LA.inv(kiln.zeros(2, 2, device="cuda"))
