"""F.linear as one fused kernel call and one autograd node (Note [Fused linear]): forward and
every gradient against the same computation in float64 on the CPU (and PyTorch where installed),
for 2-D to 4-D inputs, with and without bias, each dtype, TF32 on and off, the operands cuBLASLt
declines (odd sizes, misaligned views), non-contiguous inputs, gradients of only some arguments
and double backward. The CPU runs the same front end (Eigen kernels), so CI covers it too."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import gradcheck, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]
# Largest error relative to the largest reference value, per dtype; inputs are rounded to the
# dtype first, so this is the accumulation and the output's rounding.
TOL = {kiln.float64: 1e-12, kiln.float32: 1e-5, kiln.float16: 2e-3, kiln.bfloat16: 1.6e-2}
TF32_TOL = 4e-3
TORCH_NAME = {kiln.float32: "float32", kiln.float16: "float16", kiln.bfloat16: "bfloat16"}
FUSED = "LinearBackward0"
# Its own generator, so that adding cases here leaves other files' random draws as they are.
RNG = np.random.default_rng(13)


class tf32:
    """Sets kiln.backends.cuda.matmul.allow_tf32 for a block."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.saved = kiln.backends.cuda.matmul.allow_tf32
        kiln.backends.cuda.matmul.allow_tf32 = self.on

    def __exit__(self, *exc):
        kiln.backends.cuda.matmul.allow_tf32 = self.saved


@pytest.fixture(autouse=True)
def _tf32_off():
    """The float32 tolerances assume full-precision products."""
    with tf32(False):
        yield


def data(shape, dtype):
    """Random values rounded to `dtype`, as float64."""
    a = RNG.uniform(-1, 1, size=shape)
    return kiln.tensor(a, dtype=dtype).double().numpy()


def close(got, want, dtype, tol=None):
    got = got.detach().double().cpu().numpy()
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err <= (tol or TOL[dtype]), f"relative error {err:.3g} for {dtype}"


def make(a, dtype, device, requires_grad=True):
    return kiln.tensor(a, dtype=dtype).to(device).requires_grad_(requires_grad)


def reference(x, w, b, g):
    """out, grad_x, grad_w, grad_b of linear in float64."""
    k, n = w.shape[1], w.shape[0]
    rows, grows = x.reshape(-1, k), g.reshape(-1, n)
    out = x @ w.T + (b if b is not None else 0)
    return out, (grows @ w).reshape(x.shape), grows.T @ rows, grows.sum(0)


def run(x, w, b, g, dtype, device):
    xs, ws = make(x, dtype, device), make(w, dtype, device)
    bs = make(b, dtype, device) if b is not None else None
    out = F.linear(xs, ws, bs)
    out.backward(kiln.tensor(g, dtype=dtype).to(device))
    return out, xs.grad, ws.grad, bs.grad if bs is not None else None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16, kiln.float32, kiln.float64])
@pytest.mark.parametrize("shape", [(40, 64), (3, 24, 64), (2, 3, 8, 64)], ids=["2d", "3d", "4d"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_forward_and_gradients_match_float64(device, dtype, shape, bias):
    x, w = data(shape, dtype), data((48, 64), dtype)
    b = data((48,), dtype) if bias else None
    g = data(shape[:-1] + (48,), dtype)
    got = run(x, w, b, g, dtype, device)
    want = reference(x, w, b, g)
    # float64 on CUDA is cuBLAS's without the epilogue: the composite.
    fused = device == "cpu" or dtype != kiln.float64
    assert (got[0].grad_fn.name() == FUSED) == fused, got[0].grad_fn.name()
    for a, e in zip(got, want):
        if e is not None and (bias or a is not got[3]):
            close(a, e, dtype)
    assert got[3] is None or got[3].shape == (48,)


@requires_gpu
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_tf32_is_honoured(bias):
    x, w, g = data((256, 512), kiln.float32), data((128, 512), kiln.float32), data(
        (256, 128), kiln.float32)
    b = data((128,), kiln.float32) if bias else None
    want = reference(x, w, b, g)
    exact = run(x, w, b, g, kiln.float32, "cuda")
    with tf32(True):
        fast = run(x, w, b, g, kiln.float32, "cuda")
    for e, a, f in zip(want, exact, fast):
        if a is None:
            continue
        close(a, e, kiln.float32)
        close(f, e, kiln.float32, TF32_TOL)
    # TF32 rounds the inputs to 10 mantissa bits: with 512 products per sum it shows.
    assert np.abs(fast[0].detach().cpu().numpy() - want[0]).max() > 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float32])
