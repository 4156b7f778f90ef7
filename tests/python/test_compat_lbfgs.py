"""kiln.optim.LBFGS (issue 17, item 8): convergence against NumPy's exact answers, the
iteration against PyTorch's where installed, state_dict and errors."""

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(0)
A = RNG.standard_normal((6, 6))
H = A @ A.T + 6 * np.eye(6)  # symmetric positive definite
B = RNG.standard_normal(6)


def _quadratic(lib, x):
    Hl, Bl = lib.tensor(H), lib.tensor(B)
    return 0.5 * (x @ (Hl @ x)) - Bl @ x


def _run(lib, opt_kwargs, steps=1, x0=None):
    x = lib.tensor(np.zeros(6) if x0 is None else x0, requires_grad=True)
    opt = lib.optim.LBFGS([x], **opt_kwargs)

    def closure():
        opt.zero_grad()
        loss = _quadratic(lib, x)
        loss.backward()
        return loss

    losses = [float(opt.step(closure)) for _ in range(steps)]
    return x.detach().numpy(), losses, opt


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_minimises_a_quadratic_to_numpys_solution(line_search_fn):
    x, _, opt = _run(kiln, dict(lr=1, max_iter=100, line_search_fn=line_search_fn,
                                tolerance_grad=1e-12, tolerance_change=1e-14), steps=2,
                     x0=np.zeros(6))
    # It stops once the loss changes by less than 1e-14: x is then within ~1e-7.
    np.testing.assert_allclose(x, np.linalg.solve(H, B), rtol=1e-6, atol=1e-6)
    state = opt.state[opt.param_groups[0]["params"][0]]
    assert state["n_iter"] >= 6 and state["func_evals"] >= state["n_iter"]


def test_rosenbrock_with_strong_wolfe():
    xy = kiln.tensor([-1.5, 2.0], dtype=kiln.float64, requires_grad=True)
    opt = kiln.optim.LBFGS([xy], lr=1, max_iter=200, line_search_fn="strong_wolfe",
                           tolerance_grad=1e-10, tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        x, y = xy[0], xy[1]
        loss = (1 - x) ** 2 + 100 * (y - x * x) ** 2
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(xy.detach().numpy(), [1.0, 1.0], atol=1e-6)


def test_history_state_dict_round_trip_continues_identically():
    kwargs = dict(lr=0.5, max_iter=3, history_size=2)
    x1, losses1, opt1 = _run(kiln, kwargs, steps=4)
    _, _, opt2 = _run(kiln, kwargs, steps=2)
    state = opt2.state_dict()
    x = kiln.tensor(opt2.param_groups[0]["params"][0].detach().numpy(), requires_grad=True)
    opt3 = kiln.optim.LBFGS([x], **kwargs)
    opt3.load_state_dict(state)
    inner = opt3.state[x]
    assert len(inner["old_dirs"]) <= 2

    def closure():
        opt3.zero_grad()
        loss = _quadratic(kiln, x)
        loss.backward()
        return loss

    losses3 = [float(opt3.step(closure)) for _ in range(2)]
    np.testing.assert_allclose(losses3, losses1[2:], rtol=1e-12)
    np.testing.assert_allclose(x.detach().numpy(), x1, rtol=1e-12)


def test_errors():
    p = kiln.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"\[LBFGS\] only 'strong_wolfe'"):
        kiln.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="Invalid learning rate"):
        kiln.optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        kiln.optim.LBFGS([{"params": [p]}, {"params": [kiln.zeros(1, requires_grad=True)]}])
    with pytest.raises(RuntimeError, match="requires a closure"):
        kiln.optim.LBFGS([p]).step(None)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_matches_pytorch_iteration_by_iteration(line_search_fn):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        kwargs = dict(lr=0.8, max_iter=4, history_size=3, line_search_fn=line_search_fn)
        x0 = RNG.standard_normal(6)
        xk, lk, ok = _run(kiln, kwargs, steps=3, x0=x0)
        xt, lt, ot = _run(torch, kwargs, steps=3, x0=x0)
    finally:
        torch.set_default_dtype(torch.float32)
    np.testing.assert_allclose(lk, lt, rtol=1e-10)
    np.testing.assert_allclose(xk, xt, rtol=1e-9, atol=1e-12)
    sk = ok.state[ok.param_groups[0]["params"][0]]
    st = ot.state[ot.param_groups[0]["params"][0]]
    assert sk["func_evals"] == st["func_evals"] and sk["n_iter"] == st["n_iter"]


def test_is_complex_top_level_and_method():
    t = kiln.ones(2)
    assert kiln.is_complex(t) is False and t.is_complex() is False
