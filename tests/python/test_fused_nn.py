"""Fused softmax / log_softmax, layer_norm and cross_entropy kernels (CPU) against float64
NumPy references, forward and backward, plus gradcheck and double backward through the
composite backward they switch to under create_graph."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, gradcheck, noncontig, rand

HALF_TOL = {kiln.float16: 2e-3, kiln.bfloat16: 2e-2}


# --- NumPy references ---------------------------------------------------------

def np_softmax(x, axis, log=False):
    shifted = x - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return shifted - lse if log else np.exp(shifted - lse)


def np_softmax_grad(y, g, axis, log=False):
    if log:
        return g - np.exp(y) * g.sum(axis=axis, keepdims=True)
    return y * (g - (g * y).sum(axis=axis, keepdims=True))


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    xhat = (x - mu) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    y = xhat * (1 if w is None else w) + (0 if b is None else b)
    return y, xhat, 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def np_layer_norm_grads(x, k, g, w=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    batch = tuple(range(x.ndim - k))
    _, xhat, rstd = np_layer_norm(x, k, eps=eps)
    gy = g * (1 if w is None else w)
    gx = rstd * (gy - gy.mean(axis=axes, keepdims=True)
                 - xhat * (gy * xhat).mean(axis=axes, keepdims=True))
    return gx, (g * xhat).sum(axis=batch), g.sum(axis=batch)


def np_cross_entropy_rows(x, t, weight=None, ignore_index=-100):
    """Per-target loss, the row weights and d(loss_r)/dx for x [M, C], t [M]."""
    c = x.shape[1]
    p = np_softmax(x, 1)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    w = (np.ones(c) if weight is None else weight)[safe] * valid
    loss = -np.log(p[np.arange(len(t)), safe]) * w
    grad = p.copy()
    grad[np.arange(len(t)), safe] -= 1
    grad *= w[:, None]
    return loss, w, grad


# --- softmax / log_softmax ------------------------------------------------------

SOFTMAX_CASES = [((1, 1), -1), ((1, 7), 1), ((5, 1), 1), ((3, 1000), -1), ((2, 5000), 1),
                 ((1, 40000), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((7,), 0)]


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
def test_softmax_forward_backward(shape, dim, log):
    fn = kiln.log_softmax if log else kiln.softmax
    a = rand(*shape, low=-5, high=5)
    g = rand(*shape)
    for dtype in (kiln.float32, kiln.float64):
        x = kiln.tensor(a, dtype=dtype, requires_grad=True)
        y = fn(x, dim)
        assert y.is_contiguous()
        assert_close(y, np_softmax(a, dim, log), dtype)
        (y * kiln.tensor(g, dtype=dtype)).sum().backward()
        assert_close(x.grad, np_softmax_grad(np_softmax(a, dim, log), g, dim, log), dtype,
                     atol=1e-5 if dtype == kiln.float32 else None)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_noncontiguous_and_extremes(log):
    fn = kiln.log_softmax if log else kiln.softmax
    a = rand(6, 9, low=-30, high=30)
    for dim in (0, 1, -1):
        assert_close(fn(noncontig(a), dim), np_softmax(a, dim, log))
    a[1, :] = -np.inf
    a[2, 3] = np.nan
    a[3, 4] = np.inf
    a[0, 0] = -np.inf
    y = fn(kiln.tensor(a), 1).numpy()
    assert np.isnan(y[1:4]).all()
    assert_close(kiln.tensor(y[[0, 4, 5]]), np_softmax(a[[0, 4, 5]], 1, log))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_half_types(dtype, log):
    fn = kiln.log_softmax if log else kiln.softmax
    a = rand(4, 3000, low=-4, high=4)
    x = kiln.tensor(a, dtype=dtype, requires_grad=True)
    exact = kiln.tensor(a, dtype=dtype).double().numpy()  # the rounded input, in float64
    y = fn(x, -1)
    assert y.dtype == dtype
    tol = HALF_TOL[dtype] * (8 if log else 1)
    assert_close(y.float(), np_softmax(exact, 1, log), atol=tol, rtol=tol)
    g = rand(4, 3000)
    (y.float() * kiln.tensor(g, dtype=kiln.float32)).sum().backward()
    ref = np_softmax_grad(np_softmax(exact, 1, log), g, 1, log)
    assert_close(x.grad.float(), ref, atol=tol * 8, rtol=tol * 8)


def test_softmax_dtype_argument_and_edge_shapes():
    a = rand(3, 4)
    y = kiln.softmax(kiln.tensor(a, dtype=kiln.float32), 1, dtype=kiln.float64)
    assert y.dtype == kiln.float64
    assert_close(y, np_softmax(a.astype(np.float32).astype(np.float64), 1))
    assert_close(kiln.softmax(kiln.tensor(2.5), 0), np.float64(1.0))
    assert_close(kiln.log_softmax(kiln.tensor(2.5), -1), np.float64(0.0))
    assert kiln.softmax(kiln.zeros(0, 3), 1).shape == (0, 3)
    assert kiln.softmax(kiln.zeros(3, 0), 1).shape == (3, 0)
    with pytest.raises(NotImplementedError, match=r"\[softmax\]"):
        kiln.softmax(kiln.tensor([1, 2, 3]), 0)
    with pytest.raises(IndexError):
        kiln.softmax(kiln.tensor(a), 2)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradcheck_and_double_backward(log):
    fn = kiln.log_softmax if log else kiln.softmax
    gradcheck(lambda x: fn(x, 1), rand(2, 3))
    gradcheck(lambda x: fn(x, 0), rand(3, 2, 2))
    w = kiln.tensor(rand(2, 3))
    # The gradient itself, differentiated again (create_graph) by finite differences.
    gradcheck(lambda x: kiln.autograd.grad((fn(x, 1) * w).sum(), [x], create_graph=True)[0],
              rand(2, 3))


# --- layer_norm -------------------------------------------------------------------

LN_CASES = [((4, 1), (1,)), ((1, 7), (7,)), ((3, 1000), (1000,)), ((2, 5000), (5000,)),
            ((1, 40000), (40000,)), ((2, 3, 4, 5), (4, 5)), ((6,), (6,))]


@pytest.mark.parametrize("affine", ["none", "weight", "both", "bias"])
@pytest.mark.parametrize("shape,norm", LN_CASES)
def test_layer_norm_forward_backward(shape, norm, affine):
    a = rand(*shape, low=-3, high=5)
    g = rand(*shape)
    w = rand(*norm) if affine in ("weight", "both") else None
    b = rand(*norm) if affine in ("bias", "both") else None
    for dtype in (kiln.float32, kiln.float64):
        x = kiln.tensor(a, dtype=dtype, requires_grad=True)
        wt = None if w is None else kiln.tensor(w, dtype=dtype, requires_grad=True)
        bt = None if b is None else kiln.tensor(b, dtype=dtype, requires_grad=True)
        y = F.layer_norm(x, norm, wt, bt)
        tol = 1e-4 if dtype == kiln.float32 else None
        assert_close(y, np_layer_norm(a, len(norm), w, b)[0], dtype, atol=tol, rtol=tol)
        (y * kiln.tensor(g, dtype=dtype)).sum().backward()
        gx, gw, gb = np_layer_norm_grads(a, len(norm), g, w)
        tol = 2e-3 if dtype == kiln.float32 else 1e-8
        assert_close(x.grad, gx, dtype, atol=tol, rtol=tol)
        if wt is not None:
            assert_close(wt.grad, gw, dtype, atol=tol, rtol=tol)
        if bt is not None:
            assert_close(bt.grad, gb, dtype, atol=tol, rtol=tol)


def test_layer_norm_partial_requires_grad():
    a, w, b, g = rand(4, 6), rand(6), rand(6), rand(4, 6)
    gx, gw, gb = np_layer_norm_grads(a, 1, g, w)
    x, wt, bt = kiln.tensor(a), kiln.tensor(w, requires_grad=True), kiln.tensor(b)
    (F.layer_norm(x, (6,), wt, bt) * kiln.tensor(g)).sum().backward()
    assert_close(wt.grad, gw)
    assert x.grad is None and bt.grad is None
    x, wt, bt = kiln.tensor(a, requires_grad=True), kiln.tensor(w), kiln.tensor(b, requires_grad=True)
    (F.layer_norm(x, (6,), wt, bt) * kiln.tensor(g)).sum().backward()
    assert_close(x.grad, gx)
    assert_close(bt.grad, gb)
    assert wt.grad is None


def test_layer_norm_noncontiguous_and_constant_rows():
    a = rand(5, 8)
    assert_close(F.layer_norm(noncontig(a), (8,)), np_layer_norm(a, 1)[0], atol=1e-8)
    c = np.full((2, 6), 3.0)
    assert_close(F.layer_norm(kiln.tensor(c), (6,)), np.zeros((2, 6)))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_layer_norm_half_types(dtype):
    a, w, b, g = rand(3, 2000, low=-2, high=4), rand(2000), rand(2000), rand(3, 2000)
    x = kiln.tensor(a, dtype=dtype, requires_grad=True)
    wt = kiln.tensor(w, dtype=dtype, requires_grad=True)
    bt = kiln.tensor(b, dtype=dtype, requires_grad=True)
    r = lambda t: kiln.tensor(t, dtype=dtype).double().numpy()  # noqa: E731  rounded input
    y = F.layer_norm(x, (2000,), wt, bt)
    assert y.dtype == dtype
    tol = HALF_TOL[dtype] * 8
    assert_close(y.float(), np_layer_norm(r(a), 1, r(w), r(b))[0], atol=tol, rtol=tol)
    (y.float() * kiln.tensor(g, dtype=kiln.float32)).sum().backward()
    gx, gw, gb = np_layer_norm_grads(r(a), 1, g, r(w))
    assert_close(x.grad.float(), gx, atol=tol * 4, rtol=tol * 4)
    assert_close(wt.grad.float(), gw, atol=tol * 20, rtol=tol * 4)
    assert_close(bt.grad.float(), gb, atol=tol * 20, rtol=tol * 4)


def test_layer_norm_gradcheck_and_double_backward():
    gradcheck(lambda x, w, b: F.layer_norm(x, (3,), w, b), rand(2, 3), rand(3), rand(3))
    gradcheck(lambda x: F.layer_norm(x, (2, 2)), rand(3, 2, 2))
    g = kiln.tensor(rand(2, 3))

    def grads(x, w, b):
        return kiln.autograd.grad((F.layer_norm(x, (3,), w, b) * g * g).sum(), [x, w],
                                  create_graph=True)

    gradcheck(lambda x, w, b: grads(x, w, b)[0], rand(2, 3), rand(3), rand(3))
    gradcheck(lambda x, w, b: grads(x, w, b)[1], rand(2, 3), rand(3), rand(3))


# --- cross_entropy -------------------------------------------------------------

@pytest.mark.parametrize("classes", [1, 7, 1000, 5000, 40000])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_forward_backward(classes, weighted):
    m = 6 if classes < 40000 else 2
    a = rand(m, classes, low=-4, high=4)
    t = RNG.integers(0, classes, size=m)
    t[1] = -100
    w = rand(classes, low=0.5, high=2.0) if weighted else None
    loss_r, w_r, grad_r = np_cross_entropy_rows(a, t, w)
    for red in ("none", "sum", "mean"):
        for dtype in (kiln.float32, kiln.float64):
            x = kiln.tensor(a, dtype=dtype, requires_grad=True)
            wt = None if w is None else kiln.tensor(w, dtype=dtype)
            out = F.cross_entropy(x, kiln.tensor(t), weight=wt, reduction=red)
            if red == "none":
                expected, scale = loss_r, np.ones(m)
            elif red == "sum":
                expected, scale = loss_r.sum(), np.ones(m)
            else:
                expected, scale = loss_r.sum() / w_r.sum(), np.full(m, 1 / w_r.sum())
            tol = 1e-4 if dtype == kiln.float32 else None
            assert_close(out, expected, dtype, atol=tol, rtol=tol)
            gl = rand(m) if red == "none" else np.float64(1.0)
            out.backward(kiln.tensor(gl, dtype=dtype))
            assert_close(x.grad, grad_r * (scale * gl)[:, None], dtype, atol=tol, rtol=tol)


def test_cross_entropy_spatial_unbatched_noncontiguous():
    a = rand(2, 5, 3, 4)
    t = RNG.integers(0, 5, size=(2, 3, 4))
    t[0, 1, 2] = 3 - 100  # a custom ignore_index below
    x = kiln.tensor(a, requires_grad=True)
    out = F.cross_entropy(x, kiln.tensor(t), ignore_index=-97, reduction="none")
    flat_x = np.moveaxis(a, 1, -1).reshape(-1, 5)
    loss_r, _, grad_r = np_cross_entropy_rows(flat_x, t.reshape(-1), ignore_index=-97)
    assert_close(out, loss_r.reshape(2, 3, 4))
    out.sum().backward()
    assert_close(x.grad, np.moveaxis(grad_r.reshape(2, 3, 4, 5), -1, 1))
    b = rand(9)
    assert_close(F.cross_entropy(kiln.tensor(b), kiln.tensor(4)),
                 np_cross_entropy_rows(b[None], np.array([4]))[0][0])
    c = rand(4, 6)
    tc = np.array([0, 5, 2, 2])
    assert_close(F.cross_entropy(noncontig(c), kiln.tensor(tc), reduction="sum"),
                 np_cross_entropy_rows(c, tc)[0].sum())


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_cross_entropy_half_types(dtype):
    a = rand(5, 3000, low=-4, high=4)
    t = RNG.integers(0, 3000, size=5)
    x = kiln.tensor(a, dtype=dtype, requires_grad=True)
    out = F.cross_entropy(x, kiln.tensor(t), reduction="sum")
    exact = kiln.tensor(a, dtype=dtype).double().numpy()
    loss_r, _, grad_r = np_cross_entropy_rows(exact, t)
    tol = HALF_TOL[dtype] * 8
    assert_close(out.float(), loss_r.sum(), atol=tol * 10, rtol=tol)
    out.backward()
    assert_close(x.grad.float(), grad_r, atol=tol, rtol=tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_under_autocast_reads_half_logits_in_place(reduction, weighted):
    """Autocast's float32 cross entropy on bfloat16 logits (Note [Cross entropy under
    autocast]): the same loss as on a float32 copy, float32 out, and the logits' gradient is
    the float32 gradient rounded to bfloat16 once."""
    a = rand(6, 257, low=-4, high=4)
    t = kiln.tensor([3, -100, 0, 256, 17, 17])
    w = kiln.tensor(rand(257, low=0.5, high=2), dtype=kiln.bfloat16) if weighted else None
    x = kiln.tensor(a, dtype=kiln.bfloat16, requires_grad=True)
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        out = F.cross_entropy(x, t, weight=w, reduction=reduction)
    assert out.dtype == kiln.float32
    ref_x = kiln.tensor(a, dtype=kiln.bfloat16).float().requires_grad_(True)
    ref = F.cross_entropy(ref_x, t, weight=None if w is None else w.float(), reduction=reduction)
    assert_close(out, ref.detach().numpy(), atol=1e-6, rtol=1e-6)
    g = kiln.tensor(rand(*out.shape)) if reduction == "none" else None
    out.backward(g)
    ref.backward(g)
    assert x.grad.dtype == kiln.bfloat16
    np.testing.assert_array_equal(x.grad.float().numpy(), ref_x.grad.bfloat16().float().numpy())


def test_cross_entropy_all_ignored_and_errors():
    x = kiln.tensor(rand(3, 4), requires_grad=True)
    t = kiln.tensor([-100, -100, -100])
    assert np.isnan(F.cross_entropy(x, t).item())
    assert F.cross_entropy(x, t, reduction="sum").item() == 0.0
    F.cross_entropy(x, t, reduction="sum").backward()
    assert_close(x.grad, np.zeros((3, 4)))
    with pytest.raises(IndexError, match=r"\[cross_entropy\]"):
        F.cross_entropy(x, kiln.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"\[cross_entropy\]"):
        F.cross_entropy(x, kiln.tensor([0, 1]))


def test_cross_entropy_gradcheck_and_double_backward():
    t = kiln.tensor([2, 0, -100, 1])
    w = kiln.tensor([0.5, 2.0, 1.5])
    for red in ("mean", "sum", "none"):
        gradcheck(lambda x: F.cross_entropy(x, t, weight=w, reduction=red), rand(4, 3))
    gradcheck(lambda x: kiln.autograd.grad(F.cross_entropy(x, t, weight=w), [x],
                                           create_graph=True)[0], rand(4, 3))


# --- rms_norm (the layer_norm kernels without centering) --------------------------

def np_rms_norm(x, k, w=None, eps=None):
    axes = tuple(range(x.ndim - k, x.ndim))
    eps = np.finfo(np.float32).eps if eps is None else eps
    rstd = 1 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return x * rstd * (1 if w is None else w), x * rstd, rstd


@pytest.mark.parametrize("shape,norm", [((4, 1), (1,)), ((3, 1000), (1000,)),
                                        ((1, 40000), (40000,)), ((2, 3, 4, 5), (4, 5))])
@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm_forward_backward(shape, norm, weighted):
    a, g = rand(*shape, low=-3, high=5), rand(*shape)
    w = rand(*norm) if weighted else None
    axes = tuple(range(a.ndim - len(norm), a.ndim))
    batch = tuple(range(a.ndim - len(norm)))
    y_ref, xhat, rstd = np_rms_norm(a, len(norm), w, eps=1e-6)
    gy = g * (1 if w is None else w)
    gx = rstd * (gy - xhat * (gy * xhat).mean(axis=axes, keepdims=True))
    for dtype in (kiln.float32, kiln.float64):
        x = kiln.tensor(a, dtype=dtype, requires_grad=True)
        wt = None if w is None else kiln.tensor(w, dtype=dtype, requires_grad=True)
        y = F.rms_norm(x, norm, wt, eps=1e-6)
        tol = 1e-4 if dtype == kiln.float32 else None
        assert_close(y, y_ref, dtype, atol=tol, rtol=tol)
        (y * kiln.tensor(g, dtype=dtype)).sum().backward()
        tol = 2e-3 if dtype == kiln.float32 else 1e-8
        assert_close(x.grad, gx, dtype, atol=tol, rtol=tol)
        if wt is not None:
            assert_close(wt.grad, (g * xhat).sum(axis=batch), dtype, atol=tol, rtol=tol)


def test_rms_norm_default_eps_half_gradcheck_double_backward():
    a = rand(3, 50)
    assert_close(F.rms_norm(kiln.tensor(a, dtype=kiln.float32), (50,)), np_rms_norm(a, 1)[0],
                 atol=1e-5, rtol=1e-5)
    y = F.rms_norm(kiln.tensor(a, dtype=kiln.bfloat16), (50,))
    assert y.dtype == kiln.bfloat16
    exact = kiln.tensor(a, dtype=kiln.bfloat16).double().numpy()
    assert_close(y.float(), np_rms_norm(exact, 1, eps=2.0 ** -7)[0], atol=5e-2, rtol=5e-2)
    gradcheck(lambda x, w: F.rms_norm(x, (3,), w), rand(2, 3), rand(3))
    g = kiln.tensor(rand(2, 3))
    gradcheck(lambda x, w: kiln.autograd.grad((F.rms_norm(x, (3,), w) * g * g).sum(), [x, w],
                                              create_graph=True)[0], rand(2, 3), rand(3))