@pytest.mark.parametrize("k,n", [(3, 5), (5, 8), (8, 3)])
def test_sizes_cublaslt_declines_still_give_the_right_answer(device, dtype, k, n):
    # Leading dims of 3 or 5 elements are not 16-byte aligned: cuBLASLt declines, the
    # composite runs (on the CPU the fused kernel takes everything).
    x, w, b, g = data((7, k), dtype), data((n, k), dtype), data((n,), dtype), data((7, n), dtype)
    got, want = run(x, w, b, g, dtype, device), reference(x, w, b, g)
    for a, e in zip(got, want):
        close(a, e, dtype)
    aligned = k * dtype.itemsize % 16 == 0 and n * dtype.itemsize % 16 == 0
    assert (got[0].grad_fn.name() == FUSED) == (device == "cpu" or aligned)


@pytest.mark.parametrize("device", DEVICES)
def test_misaligned_views_fall_back(device):
    # A view starting one element into its storage is 2 bytes off 16-byte alignment.
    dtype = kiln.bfloat16
    base = data((16 * 64 + 1,), dtype)
    x = make(base, dtype, device)[1:].view(16, 64)
    w, b, g = data((32, 64), dtype), data((32,), dtype), data((16, 32), dtype)
    ws, bs = make(w, dtype, device), make(b, dtype, device)
    out = F.linear(x, ws, bs)
    out.backward(kiln.tensor(g, dtype=dtype).to(device))
    want = reference(base[1:].reshape(16, 64), w, b, g)
    close(out, want[0], dtype)
    close(ws.grad, want[2], dtype)
    close(bs.grad, want[3], dtype)
    assert (out.grad_fn.name() == FUSED) == (device == "cpu")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["transposed", "sliced", "permuted"])
def test_non_contiguous_inputs_and_weights(device, layout):
    dtype = kiln.float32
    x, w, b, g = data((6, 4, 32), dtype), data((16, 32), dtype), data((16,), dtype), data(
        (6, 4, 16), dtype)
    xs = make(x, dtype, device)
    ws = make(w, dtype, device)
    if layout == "transposed":  # 2-D input stored column by column, weight as w.T.T
        wt = make(np.ascontiguousarray(w.T), dtype, device)
        xin, win = xs.reshape(24, 32).t().contiguous().t(), wt.t()
        want = reference(x.reshape(24, 32), w, b, g.reshape(24, 16))
        grad = kiln.tensor(g.reshape(24, 16)).to(device)
    elif layout == "sliced":  # every other row of a wider batch: rows do not fold
        wide = make(np.concatenate([x, x], axis=1), dtype, device)
        xin, win = wide[:, ::2], ws
        want = reference(np.concatenate([x, x], axis=1)[:, ::2], w, b, g)
        grad = kiln.tensor(g).to(device)
    else:  # a permuted 3-D input
        xin, win = xs.permute(1, 0, 2), ws
        want = reference(x.transpose(1, 0, 2), w, b, g.transpose(1, 0, 2))
        grad = kiln.tensor(np.ascontiguousarray(g.transpose(1, 0, 2))).to(device)
    bs = make(b, dtype, device)
    out = F.linear(xin, win, bs)
    out.backward(grad)
    close(out, want[0], dtype)
    close(bs.grad, want[3], dtype)
    if layout == "transposed":
        close(wt.grad, want[2].T, dtype)
        assert wt.grad.is_contiguous()  # the view's gradient was made transposed
    else:
        close(ws.grad, want[2], dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("wanted", ["x", "w", "b", "wb", "xb"])
def test_only_the_wanted_gradients_are_computed(device, wanted):
    dtype = kiln.float32
    x, w, b, g = data((5, 32), dtype), data((16, 32), dtype), data((16,), dtype), data(
        (5, 16), dtype)
    xs, ws, bs = (make(a, dtype, device, name in wanted) for a, name in zip((x, w, b), "xwb"))
    out = F.linear(xs, ws, bs)
    assert out.grad_fn.name() == FUSED
    out.backward(kiln.tensor(g).to(device))
    want = reference(x, w, b, g)
    for t, name, e in zip((xs, ws, bs), "xwb", want[1:]):
        if name in wanted:
            close(t.grad, e, dtype)
        else:
            assert t.grad is None


def randn(*shape, device="cpu", requires_grad=False):
    return kiln.tensor(RNG.standard_normal(shape), dtype=kiln.float32).to(device).requires_grad_(
        requires_grad)


def test_no_graph_without_requires_grad_and_under_no_grad():
    x, w = randn(4, 32), randn(16, 32, requires_grad=True)
    assert F.linear(x, w.detach()).grad_fn is None
    with kiln.no_grad():
        assert F.linear(x, w).grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward(device):
    dtype = kiln.float32
    x, w, b = data((6, 32), dtype), data((16, 32), dtype), data((16,), dtype)
    xs, ws, bs = (make(a, dtype, device) for a in (x, w, b))
    out = F.linear(xs, ws, bs)
    assert out.grad_fn.name() == FUSED
    # L = sum(out^2): dL/dx = 2 out w, dL/dw = 2 out^T x, dL/db = 2 sum(out).
    gx, gw, gb = kiln.autograd.grad((out * out).sum(), [xs, ws, bs], create_graph=True)
    o = x @ w.T + b
    close(gx, 2 * o @ w, dtype)
    close(gw, 2 * o.T @ x, dtype)
    close(gb, 2 * o.sum(0), dtype)
    # sum(gb) = 2 sum_ij (x_i . w_j + b_j), whose gradient in w_j is 2 sum_i x_i: a second
    # derivative through the recorded backward (gradgradcheck below covers the rest).
    (gww,) = kiln.autograd.grad(gb.sum(), [ws])
    close(gww, np.tile(2 * x.sum(0), (16, 1)), dtype)


def test_gradcheck_and_gradgradcheck_in_float64():
    gradcheck(lambda x, w, b: F.linear(x, w, b), RNG.standard_normal((2, 3, 4)),
              RNG.standard_normal((5, 4)), RNG.standard_normal(5))
    gradcheck(lambda x, w: F.linear(x, w), RNG.standard_normal((3, 4)), RNG.standard_normal((2, 4)))
    ins = [kiln.tensor(RNG.standard_normal(s), requires_grad=True) for s in ((3, 4), (5, 4), (5,))]
    assert kiln.autograd.gradgradcheck(lambda x, w, b: F.linear(x, w, b), ins)


def test_what_keeps_the_composite():
    x, w = randn(3, 4, requires_grad=True), randn(5, 4, requires_grad=True)
    # 1-D input, 1-D weight and a broadcast bias keep matmul + add (PyTorch's semantics).
    assert F.linear(x[0], w).grad_fn.name() != FUSED
    assert F.linear(x, w[0]).shape == (3,)
    assert F.linear(x, w, kiln.ones(1)).grad_fn.name() == "AddBackward0"
    # Mixed dtypes keep the composite's error.
    with pytest.raises(RuntimeError, match="same dtype"):
        F.linear(x, w.double())


@requires_gpu
@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16])
def test_autocast_runs_the_fused_kernel(dtype):
    x = randn(8, 64, device="cuda", requires_grad=True)
    w = randn(32, 64, device="cuda", requires_grad=True)
    b = randn(32, device="cuda", requires_grad=True)
    with kiln.autocast("cuda", dtype=dtype):
        out = F.linear(x, w, b)
    assert out.dtype == dtype and out.grad_fn.name() == FUSED
    out.float().sum().backward()
    assert x.grad.dtype == kiln.float32 and b.grad.dtype == kiln.float32
    close(b.grad, np.full(32, 8.0), kiln.float32)


