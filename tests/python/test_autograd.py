"""The autograd engine (autograd/*): graph walking, retain/create_graph,
autograd.grad, hooks, grad modes, saved-tensor versions and leaf rules."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand


def leaf(a, dtype=kiln.float64):
    return kiln.tensor(a, dtype=dtype, requires_grad=True)


# ---------------------------------------------------------------- graph shapes


def test_diamond_sums_both_paths():
    a = rand(3)
    x = leaf(a)
    y = x * 2
    left, right = y.sin(), y * y  # both branches consume y
    (left + right).sum().backward()
    assert_close(x.grad, 2 * np.cos(2 * a) + 2 * 2 * (2 * a))


def test_diamond_with_reused_input_and_broadcast():
    a, b = rand(2, 3), rand(3)
    x, w = leaf(a), leaf(b)
    h = x * w
    out = (h * x + h / (w * w + 1) + w).sum()
    out.backward()
    assert_close(x.grad, 2 * a * b + b / (b * b + 1))
    dh_dw = a
    expected_w = (a * dh_dw).sum(0) + (a / (b * b + 1) - a * b * 2 * b / (b * b + 1) ** 2).sum(0) + 2
    assert_close(w.grad, expected_w)


def test_same_tensor_used_twice_in_one_op():
    a = rand(4)
    x = leaf(a)
    (x * x).sum().backward()
    assert_close(x.grad, 2 * a)


def test_deep_chain_does_not_recurse():
    x = leaf(np.array([1.0]))
    y = x
    for _ in range(5000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_grad_fn_names_and_next_functions():
    x = leaf(rand(2))
    y = (x * 2).exp()
    assert y.grad_fn.name() == "ExpBackward0"
    (mul_fn, _), = y.grad_fn.next_functions
    assert mul_fn.name() == "MulBackward0"
    assert mul_fn.next_functions[0][0].name() == "AccumulateGrad"
    assert x.grad_fn is None and x.is_leaf and not y.is_leaf


# ---------------------------------------------------------------- retain/create graph


def test_second_backward_needs_retain_graph():
    x = leaf(rand(3))
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_second_grad_call_needs_retain_graph():
    x = leaf(rand(3))
    y = (x.sin() * 3).sum()
    kiln.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        kiln.autograd.grad(y, x)


def test_second_order_x_cubed():
    a = rand(4)
    x = leaf(a)
    (g,) = kiln.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert_close(g, 3 * a ** 2)
    assert g.requires_grad
    (g2,) = kiln.autograd.grad(g.sum(), x, create_graph=True)
    assert_close(g2, 6 * a)
    (g3,) = kiln.autograd.grad(g2.sum(), x)
    assert_close(g3, np.full(4, 6.0))


def test_second_order_sin_via_backward():
    a = rand(3)
    x = leaf(a)
    y = x.sin().sum()
    y.backward(create_graph=True)
    assert_close(x.grad, np.cos(a))
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert_close(x.grad, -np.sin(a))


def test_mixed_partials():
    a, b = rand(3), rand(3)
    x, y = leaf(a), leaf(b)
    (gx,) = kiln.autograd.grad((x * x * y).sum(), x, create_graph=True)
    (gxy,) = kiln.autograd.grad(gx.sum(), y)
    assert_close(gxy, 2 * a)


def test_grad_without_create_graph_is_detached():
    x = leaf(rand(3))
    (g,) = kiln.autograd.grad((x ** 2).sum(), x)
    assert not g.requires_grad and g.grad_fn is None


# ---------------------------------------------------------------- autograd.grad


def test_autograd_grad_leaves_dot_grad_alone():
    a, b = rand(3), rand(3)
    x, y = leaf(a), leaf(b)
    gx, gy = kiln.autograd.grad((x * y).sum(), (x, y))
    assert_close(gx, b)
    assert_close(gy, a)
    assert x.grad is None and y.grad is None


def test_autograd_grad_wrt_intermediate():
    a = rand(3)
    x = leaf(a)
    h = x * 2
    out = (h * h).sum()
    (gh,) = kiln.autograd.grad(out, h)
    assert_close(gh, 2 * (2 * a))


def test_autograd_grad_with_grad_outputs():
    a, v = rand(2, 3), rand(2, 3)
    x = leaf(a)
    (g,) = kiln.autograd.grad(x * 3, x, grad_outputs=kiln.tensor(v))
    assert_close(g, 3 * v)


def test_autograd_grad_unused_input():
    x, unused = leaf(rand(3)), leaf(rand(3))
    with pytest.raises(RuntimeError, match=r"\[grad\].*not have been used.*allow_unused"):
        kiln.autograd.grad((x * 2).sum(), (x, unused))
    gx, gu = kiln.autograd.grad((x * 2).sum(), (x, unused), allow_unused=True)
    assert_close(gx, np.full(3, 2.0))
    assert gu is None


def test_autograd_grad_input_without_requires_grad():
    x = leaf(rand(3))
    plain = kiln.tensor(rand(3))
    with pytest.raises(RuntimeError, match=r"\[grad\].*does not require grad"):
        kiln.autograd.grad((x * plain).sum(), (x, plain))


def test_autograd_backward_function_and_inputs():
    a, b = rand(3), rand(3)
    x, y = leaf(a), leaf(b)
    kiln.autograd.backward([(x * y).sum()])
    assert_close(x.grad, b)
    x.grad = None
    y.grad = None
    (x * y).sum().backward(inputs=[x])
    assert_close(x.grad, b)
    assert y.grad is None


# ---------------------------------------------------------------- errors


def test_backward_of_non_scalar_needs_gradient():
    x = leaf(rand(2, 3))
    y = x * 2
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created only for scalar"):
        y.backward()
    y.backward(kiln.ones(2, 3, dtype=kiln.float64))
    assert_close(x.grad, np.full((2, 3), 2.0))
    with pytest.raises(RuntimeError, match=r"\[backward\].*Mismatch in shape"):
        (x * 2).backward(kiln.ones(3, dtype=kiln.float64))


def test_backward_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match=r"does not require grad"):
        kiln.ones(1).sum().backward()


def test_requires_grad_only_for_floating():
    with pytest.raises(RuntimeError, match=r"\[requires_grad_\].*floating point"):
        kiln.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match=r"floating point"):
        kiln.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"floating point"):
        t = kiln.tensor([True])
        t.requires_grad = True
    assert kiln.ones(2, dtype=kiln.float16).requires_grad_().requires_grad


def test_requires_grad_false_on_non_leaf():
    y = leaf(rand(2)) * 2
    with pytest.raises(RuntimeError, match=r"leaf"):
        y.requires_grad_(False)
    assert y.detach().requires_grad is False


def test_saved_tensor_modified_in_place():
    x = leaf(rand(3))
    h = x * 1
    y = (h * h).sum()  # mul saves h
    h.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*version 1.*version 0"):
        y.backward()


def test_saved_output_modified_in_place():
    x = leaf(rand(3))
    e = x.exp()  # exp saves its output
    loss = e.sum()
    with kiln.no_grad():
        e.mul_(2)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        loss.backward()


def test_in_place_on_view_of_saved_tensor_is_detected():
    x = leaf(rand(2, 3))
    h = x * 1
    y = (h.sin()).sum()  # sin saves h
    with kiln.no_grad():
        h.t().mul_(2)  # same version counter through the view
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        y.backward()


def test_unmodified_save_after_unrelated_in_place_is_fine():
    a = rand(3)
    x = leaf(a)
    h = x * 1
    y = (h * h).sum()
    other = h.clone()
    other.add_(1)
    y.backward()
    assert_close(x.grad, 2 * a)


# ---------------------------------------------------------------- .grad bookkeeping


def test_grad_accumulates_across_backward_calls():
    a = rand(3)
    x = leaf(a)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert_close(x.grad, 2 * a + 3)
    x.grad = None
    (x * 3).sum().backward()
    assert_close(x.grad, np.full(3, 3.0))


def test_accumulated_grad_is_not_aliased_to_a_later_graph():
    x = leaf(rand(3))
    (x * 1).sum().backward()
    g = x.grad
    (x * 1).sum().backward()
    assert_close(x.grad, np.full(3, 2.0))
    assert g is x.grad or np.allclose(g.numpy(), 2.0)


def test_grad_of_non_leaf_is_none():
    x = leaf(rand(3))
    y = x * 2
    y.sum().backward()
    assert y.grad is None and not y.retains_grad
    assert x.grad is not None


def test_retain_grad():
    a = rand(3)
    x = leaf(a)
    y = x * 2
    y.retain_grad()
    z = y.exp()
    z.retain_grad()
    z.sum().backward(retain_graph=True)
    assert y.retains_grad
    assert_close(z.grad, np.ones(3))
    assert_close(y.grad, np.exp(2 * a))
    assert_close(x.grad, 2 * np.exp(2 * a))
    # A second backward accumulates into the retained grad too.
    (y * 1).sum().backward()
    assert_close(y.grad, np.exp(2 * a) + 1)


def test_detach_shares_storage_and_drops_history():
    a = rand(3)
    x = leaf(a)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    with kiln.no_grad():
        d.add_(1)
    assert_close(y.detach(), 2 * a + 1)
    assert d._version == y._version


def test_mixed_precision_gradient_dtypes():
    a, b = rand(3), rand(3)
    x = leaf(a, dtype=kiln.float32)
    y = leaf(b, dtype=kiln.float64)
    z = x + y
    assert z.dtype == kiln.float64
    (z * z).sum().backward()
    assert x.grad.dtype == kiln.float32 and y.grad.dtype == kiln.float64
    expected = 2 * (a.astype(np.float32).astype(np.float64) + b)
    assert_close(x.grad, expected, kiln.float32)
    assert_close(y.grad, expected, atol=1e-6, rtol=1e-6)


def test_gradient_of_broadcast_input_has_input_shape():
    x = leaf(rand(3, 1))
    y = leaf(rand(4))
    (x * y).sum().backward()
    assert tuple(x.grad.shape) == (3, 1) and tuple(y.grad.shape) == (4,)


def test_set_grad_checks_shape_and_dtype():
    x = leaf(rand(3))
    with pytest.raises(RuntimeError, match=r"\[grad\].*shape"):
        x.grad = kiln.ones(4, dtype=kiln.float64)
    with pytest.raises(RuntimeError, match=r"\[grad\].*dtype"):
        x.grad = kiln.ones(3)


# ---------------------------------------------------------------- hooks


def test_hook_on_leaf_modifies_grad():
    a = rand(3)
    x = leaf(a)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_hook(lambda g: g * 10)
    (x * x).sum().backward()
    assert_close(x.grad, 20 * a)
    np.testing.assert_allclose(seen[0], 2 * a)


def test_hook_on_non_leaf_changes_upstream_grad():
    a = rand(3)
    x = leaf(a)
    y = x * 2
    y.register_hook(lambda g: g + 1)
    (y * 3).sum().backward()
    assert_close(x.grad, (3 + 1) * 2 * np.ones(3))


def test_hook_handle_remove():
    x = leaf(rand(3))
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    (x * 1).sum().backward()
    handle.remove()
    (x * 1).sum().backward()
    assert calls == [1]
    y = x * 2
    h2 = y.register_hook(lambda g: g * 0)
    h2.remove()
    x.grad = None
    y.sum().backward()
    assert_close(x.grad, np.full(3, 2.0))


def test_hook_requires_grad():
    with pytest.raises(RuntimeError, match=r"\[register_hook\]"):
        kiln.ones(2).register_hook(lambda g: g)


def test_hook_sees_summed_grad_of_diamond():
    a = rand(3)
    x = leaf(a)
    y = x * 1
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    (y * 2 + y * 3).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], np.full(3, 5.0))


def test_post_accumulate_grad_hook():
    a = rand(3)
    x = leaf(a)
    seen = []

    def hook(t):
        assert t is x
        seen.append(t.grad.numpy().copy())

    handle = x.register_post_accumulate_grad_hook(hook)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert len(seen) == 2
    np.testing.assert_allclose(seen[0], 2.0)
    np.testing.assert_allclose(seen[1], 5.0)  # runs after accumulation
    handle.remove()
    (x * 1).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match=r"\[register_post_accumulate_grad_hook\]"):
        (x * 2).register_post_accumulate_grad_hook(hook)


def test_post_accumulate_hook_can_consume_grad():
    x = leaf(rand(3))
    # An optimizer-in-backward pattern: step and clear the grad in the hook.
    x.register_post_accumulate_grad_hook(lambda t: setattr(t, "grad", None))
    (x * 2).sum().backward()
    assert x.grad is None


# ---------------------------------------------------------------- grad mode


def test_no_grad_context():
    x = leaf(rand(3))
    with kiln.no_grad():
        assert not kiln.is_grad_enabled()
        y = x * 2
    assert kiln.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_nested_modes_restore():
    x = leaf(rand(3))
    with kiln.no_grad():
        with kiln.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
        with kiln.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not kiln.is_grad_enabled()
    with kiln.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert kiln.is_grad_enabled()


def test_modes_restore_after_exception():
    with pytest.raises(ValueError):
        with kiln.no_grad():
            raise ValueError
    assert kiln.is_grad_enabled()


def test_set_grad_enabled_as_function():
    try:
        kiln.set_grad_enabled(False)
        assert not kiln.is_grad_enabled()
    finally:
        kiln.set_grad_enabled(True)
    assert kiln.is_grad_enabled()


def test_modes_as_decorators():
    x = leaf(rand(3))

    @kiln.no_grad()
    def f():
        return x * 2

    @kiln.enable_grad()
    def g():
        return x * 2

    @kiln.set_grad_enabled(False)
    def h():
        return x * 2

    assert not f().requires_grad
    assert kiln.is_grad_enabled()
    with kiln.no_grad():
        assert g().requires_grad
    assert not h().requires_grad
    assert kiln.is_grad_enabled()
    assert f.__name__ == "f"

    @kiln.no_grad
    def bare():
        return x * 2

    assert not bare().requires_grad and bare.__name__ == "bare"
    assert kiln.is_grad_enabled()


def test_autograd_namespace_aliases():
    assert kiln.autograd.no_grad is kiln.no_grad
    with kiln.autograd.set_grad_enabled(False):
        assert not kiln.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = {}
    ready, release = threading.Event(), threading.Event()

    def worker():
        seen["initial"] = kiln.is_grad_enabled()
        with kiln.no_grad():
            ready.set()
            release.wait(10)
            seen["inside"] = kiln.is_grad_enabled()

    with kiln.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        ready.wait(10)
        # The worker's no_grad does not leak here, and ours did not leak there.
        with kiln.enable_grad():
            assert kiln.is_grad_enabled()
            x = leaf(rand(2))
            assert (x * 2).requires_grad
        release.set()
        t.join()
        assert not kiln.is_grad_enabled()
    assert seen == {"initial": True, "inside": False}


def test_backward_in_threads():
    results = [None] * 4

    def worker(i):
        x = leaf(np.full(3, float(i)))
        (x * x).sum().backward()
        results[i] = x.grad.numpy().copy()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        np.testing.assert_allclose(r, 2.0 * i)


def test_backward_does_not_record_unless_create_graph():
    x = leaf(rand(3))
    seen = []
    x.register_hook(lambda g: seen.append(g.requires_grad))
    (x * x).sum().backward()
    (x * x).sum().backward(create_graph=True)
    assert seen == [False, True]


# ---------------------------------------------------------------- regressions


def test_create_graph_leaf_grads_are_not_aliased():
    a = leaf(np.ones(3))
    b = leaf(np.ones(3))
    (a + b).sum().backward(create_graph=True)  # add's backward returns {g, g}
    assert a.grad is not b.grad
    with kiln.no_grad():
        a.grad.add_(1)  # would also hit b.grad, 3 times over a stride-0 buffer
    assert a.grad.tolist() == [2.0] * 3 and b.grad.tolist() == [1.0] * 3


def test_autograd_grad_on_deep_chain():
    x = leaf(np.array([2.0]))
    y = x
    for _ in range(3000):
        y = y * 1.0
    (g,) = kiln.autograd.grad(y.sum(), x)
    assert g.tolist() == [1.0]


def test_freeing_a_very_deep_graph_does_not_overflow_the_stack():
    code = ("import kiln\n"
            "x = kiln.ones(1, requires_grad=True)\n"
            "y = x\n"
            "for _ in range(200000):\n"
            "    y = y * 1.0\n"
            "del y\n"
            "print('freed')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "freed", out.stderr[-500:]


# ---------------------------------------------------------------- double backward


def gradgradcheck(fn, *arrays):
    """Finite-difference check of the gradient of fn's (weighted) gradient."""
    inputs = [leaf(np.asarray(a, dtype=np.float64)) for a in arrays]

    def first_grads(*xs):
        out = fn(*xs)
        w = kiln.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
        return kiln.autograd.grad((out * w).sum(), xs, create_graph=True)

    for i in range(len(inputs)):
        # The first gradient must carry history, or the check below is vacuous.
        assert first_grads(*inputs)[i].requires_grad
        assert kiln.autograd.gradcheck(lambda *xs: first_grads(*xs)[i], inputs)


