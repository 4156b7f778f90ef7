"""Fused softmax / log_softmax, layer_norm, rms_norm and cross_entropy CUDA kernels against the CPU
kernels and (where installed) PyTorch on the GPU, forward and gradients."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, rand, requires_gpu

pytestmark = requires_gpu

DTYPES = [kiln.float32, kiln.float16, kiln.bfloat16]
COLS = [1, 7, 1000, 1024, 4097, 12000, 32768, 40000]
TOL = {kiln.float32: 1e-5, kiln.float64: 1e-10, kiln.float16: 2e-3, kiln.bfloat16: 1.6e-2}


def rows_for(cols):
    return 3 if cols > 4097 else 9


def pair(a, dtype, requires_grad=True):
    """The same values as a CPU and a CUDA leaf tensor."""
    cpu = kiln.tensor(a, dtype=dtype, requires_grad=requires_grad)
    gpu = kiln.tensor(a, dtype=dtype).to("cuda")
    gpu.requires_grad_(requires_grad)
    return cpu, gpu


def close(gpu, cpu, dtype, scale=1.0):
    tol = TOL[dtype] * scale
    assert gpu.device.type == "cuda"
    assert_close(gpu.detach().cpu().double(), cpu.detach().double().numpy(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float64])
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_cpu(cols, dtype, log):
    fn = kiln.log_softmax if log else kiln.softmax
    a = rand(rows_for(cols), cols, low=-6, high=6)
    g = rand(rows_for(cols), cols)
    xc, xg = pair(a, dtype)
    yc, yg = fn(xc, -1), fn(xg, -1)
    close(yg, yc, dtype, 4 if log else 1)
    yc.backward(kiln.tensor(g, dtype=dtype))
    yg.backward(kiln.tensor(g, dtype=dtype).to("cuda"))
    close(xg.grad, xc.grad, dtype, 8)


@pytest.mark.parametrize("shape", [(5001, 7), (4099, 96), (333, 512)])
def test_softmax_many_short_rows(shape):
    # Warp-per-row kernel: row counts that do not fill the last block.
    a = rand(*shape, low=-5, high=5)
    for dtype in (kiln.float32, kiln.float64, kiln.float16):
        for fn in (kiln.softmax, kiln.log_softmax):
            close(fn(kiln.tensor(a, dtype=dtype).to("cuda"), 1),
                  fn(kiln.tensor(a, dtype=dtype), 1), dtype, 4)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_unaligned_dim_not_last_and_nan(log):
    fn = kiln.log_softmax if log else kiln.softmax
    a = rand(4097)
    # A contiguous view starting one element in: the row is not 16-byte aligned.
    for dtype in (kiln.float32, kiln.float16):
        yg = fn(kiln.tensor(a, dtype=dtype).to("cuda")[1:], 0)
        yc = fn(kiln.tensor(a, dtype=dtype)[1:], 0)
        close(yg, yc, dtype, 4)
    b = rand(3, 40, 6)
    assert_close(fn(kiln.tensor(b).to("cuda"), 1).cpu(), fn(kiln.tensor(b), 1).numpy())
    b[0, 3, 2] = np.nan
    b[1, :, 4] = -np.inf
    got = fn(kiln.tensor(b).to("cuda"), 1).cpu().numpy()
    want = fn(kiln.tensor(b), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float64])
@pytest.mark.parametrize("cols", COLS)
def test_layer_norm_matches_cpu(cols, dtype):
    rows = rows_for(cols) if cols > 7 else 300  # many rows: the column reduction's chunks
    a, w, b, g = rand(rows, cols, low=-2, high=4), rand(cols), rand(cols), rand(rows, cols)
    xc, xg = pair(a, dtype)
    wc, wg = pair(w, dtype)
    bc, bg = pair(b, dtype)
    yc, yg = F.layer_norm(xc, (cols,), wc, bc), F.layer_norm(xg, (cols,), wg, bg)
    close(yg, yc, dtype, 8)
    yc.backward(kiln.tensor(g, dtype=dtype))
    yg.backward(kiln.tensor(g, dtype=dtype).to("cuda"))
    close(xg.grad, xc.grad, dtype, 100)
    close(wg.grad, wc.grad, dtype, 100)
    close(bg.grad, bc.grad, dtype, 100)


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float64])
@pytest.mark.parametrize("cols", [1, 1000, 4097, 12000, 40000])
def test_rms_norm_matches_cpu(cols, dtype):
    rows = 200 if cols <= 1000 else 3
    a, w, g = rand(rows, cols, low=-2, high=4), rand(cols), rand(rows, cols)
    xc, xg = pair(a, dtype)
    wc, wg = pair(w, dtype)
    yc, yg = F.rms_norm(xc, (cols,), wc), F.rms_norm(xg, (cols,), wg)
    close(yg, yc, dtype, 8)
    yc.backward(kiln.tensor(g, dtype=dtype))
    yg.backward(kiln.tensor(g, dtype=dtype).to("cuda"))
    close(xg.grad, xc.grad, dtype, 100)
    close(wg.grad, wc.grad, dtype, 100)


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float64])
@pytest.mark.parametrize("rows, cols, offset", [(2000, 768, 0), (1500, 200, 0), (700, 1000, 0),
                                                (1100, 768, 1)])
def test_layer_norm_weight_grads_over_many_rows(rows, cols, offset, dtype):
    # The column sums read 16 bytes per thread (aligned rows, cols a multiple of 16 bytes'
    # elements) across many row chunks and partial column blocks; offset 1 (rows not aligned)
    # takes the one-column-per-thread path.
    a, w, b, g = rand(rows * cols + offset, low=-2, high=4), rand(cols), rand(cols), \
        rand(rows, cols)
    xc = kiln.tensor(a, dtype=dtype)[offset:].view(rows, cols).detach().requires_grad_(True)
    xg = kiln.tensor(a, dtype=dtype).to("cuda")[offset:].view(rows, cols).detach() \
        .requires_grad_(True)
    wc, wg = pair(w, dtype)
    bc, bg = pair(b, dtype)
    F.layer_norm(xc, (cols,), wc, bc).backward(kiln.tensor(g, dtype=dtype))
    F.layer_norm(xg, (cols,), wg, bg).backward(kiln.tensor(g, dtype=dtype).to("cuda"))
    close(xg.grad, xc.grad, dtype, 100)
    close(wg.grad, wc.grad, dtype, 10)
    close(bg.grad, bc.grad, dtype, 10)


def test_layer_norm_without_affine_and_unaligned():
    a = rand(4, 2, 1025)
    x = kiln.tensor(a).float()
    assert_close(F.layer_norm(x.to("cuda")[..., 1:], (2, 1024)).cpu(),
                 F.layer_norm(x[..., 1:], (2, 1024)).numpy(), atol=1e-4, rtol=1e-4)
    b = rand(2 * 12000 + 1)
    for dtype in (kiln.float32, kiln.bfloat16):
        # Rows of a contiguous view one element in: not 16-byte aligned.
        xg = kiln.tensor(b, dtype=dtype).to("cuda")[1:].view(2, 12000)
        xc = kiln.tensor(b, dtype=dtype)[1:].view(2, 12000)
        close(F.layer_norm(xg, (12000,)), F.layer_norm(xc, (12000,)), dtype, 8)


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float64])
@pytest.mark.parametrize("cols", COLS)
def test_cross_entropy_matches_cpu(cols, dtype):
    rows = rows_for(cols)
    a = rand(rows, cols, low=-4, high=4)
    t = RNG.integers(0, cols, size=rows)
    t[0] = -100
    w = rand(cols, low=0.5, high=2)
    for weight in (None, w):
        xc, xg = pair(a, dtype)
        wc = None if weight is None else kiln.tensor(weight, dtype=dtype)
        wg = None if weight is None else wc.to("cuda")
        lc = F.cross_entropy(xc, kiln.tensor(t), weight=wc, reduction="none")
        lg = F.cross_entropy(xg, kiln.tensor(t).to("cuda"), weight=wg, reduction="none")
        close(lg, lc, dtype, 8)
        gl = rand(rows)
        lc.backward(kiln.tensor(gl, dtype=dtype))
        lg.backward(kiln.tensor(gl, dtype=dtype).to("cuda"))
        close(xg.grad, xc.grad, dtype, 8)
    mean_c = F.cross_entropy(kiln.tensor(a, dtype=dtype), kiln.tensor(t))
    mean_g = F.cross_entropy(kiln.tensor(a, dtype=dtype).to("cuda"), kiln.tensor(t).to("cuda"))
    close(mean_g, mean_c, dtype, 8)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_under_autocast_matches_float32_copy(dtype, weighted):
    """Note [Cross entropy under autocast]: half logits read in place, float32 loss, the
    gradient rounded once; the same numbers as the float32 kernel on a cast copy."""
    rows, cols = 9, 50304
    a = rand(rows, cols, low=-4, high=4)
    t = RNG.integers(0, cols, size=rows)
    t[0] = -100
    tg = kiln.tensor(t).to("cuda")
    w = kiln.tensor(rand(cols, low=0.5, high=2)).to("cuda") if weighted else None
    x = kiln.tensor(a, dtype=dtype).to("cuda").requires_grad_(True)
    with kiln.autocast("cuda", dtype=dtype):
        out = F.cross_entropy(x, tg, weight=w)
    assert out.dtype == kiln.float32
    ref_x = kiln.tensor(a, dtype=dtype).to("cuda").float().requires_grad_(True)
    ref = F.cross_entropy(ref_x, tg, weight=w)
    assert_close(out.cpu(), ref.detach().cpu().numpy(), atol=1e-5, rtol=1e-5)
    out.backward()
    ref.backward()
    assert x.grad.dtype == dtype
    assert_close(x.grad.float().cpu(), ref_x.grad.to(dtype).float().cpu().numpy(), atol=0, rtol=0)


# --- against PyTorch on the GPU ------------------------------------------------------

TORCH_DTYPE = {kiln.float32: "float32", kiln.float16: "float16", kiln.bfloat16: "bfloat16"}


def torch_pair(torch, a, dtype):
    x = kiln.tensor(a, dtype=dtype).to("cuda")
    x.requires_grad_(True)
    tx = torch.tensor(a, device="cuda").to(getattr(torch, TORCH_DTYPE[dtype]))
    tx.requires_grad_(True)
    return x, tx


def close_torch(got, want, dtype, scale=1.0):
    tol = TOL[dtype] * scale
    assert_close(got.detach().cpu().double(), want.detach().double().cpu().numpy(), atol=tol,
                 rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
def test_against_torch(cols, dtype):
    torch = pytest.importorskip("torch")
    rows = rows_for(cols)
    a, g = rand(rows, cols, low=-4, high=4), rand(rows, cols)
    tg = torch.tensor(g, device="cuda").to(getattr(torch, TORCH_DTYPE[dtype]))
    kg = kiln.tensor(g, dtype=dtype).to("cuda")
    for name in ("softmax", "log_softmax"):
        x, tx = torch_pair(torch, a, dtype)
        y, ty = getattr(kiln, name)(x, -1), getattr(torch, name)(tx, -1)
        close_torch(y, ty, dtype, 4)
        y.backward(kg)
        ty.backward(tg)
        close_torch(x.grad, tx.grad, dtype, 8)
    x, tx = torch_pair(torch, a, dtype)
    w, tw = torch_pair(torch, rand(cols), dtype)
    b, tb = torch_pair(torch, rand(cols), dtype)
    y = F.layer_norm(x, (cols,), w, b)
    ty = torch.nn.functional.layer_norm(tx, (cols,), tw, tb)
    close_torch(y, ty, dtype, 8)
    y.backward(kg)
    ty.backward(tg)
    for got, want in ((x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        close_torch(got, want, dtype, 100)
    x, tx = torch_pair(torch, a, dtype)
    w, tw = torch_pair(torch, rand(cols), dtype)
    y = F.rms_norm(x, (cols,), w, eps=1e-6)
    ty = torch.nn.functional.rms_norm(tx, (cols,), tw, eps=1e-6)
    close_torch(y, ty, dtype, 8)
    y.backward(kg)
    ty.backward(tg)
    close_torch(x.grad, tx.grad, dtype, 100)
    close_torch(w.grad, tw.grad, dtype, 100)
    t = RNG.integers(0, cols, size=rows)
    t[-1] = -100
    x, tx = torch_pair(torch, a, dtype)
    loss = F.cross_entropy(x, kiln.tensor(t).to("cuda"))
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(t, device="cuda"))
    close_torch(loss, tloss, dtype, 8)
    loss.backward()
    tloss.backward()
    close_torch(x.grad, tx.grad, dtype, 8)


def test_operands_on_other_devices_raise():
    x = kiln.tensor(rand(3, 5)).to("cuda")
    with pytest.raises(RuntimeError):
        F.layer_norm(x, (5,), kiln.ones(5))
    with pytest.raises(RuntimeError):
        F.rms_norm(x, (5,), kiln.ones(5))
    with pytest.raises(RuntimeError, match=r"\[cross_entropy\].*device"):
        F.cross_entropy(x, kiln.tensor([0, 1, 2]), weight=kiln.ones(5).to("cuda"))
    with pytest.raises(RuntimeError, match=r"\[cross_entropy\].*device"):
        F.cross_entropy(x, kiln.tensor([0, 1, 2]).to("cuda"), weight=kiln.ones(5))
