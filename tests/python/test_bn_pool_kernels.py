"""The fused batch_norm and direct pooling kernels (Note [Fused batch norm], Note [Direct pooling
kernels]): channels-last inputs, running stats, half inputs with float32 parameters, agreement
with the composition, and double backward, against NumPy."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, gradcheck, rand, to_kiln


def channels_last(a, dtype=None, requires_grad=False):
    """A kiln tensor with a's values [N, C, *S] and memory in [N, *S, C] order."""
    perm = (0,) + tuple(range(2, a.ndim)) + (1,)
    back = (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))
    t = to_kiln(np.ascontiguousarray(a.transpose(perm)), dtype=dtype).permute(*back)
    if requires_grad:
        t.requires_grad_(True)
    return t


def is_channels_last(t):
    """Whether t's strides put the channel dim innermost, then the spatial dims in order."""
    order = [1] + list(range(t.dim() - 1, 1, -1)) + [0]
    expect = 1
    for d in order:
        if t.shape[d] != 1 and t.stride(d) != expect:
            return False
        expect *= t.shape[d]
    return True


def bn_ref(x, w, b, eps, mean=None, var=None):
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean = x.mean(axis=axes) if mean is None else mean
    var = x.var(axis=axes) if var is None else var
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) + \
        b.reshape(shape)


def bn_grads_ref(x, w, g, eps):
    """Training-mode gradients of batch norm (float64), for x, weight and bias."""
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    invstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean) * invstd
    gy = g * w.reshape(shape)
    gx = invstd * (gy - gy.mean(axis=axes, keepdims=True) -
                   xhat * (gy * xhat).mean(axis=axes, keepdims=True))
    return gx, (g * xhat).sum(axis=axes), g.sum(axis=axes)


