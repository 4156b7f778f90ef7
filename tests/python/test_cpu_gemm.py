"""CPU GEMMs on the math library (ops/cpu/gemm.h; Eigen where kiln has none): mm, bmm, matmul,
the add*mm family, F.linear and einsum against NumPy for every operand layout the library
reads in place (transposed, sliced, broadcast batches) and those it does not, half types
through float, float64 (never on the library), empty and 1-element operands; kiln's thread
count governs the GEMM's threads."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, with_threads

F32 = dict(dtype=kiln.float32, atol=1e-4, rtol=1e-4)


def f32(a):
    return kiln.tensor(np.asarray(a, dtype=np.float32))


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32).astype(np.float64)


# (name, kiln view of a stored array, NumPy view of the same) for a [rows, cols] operand.
LAYOUTS = [
    ("contiguous", lambda a: f32(a), lambda a: a),
    ("transposed", lambda a: f32(a.T.copy()).t(), lambda a: a),
    ("row slice", lambda a: f32(np.pad(a, ((0, 0), (0, 3))))[:, :a.shape[1]], lambda a: a),
    ("column slice", lambda a: f32(np.pad(a.T, ((0, 0), (0, 2))))[:, :a.shape[0]].t(),
     lambda a: a),
    ("every other column", lambda a: f32(np.repeat(a, 2, axis=1))[:, ::2], lambda a: a),
]


@pytest.mark.parametrize("la", LAYOUTS, ids=[l[0] for l in LAYOUTS])
@pytest.mark.parametrize("lb", LAYOUTS, ids=[l[0] for l in LAYOUTS])
def test_mm_reads_every_layout(la, lb):
    a, b = data(37, 53), data(53, 29)
    assert_close(kiln.mm(la[1](a), lb[1](b)), a @ b, **F32)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 7, 1), (1, 64, 33), (33, 64, 1), (5, 1, 6),
                                   (300, 257, 129)])
def test_mm_shapes_with_unit_and_odd_dims(m, k, n):
    a, b = data(m, k), data(k, n)
    assert_close(kiln.mm(f32(a), f32(b)), a @ b, **F32)
    assert_close(kiln.mm(f32(a.T.copy()).t(), f32(b.T.copy()).t()), a @ b, **F32)


def test_empty_operands():
    assert_close(kiln.mm(f32(np.zeros((3, 0))), f32(np.zeros((0, 4)))), np.zeros((3, 4)), **F32)
    assert kiln.mm(f32(np.zeros((0, 5))), f32(data(5, 4))).shape == (0, 4)
    assert kiln.bmm(f32(np.zeros((0, 2, 3))), f32(np.zeros((0, 3, 4)))).shape == (0, 2, 4)


@pytest.mark.parametrize("batch,m,k,n", [(64, 8, 8, 8), (3, 70, 90, 50), (1, 128, 256, 64)])
def test_bmm_small_and_large_batches(batch, m, k, n):
    # Small matrices run one GEMM per thread, large ones each on all threads.
    a, b = data(batch, m, k), data(batch, k, n)
    assert_close(kiln.bmm(f32(a), f32(b)), a @ b, **F32)
    at = f32(np.swapaxes(a, 1, 2).copy()).mT
    assert_close(with_threads(2, lambda: kiln.bmm(at, f32(b))), a @ b, **F32)


def test_bmm_of_a_broadcast_batch_reads_it_in_place():
    a, b = data(4, 6), data(5, 6, 3)
    ka = f32(a).unsqueeze(0).expand(5, 4, 6)
    assert ka.stride()[0] == 0
    assert_close(kiln.bmm(ka, f32(b)), a @ b, **F32)
    assert_close(kiln.matmul(f32(a), f32(b)), a @ b, **F32)


def test_matmul_folds_leading_dims_and_broadcasts():
    a, w = data(3, 4, 5, 6), data(6, 7)
    assert_close(kiln.matmul(f32(a), f32(w)), a @ w, **F32)
    b = data(4, 6, 2)
    assert_close(kiln.matmul(f32(a), f32(b)), a @ b, **F32)
    assert_close(kiln.matmul(f32(a[0, 0]), f32(b)), a[0, 0] @ b, **F32)
    v = data(6)
    assert_close(kiln.matmul(f32(a), f32(v)), a @ v, **F32)
    assert_close(kiln.matmul(f32(v), f32(v)), v @ v, **F32)
    # A right operand with size-1 batch dims folds like a matrix; the shapes still broadcast.
    w1 = data(1, 1, 1, 6, 7)
    for left in (a, a[0, 0], v, np.zeros((0, 5, 6))):
        assert_close(kiln.matmul(f32(left), f32(w1)), np.matmul(left, w1), **F32)


def test_matmul_against_a_size_one_batch_gets_gradients():
    a, w, g = data(2, 3, 4), data(1, 4, 5), data(2, 3, 5)
    ka, kw = f32(a).requires_grad_(True), f32(w).requires_grad_(True)
    kiln.matmul(ka, kw).backward(f32(g))
    assert_close(ka.grad, g @ w[0].T, **F32)
    assert_close(kw.grad, (a.reshape(-1, 4).T @ g.reshape(-1, 5))[None], **F32)


def test_add_product_family():
    c, a, b = data(4, 5), data(4, 3), data(3, 5)
    assert_close(kiln.addmm(f32(c), f32(a), f32(b), beta=0.5, alpha=2.0), 0.5 * c + 2 * a @ b,
                 **F32)
    bc, ba, bb = data(2, 4, 5), data(2, 4, 3), data(2, 3, 5)
    assert_close(kiln.baddbmm(f32(bc), f32(ba), f32(bb), beta=-1.0, alpha=0.25),
                 -bc + 0.25 * ba @ bb, **F32)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_and_gradients_3d_input(bias):
    x, w, b, g = data(7, 5, 33), data(21, 33), data(21), data(7, 5, 21)
    kx, kw = f32(x).requires_grad_(True), f32(w).requires_grad_(True)
    kb = f32(b).requires_grad_(True) if bias else None
    y = F.linear(kx, kw, kb)
    want = x @ w.T + (b if bias else 0)
    assert_close(y, want, **F32)
    y.backward(f32(g))
    rows_g, rows_x = g.reshape(-1, 21), x.reshape(-1, 33)
    assert_close(kx.grad, g @ w, **F32)
    assert_close(kw.grad, rows_g.T @ rows_x, **F32)
    if bias:
        assert_close(kb.grad, rows_g.sum(0), **F32)


def test_linear_with_a_transposed_weight_and_a_strided_input():
    x, w = data(9, 40), data(40, 12)  # w stored [in, out]: the module's weight is w.t()
    kw = f32(w).t().requires_grad_(True)
    kx = f32(np.repeat(x, 2, axis=1))[:, ::2]
    y = F.linear(kx, kw)
    assert_close(y, x @ w, **F32)
    y.sum().backward()
    assert_close(kw.grad, np.ones((9, 12)).T @ x, **F32)


def test_einsum_contractions():
    a, b = data(3, 4, 5), data(3, 5, 6)
    assert_close(kiln.einsum("bij,bjk->bik", f32(a), f32(b)), a @ b, **F32)
    assert_close(kiln.einsum("bij,bjk->ik", f32(a), f32(b)), np.einsum("bij,bjk->ik", a, b),
                 **F32)
    assert_close(kiln.einsum("ij,kj->ik", f32(a[0]), f32(b[0].T)), a[0] @ b[0], **F32)


@pytest.mark.parametrize("dtype,tol", [(kiln.float16, 2e-2), (kiln.bfloat16, 8e-2)])
def test_half_types_multiply_in_float(dtype, tol):
    a, b, bias = data(20, 70), data(70, 9), data(9)
    ka, kb = f32(a).to(dtype), f32(b).to(dtype)
    # The reference multiplies the rounded operands exactly and rounds once.
    ra, rb = ka.float().double().numpy(), kb.float().double().numpy()
    rbias = f32(bias).to(dtype).float().double().numpy()
    assert kiln.mm(ka, kb).dtype == dtype
    assert_close(kiln.mm(ka, kb).float(), ra @ rb, dtype=kiln.float32, atol=tol, rtol=tol)
    assert_close(kiln.mm(ka.t().contiguous().t(), kb).float(), ra @ rb, dtype=kiln.float32,
                 atol=tol, rtol=tol)
    out = F.linear(ka, kb.t(), f32(bias).to(dtype))
    assert_close(out.float(), ra @ rb + rbias, dtype=kiln.float32, atol=tol, rtol=tol)
    ba = f32(np.stack([a, -a])).to(dtype)
    assert_close(kiln.bmm(ba, kb.expand(2, 70, 9)).float(), np.stack([ra @ rb, -ra @ rb]),
                 dtype=kiln.float32, atol=tol, rtol=tol)


def test_float64_keeps_float64_precision():
    a, b = RNG.standard_normal((50, 60)), RNG.standard_normal((60, 40))
    assert_close(kiln.mm(kiln.tensor(a), kiln.tensor(b)), a @ b, atol=1e-12, rtol=1e-12)
    assert_close(F.linear(kiln.tensor(a), kiln.tensor(b.T)), a @ b, atol=1e-12, rtol=1e-12)


def test_thread_count_gives_the_same_result():
    a, b = f32(data(200, 300)), f32(data(300, 150))
    one = with_threads(1, lambda: kiln.mm(a, b)).numpy()
    two = with_threads(2, lambda: kiln.mm(a, b)).numpy()
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5)


_THREAD_SHARE = """
import sys, time
import kiln
kiln.set_num_threads(int(sys.argv[1]))
a, b = kiln.randn(768, 768), kiln.randn(768, 768)
kiln.mm(a, b)  # warm-up: the pool and the library's buffers
t0, p0 = time.thread_time(), time.process_time()
for _ in range(4):
    kiln.mm(a, b)
print((time.thread_time() - t0) / max(time.process_time() - p0, 1e-9))
"""


def _calling_thread_share(threads):
    """The calling thread's share of the process's CPU time over a few large GEMMs, in a fresh
    process: one that has run CUDA or wider OpenMP regions has other threads burning CPU time
    (the driver's, idle OpenMP workers spinning), which would count against the caller."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", _THREAD_SHARE, str(threads)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_set_num_threads_governs_the_gemm():
    # CPU time, not wall time: other processes' load does not change who did the work. On one
    # thread the caller does all of it; on two it does about half.
    assert _calling_thread_share(1) > 0.85
    assert _calling_thread_share(2) < 0.8
