"""The fused batch_norm and direct pooling CUDA kernels against the CPU kernels and (where
installed) PyTorch, forward, running stats and every gradient, in NCHW and channels-last."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, rand, requires_gpu

TOL = {kiln.float64: 1e-10, kiln.float32: 1e-4, kiln.float16: 1e-2, kiln.bfloat16: 6e-2}
DTYPES = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]
DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


def make(a, dtype, device, channels_last=False, requires_grad=False):
    """a's values [N, C, *S] as a kiln leaf on device, memory in [N, *S, C] order if asked."""
    if channels_last:
        perm = (0,) + tuple(range(2, a.ndim)) + (1,)
        back = (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))
        t = kiln.tensor(np.ascontiguousarray(a.transpose(perm)), dtype=dtype).to(device)
        t = t.permute(*back)
    else:
        t = kiln.tensor(a, dtype=dtype).to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def close(got, want, dtype, scale=1.0):
    tol = TOL[dtype] * scale
    assert_close(got.detach().cpu().double(), want.detach().cpu().double().numpy(), atol=tol,
                 rtol=tol)


def last_is_channels(t):
    return t.dim() < 3 or t.stride(1) == 1 or t.shape[1] == 1


# Shapes cover the column kernel (2-d, channels-last), channel counts off the vector width and
# the 32-channel tile, and enough elements per channel to split into chunks.
BN_SHAPES = [(64, 3), (4096, 40), (7, 5, 9), (16, 32, 8, 8), (3, 37, 5, 7), (2, 6, 3, 4, 5),
             (256, 8, 4, 4), (128, 16, 32, 32)]
BN_CASES = [(s, False) for s in BN_SHAPES] + [(s, True) for s in BN_SHAPES if len(s) > 2]


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,cl", BN_CASES)
def test_batch_norm_training_matches_cpu(shape, dtype, cl):
    c = shape[1]
    x, g = rand(*shape, low=-3, high=5), rand(*shape)
    w, b = rand(c), rand(c)
    param = kiln.float64 if dtype == kiln.float64 else kiln.float32
    outs = {}
    for dev in ("cpu", "cuda"):
        xt = make(x, dtype, dev, cl, True)
        wt, bt = make(w, param, dev, requires_grad=True), make(b, param, dev, requires_grad=True)
        rm, rv = make(np.linspace(-1, 1, c), param, dev), make(np.linspace(0.5, 2, c), param, dev)
        y = F.batch_norm(xt, rm, rv, wt, bt, True, 0.3, 1e-3)
        assert y.dtype == dtype and y.device.type == dev
        if cl:
            assert last_is_channels(y)
        grads = kiln.autograd.grad(y, [xt, wt, bt], make(g, dtype, dev))
        outs[dev] = (y, rm, rv) + tuple(grads)
    for k, (got, want) in enumerate(zip(outs["cuda"], outs["cpu"])):
        close(got, want, dtype, 4 if k >= 3 else 1)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cl", [False, True])
def test_batch_norm_eval_matches_cpu(dtype, cl):
    shape = (5, 6, 7, 3)
    x, g = rand(*shape), rand(*shape)
    rm, rv, w, b = rand(6), rand(6, low=0.5, high=2), rand(6), rand(6)
    param = kiln.float64 if dtype == kiln.float64 else kiln.float32
    outs = {}
    for dev in ("cpu", "cuda"):
        xt = make(x, dtype, dev, cl, True)
        wt, bt = make(w, param, dev, requires_grad=True), make(b, param, dev, requires_grad=True)
        y = F.batch_norm(xt, make(rm, param, dev), make(rv, param, dev), wt, bt, False)
        outs[dev] = (y,) + tuple(kiln.autograd.grad(y, [xt, wt, bt], make(g, dtype, dev)))
    for got, want in zip(outs["cuda"], outs["cpu"]):
        close(got, want, dtype, 4)


@requires_gpu
def test_batch_norm_cuda_large_mean_and_no_sync_stats():
    x = 500.0 + rand(32, 4, 16, 16)
    y = F.batch_norm(make(x, kiln.float32, "cuda"), None, None, training=True)
    axes = (0, 2, 3)
    want = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    assert_close(y.cpu(), want, atol=2e-3, rtol=2e-3)


@requires_gpu
def test_batchnorm_module_cuda_momentum_none():
    m = kiln.nn.BatchNorm2d(4, momentum=None).to("cuda")
    xs = [rand(3, 4, 5, 5) for _ in range(3)]
    for a in xs:
        m(make(a, kiln.float32, "cuda"))
    assert_close(m.running_mean.cpu(), np.mean([a.mean((0, 2, 3)) for a in xs], 0), atol=1e-5,
                 rtol=1e-5)