@pytest.mark.parametrize("shape", [(4, 3, 5), (3, 4, 5, 6), (2, 3, 2, 3, 4)])
def test_batch_norm_channels_last_values_layout_and_grads(shape):
    x, w, b, g = rand(*shape), rand(shape[1]), rand(shape[1]), rand(*shape)
    xt = channels_last(x, requires_grad=True)
    wt, bt = to_kiln(w, requires_grad=True), to_kiln(b, requires_grad=True)
    y = F.batch_norm(xt, None, None, wt, bt, True, 0.1, 1e-4)
    assert is_channels_last(y)
    assert_close(y, bn_ref(x, w, b, 1e-4))
    # autograd.grad returns the node's gradient as computed (.grad accumulation clones it).
    got = kiln.autograd.grad(y, [xt, wt, bt], to_kiln(g))
    assert is_channels_last(got[0])
    for a, want in zip(got, bn_grads_ref(x, w, g, 1e-4)):
        assert_close(a, want, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_batch_norm_running_stats_and_eval(layout):
    x = rand(6, 4, 3, 5)
    make = {"contiguous": lambda a: to_kiln(a), "channels_last": channels_last,
            "strided": lambda a: to_kiln(np.ascontiguousarray(a.transpose(2, 0, 1, 3))).permute(
                1, 2, 0, 3)}[layout]
    rm0, rv0 = rand(4), rand(4, low=0.5, high=2.0)
    rm, rv = to_kiln(rm0.astype(np.float32)), to_kiln(rv0.astype(np.float32))
    version = rm._version
    F.batch_norm(make(x).float(), rm, rv, None, None, True, 0.25, 1e-5)
    n = x.size // 4
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    assert_close(rm, 0.75 * rm0 + 0.25 * mean, atol=1e-5, rtol=1e-5)
    assert_close(rv, 0.75 * rv0 + 0.25 * var * n / (n - 1), atol=1e-5, rtol=1e-5)
    assert rm._version > version
    y = F.batch_norm(make(x), to_kiln(rm0), to_kiln(rv0), to_kiln(rv0), to_kiln(rm0), False)
    assert_close(y, bn_ref(x, rv0, rm0, 1e-5, rm0, rv0))
    # Running stats of another dtype and a non-contiguous view are written back.
    buf = to_kiln(np.stack([rm0, np.zeros(4)], 1))
    F.batch_norm(make(x), buf[:, 0], None, training=True, momentum=0.5)
    assert_close(buf[:, 0], 0.5 * rm0 + 0.5 * mean)
    assert_close(buf[:, 1], np.zeros(4))


def test_batch_norm_large_mean_keeps_variance():
    x = 1000.0 + rand(8, 3, 4, 4) * 1e-2
    y = F.batch_norm(to_kiln(x, dtype=kiln.float32), None, None, training=True, eps=0.0)
    want = bn_ref(x, np.ones(3), np.zeros(3), 0.0)
    assert_close(y, want, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("cl", [False, True])
def test_batch_norm_half_input_with_float_params(dtype, cl):
    x, w, b, g = rand(4, 3, 5, 6), rand(3), rand(3), rand(4, 3, 5, 6)
    x = x.astype(np.float32).astype(np.float64)
    xt = channels_last(x, dtype=dtype) if cl else to_kiln(x, dtype=dtype)
    xt.requires_grad_(True)
    wt = to_kiln(w, dtype=kiln.float32, requires_grad=True)
    bt = to_kiln(b, dtype=kiln.float32, requires_grad=True)
    rm, rv = kiln.zeros(3), kiln.ones(3)
    y = F.batch_norm(xt, rm, rv, wt, bt, True, 0.1, 1e-5)
    assert y.dtype == dtype and is_channels_last(y) == cl
    xq = xt.detach().float().numpy().astype(np.float64)  # the half-rounded input
    tol = 2e-2 if dtype == kiln.float16 else 8e-2
    assert_close(y.float(), bn_ref(xq, w, b, 1e-5), atol=tol, rtol=tol)
    assert_close(rm, 0.1 * xq.mean((0, 2, 3)), atol=1e-5, rtol=1e-5)
    y.backward(to_kiln(g, dtype=dtype))
    assert xt.grad.dtype == dtype and wt.grad.dtype == kiln.float32
    gq = to_kiln(g, dtype=dtype).float().numpy().astype(np.float64)
    gx, gw, gb = bn_grads_ref(xq, w, gq, 1e-5)
    assert_close(xt.grad.float(), gx, atol=tol, rtol=tol)
    assert_close(wt.grad, gw, atol=1e-3, rtol=1e-3)
    assert_close(bt.grad, gb, atol=1e-3, rtol=1e-3)


def test_batch_norm_fused_matches_composition():
    x, w, b = rand(5, 4, 3, 3), rand(4), rand(4)
    xt, wt, bt = (to_kiln(a, requires_grad=True) for a in (x, w, b))
    y = F.batch_norm(xt, None, None, wt, bt, True, 0.1, 1e-3)
    xc, wc, bc = (to_kiln(a, requires_grad=True) for a in (x, w, b))
    var, mean = kiln.var_mean(xc, (0, 2, 3), correction=0, keepdim=True)
    yc = (xc - mean) / kiln.sqrt(var + 1e-3) * wc.view(1, 4, 1, 1) + bc.view(1, 4, 1, 1)
    assert_close(y, yc.detach().numpy(), atol=1e-12, rtol=1e-12)
    g = to_kiln(rand(5, 4, 3, 3))
    y.backward(g)
    yc.backward(g)
    for fused, comp in ((xt, xc), (wt, wc), (bt, bc)):
        assert_close(fused.grad, comp.grad.numpy(), atol=1e-12, rtol=1e-12)


def test_batch_norm_double_backward():
    x, w, b = rand(3, 2, 3), rand(2), rand(2)
    gy = to_kiln(rand(3, 2, 3))

    def first_grads(training):
        rm, rv = kiln.tensor([0.5, -0.2], dtype=kiln.float64), kiln.tensor([1.5, 0.7], dtype=kiln.float64)

        def fn(x, w, b):
            y = F.batch_norm(x, rm, rv, w, b, training)
            return kiln.autograd.grad((y * gy).sum(), [x, w, b], create_graph=True)
        return fn

    gradcheck(first_grads(True), x, w, b)
    gradcheck(first_grads(False), x, w, b)
    xc = channels_last(x[..., None])
    assert_close(F.batch_norm(xc, None, None, training=True),
                 bn_ref(x[..., None], np.ones(2), np.zeros(2), 1e-5))


def max_pool_ref(x, k, s):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = x[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
    return out


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32, kiln.float16, kiln.bfloat16])
def test_pooling_channels_last_matches_contiguous(dtype):
    x = rand(2, 5, 7, 6)
    xc = to_kiln(x, dtype=dtype, requires_grad=True)
    xl = channels_last(x, dtype=dtype, requires_grad=True)
    ops = [lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True),
           lambda t: F.max_pool2d(t, (2, 3), (1, 2), (1, 1), (2, 1), return_indices=True),
           lambda t: (F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False),),
           lambda t: (F.avg_pool2d(t, 2, 1, 1, divisor_override=3),),
           lambda t: (F.adaptive_avg_pool2d(t, (3, 4)),),
           lambda t: (F.adaptive_avg_pool2d(t, 1),)]
    for op in ops:
        a, b = op(xc), op(xl)
        assert is_channels_last(b[0])
        # Sums (averages) may add in another order per layout: a float32 rounding apart.
        tol = {kiln.float64: 1e-12, kiln.float32: 1e-6, kiln.float16: 2e-3, kiln.bfloat16: 1e-2}[dtype]
        for u, v in zip(a, b):
            assert_close(v.float(), u.float().detach().numpy(), atol=tol, rtol=tol)
        g = rand(*a[0].shape)
        xc.grad = xl.grad = None
        a[0].backward(to_kiln(g, dtype=dtype))
        b[0].backward(to_kiln(g, dtype=dtype))
        assert_close(xl.grad.float(), xc.grad.float().numpy(), atol=1e-12, rtol=1e-12)
    assert_close(F.max_pool2d(xl, 2).float(), max_pool_ref(xl.detach().float().numpy(), 2, 2))