@requires_gpu
@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16, kiln.float32])
@pytest.mark.parametrize("shape", [(2, 100, 256), (333, 512)], ids=["3d", "2d"])
def test_against_torch(dtype, shape):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_NAME[dtype])
    n, k = 384, shape[-1]
    x, w, b = RNG.uniform(-1, 1, shape), RNG.uniform(-1, 1, (n, k)), RNG.uniform(-1, 1, n)
    g = RNG.uniform(-1, 1, shape[:-1] + (n,))
    ks = [make(a, dtype, "cuda") for a in (x, w, b)]
    ts = [torch.tensor(a, device="cuda").to(tdt).requires_grad_(True) for a in (x, w, b)]
    out = F.linear(*ks)
    tout = torch.nn.functional.linear(*ts)
    assert out.grad_fn.name() == FUSED
    out.backward(kiln.tensor(g, dtype=dtype).to("cuda"))
    tout.backward(torch.tensor(g, device="cuda").to(tdt))
    ref = tout.detach().double().cpu().numpy()
    close(out, ref, dtype, 2 * TOL[dtype])
    for a, t in zip(ks, ts):
        close(a.grad, t.grad.double().cpu().numpy(), dtype, 2 * TOL[dtype])


@requires_gpu
def test_nn_linear_training_step_is_sync_free():
    with kiln.random.fork_rng():  # the layer's initialization leaves the global generator be
        layer = kiln.nn.Linear(64, 48).to("cuda")
    x = randn(16, 64, device="cuda")
    kiln.cuda.set_sync_debug_mode("error")
    try:
        out = layer(x)
        out.sum().backward()
    finally:
        kiln.cuda.set_sync_debug_mode("default")
    assert out.grad_fn.name() == FUSED
    close(layer.bias.grad, np.full(48, 16.0), kiln.float32)