POOLS = {
    "max2d": lambda t: F.max_pool2d(t, 3, 2, 1, 1, True, True),
    "max2d_dil": lambda t: F.max_pool2d(t, (2, 3), (1, 2), (1, 1), (2, 1), False, True),
    "max2d_k2": lambda t: F.max_pool2d(t, 2, return_indices=True),
    # Disjoint windows (stride >= span) take the CUDA scatter backward; padded, ceil_mode and
    # dilated ones too.
    "max2d_k3_disjoint": lambda t: F.max_pool2d(t, 3, 3, 1, 1, True, True),
    "max2d_dil_disjoint": lambda t: F.max_pool2d(t, 2, (3, 4), 0, (2, 3), True, True),
    "max1d_disjoint": lambda t: F.max_pool1d(t[:, :, 2], 2, 2, 1, 1, False, True),
    "max1d": lambda t: F.max_pool1d(t[:, :, 0], 3, 2, 1, 2, True, True),
    "avg2d": lambda t: (F.avg_pool2d(t, 3, 2, 1, True, False),),
    "avg2d_pad": lambda t: (F.avg_pool2d(t, 3, 1, 1, False, True),),
    "avg2d_div": lambda t: (F.avg_pool2d(t, 2, 1, 1, False, True, 3),),
    "avg1d": lambda t: (F.avg_pool1d(t[:, :, 1], 3, 2, 1, True, True),),
    "adaptive": lambda t: (F.adaptive_avg_pool2d(t, (3, 5)),),
    "adaptive_big": lambda t: (F.adaptive_avg_pool2d(t, (11, 4)),),
    "global": lambda t: (F.adaptive_avg_pool2d(t, 1),),
}


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(POOLS))
@pytest.mark.parametrize("cl", [False, True])
def test_pooling_matches_cpu(name, dtype, cl):
    x = rand(3, 5, 9, 8)
    g_values = rand(*POOLS[name](make(x, dtype, "cpu"))[0].shape)  # one grad_out for both
    outs = {}
    for dev in ("cpu", "cuda"):
        xt = make(x, dtype, dev, cl, True)
        res = POOLS[name](xt)
        g = make(g_values, dtype, dev)
        outs[dev] = tuple(res) + tuple(kiln.autograd.grad(res[0], [xt], g))
    for got, want in zip(outs["cuda"], outs["cpu"]):
        if got.dtype == kiln.int64:
            np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
        else:
            close(got, want, dtype, 2)


@requires_gpu
def test_pooling_cuda_cnn_sizes():
    x = rand(64, 32, 32, 32).astype(np.float32)
    for cl in (False, True):
        xt = make(x, kiln.float32, "cuda", cl, True)
        y = F.max_pool2d(xt, 2)
        assert_close(y.cpu(), x.reshape(64, 32, 16, 2, 16, 2).max((3, 5)), atol=0, rtol=0)
        (gx,) = kiln.autograd.grad(y.sum(), [xt])
        assert float(gx.sum().item()) == 64 * 32 * 16 * 16


# --- against PyTorch ---------------------------------------------------------------------------


def torch_pair(a, dtype_name, device, torch, cl):
    kt = make(a, getattr(kiln, dtype_name), device, cl, True)
    tt = torch.tensor(a, dtype=getattr(torch, dtype_name), device=device)
    if cl:
        fmt = torch.channels_last if a.ndim == 4 else torch.channels_last_3d
        tt = tt.contiguous(memory_format=fmt)
    tt.requires_grad_(True)
    return kt, tt


def close_torch(k, t, dtype_name, scale=1.0):
    tol = TOL[getattr(kiln, dtype_name)] * scale
    assert_close(k.detach().cpu().double(), t.detach().cpu().double().numpy(), atol=tol, rtol=tol)


# Half batch norm on the CPU is not a PyTorch workload (autocast runs it on CUDA): float32 there.
DEVICE_DTYPES = [("cpu", "float32")] + [pytest.param("cuda", d, marks=requires_gpu)
                                        for d in ("float32", "float16", "bfloat16")]