SECOND_ORDER = {
    "exp": lambda x: x.exp(),
    "log": lambda x: (x * x + 1).log(),
    "sqrt_rsqrt": lambda x: (x * x + 1).sqrt() + (x * x + 1).rsqrt(),
    "reciprocal": lambda x: (x * x + 1).reciprocal(),
    "trig": lambda x: x.sin() * x.cos() + (x * 0.3).tan(),
    "tanh_sigmoid_silu": lambda x: x.tanh() + x.sigmoid() + kiln.silu(x),
    "erf_gelu": lambda x: kiln.erf(x) + kiln.gelu(x) + kiln.gelu(x, approximate="tanh"),
    "elu_softplus": lambda x: kiln.elu(x) + kiln.softplus(x, beta=2.0),
    "mul_div": lambda x: x * x / (x * x + 2),
    "pow": lambda x: (x * x + 1) ** (x * 0.5),
    "atan2": lambda x: kiln.atan2(x, x * x + 1),
    "select": lambda x: x.select(1, 2) ** 3,
    "narrow": lambda x: x.narrow(1, 1, 2) ** 3,
    "views": lambda x: x.t().reshape(-1).unsqueeze(0).expand(2, 6) ** 2,
    "where": lambda x: kiln.where(x > 0, x * x, x ** 3),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_gradgradcheck(name):
    a = rand(2, 3)
    a = np.where(np.abs(a) < 0.1, 0.5, a)  # away from where's switch point
    gradgradcheck(SECOND_ORDER[name], a)


def test_leaf_hooks_apply_to_autograd_grad():
    x = leaf(np.array([1.0, 2.0]))
    x.register_hook(lambda g: g * 10)
    (g,) = kiln.autograd.grad((x * x).sum(), x)
    assert g.tolist() == [20.0, 40.0]
    assert x.grad is None


def test_backward_with_inputs_runs_leaf_hooks():
    x = leaf(np.array([1.0, 2.0]))
    y = leaf(np.array([3.0, 4.0]))
    seen = []
    x.register_hook(lambda g: g * 10)
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * y).sum().backward(inputs=[x])
    assert x.grad.tolist() == [30.0, 40.0] and y.grad is None
    assert seen == [[30.0, 40.0]]


def test_gradcheck_catches_wrong_and_missing_gradients():
    x = leaf(rand(2, 3))
    assert kiln.autograd.gradcheck(lambda t: t * t, [x])
    # A dropped backward record must not pass as "nothing to check".
    assert not kiln.autograd.gradcheck(lambda t: t.detach() * 2, [x], raise_exception=False)
    with pytest.raises(RuntimeError, match=r"\[gradcheck\]"):
        kiln.autograd.gradcheck(lambda t: t * t.detach(), [x])
    with pytest.raises(ValueError, match=r"\[gradcheck\].*float64"):
        kiln.autograd.gradcheck(lambda t: t, [leaf(rand(2), dtype=kiln.float32)])
