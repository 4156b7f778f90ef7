"""kiln.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) and gradgradcheck,
against NumPy finite differences / analytic derivatives, and PyTorch where installed."""

import numpy as np
import pytest

import kiln
from kiln.autograd import Function
from kiln.autograd import functional as AF
from helpers import assert_close, rand, requires_gpu

A = rand(3, 3)


def f_np(x):
    return np.tanh(A @ x) * x.sum()


def f_kiln(x):
    return (kiln.tensor(A) @ x).tanh() * x.sum()


def numeric_jacobian(fn, x, eps=1e-6):
    cols = []
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        cols.append(((fn(x + d) - fn(x - d)) / (2 * eps)).ravel())
    return np.stack(cols, -1).reshape(np.shape(fn(x)) + x.shape)


def test_jacobian_vs_finite_differences():
    x = rand(3)
    jac = AF.jacobian(f_kiln, kiln.tensor(x))
    assert not jac.requires_grad
    assert_close(jac, numeric_jacobian(f_np, x), atol=1e-7, rtol=1e-6)


def test_jacobian_tuple_structure_and_shapes():
    a, b = rand(2, 3), rand(4)

    def fn(x, y):
        return (x * 2).sum(0), (y * y)

    jac = AF.jacobian(fn, (kiln.tensor(a), kiln.tensor(b)))
    assert isinstance(jac, tuple) and len(jac) == 2 and all(len(r) == 2 for r in jac)
    assert tuple(jac[0][0].shape) == (3, 2, 3) and tuple(jac[0][1].shape) == (3, 4)
    assert tuple(jac[1][0].shape) == (4, 2, 3) and tuple(jac[1][1].shape) == (4, 4)
    assert_close(jac[0][0], numeric_jacobian(lambda t: (t * 2).sum(0), a), atol=1e-7)
    assert_close(jac[0][1], np.zeros((3, 4)))  # output 0 ignores y: zeros
    assert_close(jac[1][1], np.diag(2 * b))
    # A single input given as a tuple keeps the inner tuple; a single output does not.
    single = AF.jacobian(lambda x: x.exp(), (kiln.tensor(b),))
    assert isinstance(single, tuple) and len(single) == 1
    assert_close(single[0], np.diag(np.exp(b)))


def test_jacobian_strict_and_create_graph():
    x = kiln.tensor(rand(3))
    y = kiln.tensor(rand(3))
    with pytest.raises(RuntimeError, match=r"\[jacobian\] Output 0 .* independent of input 1"):
        AF.jacobian(lambda p, q: p * 2, (x, y), strict=True)
    xg = kiln.tensor(rand(3)).requires_grad_(True)
    jac = AF.jacobian(lambda p: p ** 3, xg, create_graph=True)
    assert jac.requires_grad
    jac.sum().backward()  # d/dx sum(diag(3x^2)) = 6x
    assert_close(xg.grad, 6 * xg.detach().numpy())


def test_hessian_quadratic_form_and_tuple():
    M = rand(3, 3)
    x = rand(3)
    h = AF.hessian(lambda t: t @ (kiln.tensor(M) @ t), kiln.tensor(x))
    assert_close(h, M + M.T)
    a, b = rand(2), rand(3)
    h2 = AF.hessian(lambda p, q: (p.sum() ** 2) * q.exp().sum(), (kiln.tensor(a), kiln.tensor(b)))
    s, e = a.sum(), np.exp(b)
    assert_close(h2[0][0], np.full((2, 2), 2 * e.sum()))
    assert_close(h2[0][1], np.tile(2 * s * e, (2, 1)))
    assert_close(h2[1][0], np.tile(2 * s * e, (2, 1)).T)
    assert_close(h2[1][1], np.diag(s * s * e))
    with pytest.raises(RuntimeError, match=r"\[hessian\].*single element"):
        AF.hessian(lambda t: t * 2, kiln.tensor(x))


def test_vjp_jvp_match_the_jacobian():
    x, u, v = rand(3), rand(3), rand(3)
    J = numeric_jacobian(f_np, x)
    out, vjp = AF.vjp(f_kiln, kiln.tensor(x), kiln.tensor(u))
    assert_close(out, f_np(x))
    assert_close(vjp, u @ J, atol=1e-7, rtol=1e-6)
    out, jvp = AF.jvp(f_kiln, kiln.tensor(x), kiln.tensor(v))
    assert_close(jvp, J @ v, atol=1e-7, rtol=1e-6)
    _, (g0, g1) = AF.vjp(lambda p, q: (p * q).sum(), (kiln.tensor(u), kiln.tensor(v)))
    assert_close(g0, v)
    assert_close(g1, u)