@pytest.mark.parametrize("device,dtype_name", DEVICE_DTYPES)
@pytest.mark.parametrize("shape,cl", [((16, 8, 6, 6), False), ((16, 8, 6, 6), True),
                                       ((32, 5), False), ((4, 3, 2, 5, 3), True)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(device, dtype_name, shape, cl, training):
    torch = pytest.importorskip("torch")
    c = shape[1]
    x, g, w, b = rand(*shape), rand(*shape), rand(c), rand(c)
    rm0, rv0 = rand(c), rand(c, low=0.5, high=2)
    kx, tx = torch_pair(x, dtype_name, device, torch, cl)
    kw, kb = (make(a, kiln.float32, device, requires_grad=True) for a in (w, b))
    tw, tb = (torch.tensor(a, dtype=torch.float32, device=device, requires_grad=True)
              for a in (w, b))
    krm, krv = make(rm0, kiln.float32, device), make(rv0, kiln.float32, device)
    trm, trv = (torch.tensor(a, dtype=torch.float32, device=device) for a in (rm0, rv0))
    ky = F.batch_norm(kx, krm, krv, kw, kb, training, 0.2, 1e-4)
    ty = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, training, 0.2, 1e-4)
    assert ky.dtype == getattr(kiln, dtype_name)
    close_torch(ky, ty, dtype_name, 2)
    close_torch(krm, trm, "float32")
    close_torch(krv, trv, "float32")
    kg = kiln.autograd.grad(ky, [kx, kw, kb], make(g, getattr(kiln, dtype_name), device))
    tg = torch.autograd.grad(ty, [tx, tw, tb], torch.tensor(g, dtype=ty.dtype, device=device))
    for i, (a, t) in enumerate(zip(kg, tg)):
        if i == 0:
            close_torch(a, t, dtype_name, 8)
        else:
            # grad_weight / grad_bias are sums over N*H*W half-precision products whose
            # cancellation magnifies rounding: compare relative to the vector's magnitude.
            want = t.detach().cpu().double().numpy()
            tol = TOL[getattr(kiln, dtype_name)] * max(1.0, float(np.abs(want).max()))
            assert_close(a.detach().cpu().double(), want, atol=tol, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cl", [False, True])
@pytest.mark.parametrize("name", ["max2d", "max2d_dil", "max2d_k3_disjoint", "avg2d",
                                  "avg2d_pad", "avg2d_div", "adaptive", "global"])
def test_pooling_matches_torch(device, cl, name):
    torch = pytest.importorskip("torch")
    x = rand(3, 5, 9, 8)
    kx, tx = torch_pair(x, "float32", device, torch, cl)
    kres = POOLS[name](kx)
    tfn = {
        "max2d": lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1, 1, True, True),
        "max2d_dil": lambda t: torch.nn.functional.max_pool2d(t, (2, 3), (1, 2), (1, 1), (2, 1),
                                                              False, True),
        "max2d_k3_disjoint": lambda t: torch.nn.functional.max_pool2d(t, 3, 3, 1, 1, True, True),
        "avg2d": lambda t: (torch.nn.functional.avg_pool2d(t, 3, 2, 1, True, False),),
        "avg2d_pad": lambda t: (torch.nn.functional.avg_pool2d(t, 3, 1, 1, False, True),),
        "avg2d_div": lambda t: (torch.nn.functional.avg_pool2d(t, 2, 1, 1, False, True, 3),),
        "adaptive": lambda t: (torch.nn.functional.adaptive_avg_pool2d(t, (3, 5)),),
        "global": lambda t: (torch.nn.functional.adaptive_avg_pool2d(t, 1),),
    }[name]
    tres = tfn(tx)
    for k, t in zip(kres, tres):
        if t.dtype == torch.int64:
            np.testing.assert_array_equal(k.cpu().numpy(), t.cpu().numpy())
        else:
            close_torch(k, t, "float32")
    g = rand(*tres[0].shape)
    (kg,) = kiln.autograd.grad(kres[0], [kx], make(g, kiln.float32, device))
    # PyTorch 2.11's CUDA channels-last average-pooling backward is wrong with padding > 0
    # (pytorch/pytorch#188344, fixed after 2.11): there its CPU result is the reference.
    if device == "cuda" and cl and name.startswith("avg"):
        _, tx = torch_pair(x, "float32", "cpu", torch, cl)
        tres = tfn(tx)
    (tg,) = torch.autograd.grad(tres[0], [tx], torch.tensor(g, dtype=torch.float32,
                                                            device=tx.device))
    close_torch(kg, tg, "float32")


@requires_gpu
def test_double_backward_matches_cpu():
    x, w, gy = rand(4, 3, 5, 5), rand(3), rand(4, 3, 5, 5)
    fns = [lambda t, wt: F.batch_norm(t, None, None, wt, None, True),
           lambda t, wt: F.max_pool2d(t, 3, 1, 1) * wt.view(1, 3, 1, 1),
           lambda t, wt: F.avg_pool2d(t, 3, 2, 1) * wt.view(1, 3, 1, 1)]
    for fn in fns:
        outs = {}
        for dev in ("cpu", "cuda"):
            xt = make(x, kiln.float64, dev, requires_grad=True)
            wt = make(w, kiln.float64, dev, requires_grad=True)
            y = fn(xt, wt)
            g = make(gy[:, :, :y.shape[2], :y.shape[3]], kiln.float64, dev)
            gx, gw = kiln.autograd.grad((y * g).sum(), [xt, wt], create_graph=True)
            outs[dev] = kiln.autograd.grad((gx * gx).sum() + (gw * gw).sum(), [xt, wt],
                                           allow_unused=True)
        for got, want in zip(outs["cuda"], outs["cpu"]):
            if want is None:
                assert got is None
            else:
                close(got, want, kiln.float64)