def test_max_pool1d_channels_last_and_half():
    x = rand(3, 4, 9)
    xl = channels_last(x)
    out, idx = F.max_pool1d(xl, 3, 2, 1, return_indices=True)
    want, want_idx = F.max_pool1d(to_kiln(x), 3, 2, 1, return_indices=True)
    assert_close(out, want.numpy())
    np.testing.assert_array_equal(idx.numpy(), want_idx.numpy())
    half = F.avg_pool1d(to_kiln(x, dtype=kiln.float16), 3, 1, 1)
    assert half.dtype == kiln.float16
    assert_close(half.float(), F.avg_pool1d(to_kiln(x), 3, 1, 1).numpy(), atol=1e-2, rtol=1e-2)


def test_max_pool_nan_wins_and_gradient_goes_to_it():
    x = rand(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    xt = to_kiln(x, requires_grad=True)
    out, idx = F.max_pool2d(xt, 2, return_indices=True)
    assert np.isnan(out.detach().numpy()[0, 0, 0, 1]) and idx.numpy()[0, 0, 0, 1] == 6
    out.sum().backward()
    assert xt.grad.numpy()[0, 0, 1, 2] == 1 and xt.grad.numpy().sum() == 4


def test_pooling_double_backward():
    x = rand(1, 2, 5, 4)
    for pool in (lambda t: F.max_pool2d(t, 2, 1, 1, ceil_mode=True),
                 lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False),
                 lambda t: F.adaptive_avg_pool2d(t, (2, 3))):
        gy = to_kiln(rand(*pool(to_kiln(x)).shape))

        def fn(t, gy=gy, pool=pool):
            (gx,) = kiln.autograd.grad((pool(t) * gy).sum(), [t], create_graph=True)
            return (gx * gx).sum()
        gradcheck(fn, x)
        # The input gradient is linear in grad_out, with the forward as its own gradient.
        gradcheck(lambda g, pool=pool: _vjp(pool, x, g), rand(*gy.shape))


def _vjp(pool, x, g):
    t = to_kiln(x, requires_grad=True)
    (gx,) = kiln.autograd.grad(pool(t), [t], g, create_graph=True)
    return gx