def test_vhp_hvp():
    M = rand(3, 3)
    x, v = rand(3), rand(3)

    def fn(t):
        return (t @ (kiln.tensor(M) @ t)) + t.sin().sum()

    H = M + M.T - np.diag(np.sin(x))
    out, vhp = AF.vhp(fn, kiln.tensor(x), kiln.tensor(v))
    assert_close(out, x @ M @ x + np.sin(x).sum())
    assert_close(vhp, v @ H)
    _, hvp = AF.hvp(fn, kiln.tensor(x), kiln.tensor(v))
    assert_close(hvp, H @ v)


def test_bad_arguments():
    x = kiln.tensor(rand(3))
    with pytest.raises(TypeError, match=r"\[vjp\].*index 1 has type int"):
        AF.vjp(lambda a, b: a, (x, 3))
    with pytest.raises(RuntimeError, match=r"\[vjp\] v has invalid size: should be \[3\] but "
                                           r"got \[2\]"):
        AF.vjp(lambda a: a * 2, x, kiln.tensor(rand(2)))
    with pytest.raises(RuntimeError, match=r"\[jvp\] v is a tuple of invalid length"):
        AF.jvp(lambda a, b: a * b, (x, x), (x,))
    with pytest.raises(RuntimeError, match=r"\[vjp\] The vector v can only be None"):
        AF.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match=r"\[vjp\] Output 0 of the user-provided function "
                                           r"does not require gradients"):
        AF.vjp(lambda a: kiln.ones(3), x, x, strict=True)
    with pytest.raises(NotImplementedError, match=r"\[jacobian\] vectorize=True"):
        AF.jacobian(lambda a: a, x, vectorize=True)


def test_gradgradcheck():
    x = kiln.tensor(rand(2, 3)).requires_grad_(True)
    assert kiln.autograd.gradgradcheck(lambda t: (t * t).sin(), (x,))

    class WrongSecond(Function):
        """First derivative right, second derivative missing (detached)."""

        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t ** 3

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * 3 * t.detach() ** 2

    assert kiln.autograd.gradcheck(WrongSecond.apply, (x,))
    assert not kiln.autograd.gradgradcheck(WrongSecond.apply, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match=r"\[gradcheck\] Jacobian mismatch"):
        kiln.autograd.gradgradcheck(WrongSecond.apply, (x,))


# PyTorch comparison

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_jacobian_hessian_vs_torch(device):
    torch = pytest.importorskip("torch")
    x, y, v = rand(3), rand(2), rand(3)

    def fn(lib, dev):
        def f(a, b):
            m = lib.tensor(A, device=dev)
            return (m @ a).tanh() * b.sum(), (a * a).sum() * b
        return f

    def scalar(a, b):
        return (a.sin() * b.sum()).sum() + (a * a).sum() * (b ** 3).sum()

    xk, yk = kiln.tensor(x, device=device), kiln.tensor(y, device=device)
    xt, yt = torch.tensor(x, device=device), torch.tensor(y, device=device)
    jk = AF.jacobian(fn(kiln, device), (xk, yk))
    jt = torch.autograd.functional.jacobian(fn(torch, device), (xt, yt))
    hk = AF.hessian(scalar, (xk, yk))
    ht = torch.autograd.functional.hessian(scalar, (xt, yt))
    for rk, rt in ((jk, jt), (hk, ht)):
        for i in range(2):
            for j in range(2):
                assert_close(rk[i][j].cpu(), rt[i][j].cpu().numpy())
    vk, vt = kiln.tensor(v, device=device), torch.tensor(v, device=device)
    sk = AF.hvp(lambda a: scalar(a, yk), xk, vk)[1]
    st = torch.autograd.functional.hvp(lambda a: scalar(a, yt), xt, vt)[1]
    assert_close(sk.cpu(), st.cpu().numpy())
    jvk = AF.jvp(lambda a: fn(kiln, device)(a, yk)[0], xk, vk)[1]
    jvt = torch.autograd.functional.jvp(lambda a: fn(torch, device)(a, yt)[0], xt, vt)[1]
    assert_close(jvk.cpu(), jvt.cpu().numpy())
