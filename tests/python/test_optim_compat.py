"""ASGD, Rprop, Adafactor, Muon and SparseAdam (issue 17): against NumPy re-implementations of
PyTorch's documented updates (float64), step by step against PyTorch itself where installed
(every flag, several steps, state dicts), argument errors and state-dict round trips."""

import math

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(7)
SHAPES = [(4, 3), (5,), (3, 6)]
STEPS = 6

# ---------------------------------------------------------------------------------------------
# NumPy references: one update each, on a float64 parameter p with gradient g and a state dict.


def _asgd(p, g, st, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    t = st["t"] = st.get("t", 0) + 1
    eta, mu = st.get("eta", float(np.float32(lr))), st.get("mu", 1.0)
    g = -g if maximize else g
    g = g + weight_decay * p
    p = p * (1 - lambd * eta) - eta * g
    st["ax"] = p.copy() if mu == 1 else st["ax"] + (p - st["ax"]) * mu
    # PyTorch keeps eta and mu in float32 tensors.
    st["eta"] = float(np.float32(lr / (1 + lambd * lr * t) ** alpha))
    st["mu"] = float(np.float32(1 / max(1, t - t0)))
    return p


def _rprop(p, g, st, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    prev = st.get("prev", np.zeros_like(p))
    size = st.get("size", np.full_like(p, lr))
    sign = np.sign(g * prev)
    size = np.clip(size * np.where(sign > 0, etas[1], np.where(sign < 0, etas[0], 1.0)),
                   *step_sizes)
    g = np.where(sign < 0, 0.0, g)
    st["prev"], st["size"] = g, size
    return p - np.sign(g) * size


def _adafactor(p, g, st, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0,
               maximize=False):
    t = st["t"] = st.get("t", 0) + 1
    eps1 = np.finfo(np.float64).eps if eps[0] is None else eps[0]
    g = -g if maximize else g
    beta = t ** beta2_decay
    rho = min(lr, 1 / math.sqrt(t))
    alpha = max(eps[1], np.sqrt(np.mean(p * p))) * rho
    p = p * (1 - lr * weight_decay)
    if g.ndim > 1:
        row = st.get("row", np.zeros(g.shape[:-1] + (1,)))
        col = st.get("col", np.zeros(g.shape[:-2] + (1, g.shape[-1])))
        row = row + beta * ((g * g).mean(-1, keepdims=True) - row)
        col = col + beta * ((g * g).mean(-2, keepdims=True) - col)
        st["row"], st["col"] = row, col
        var = row @ col / np.maximum(row.mean(-2, keepdims=True), eps1)
    else:
        var = st.get("var", np.zeros_like(g))
        var = st["var"] = var + beta * (g * g - var)
    update = g / np.sqrt(np.maximum(var, eps1 * eps1))
    denom = max(1.0, np.sqrt(np.mean(update * update)) / d)
    return p - alpha / denom * update


def _newton_schulz(x, coefficients=(3.4445, -4.775, 2.0315), steps=5, eps=1e-7):
    a, b, c = coefficients
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / max(np.linalg.norm(x), eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def _muon(p, g, st, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, adjust_lr_fn=None):
    buf = st["buf"] = st.get("buf", np.zeros_like(g)) * momentum + (1 - momentum) * g
    update = g + momentum * (buf - g) if nesterov else buf
    rows, cols = p.shape
    ratio = {None: math.sqrt(max(1, rows / cols)), "original": math.sqrt(max(1, rows / cols)),
             "match_rms_adamw": 0.2 * math.sqrt(max(rows, cols)),
             "spectral_unclamped": math.sqrt(rows / cols)}[adjust_lr_fn]
    return p * (1 - lr * weight_decay) - lr * ratio * _newton_schulz(update)


REFERENCES = {"ASGD": _asgd, "Rprop": _rprop, "Adafactor": _adafactor}

CASES = [
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=2, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=0, maximize=True, foreach=False)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("Rprop", dict(lr=0.02, maximize=True, foreach=False)),
    ("Adafactor", dict()),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5, weight_decay=0.1)),
    ("Adafactor", dict(lr=0.2, maximize=True, foreach=False)),
]


def case_id(case):
    name, kw = case
    return name + "-" + ("-".join(f"{k}={v}" for k, v in kw.items()) or "default")


def _starts():
    return [RNG.uniform(-2, 2, s) for s in SHAPES]


def _grads(step):
    rng = np.random.default_rng(100 + step)
    # Sign flips from step to step exercise Rprop's both branches.
    return [rng.uniform(-1, 1, s) * (-1) ** step + 0.3 for s in SHAPES]


def _kiln_run(name, kw, starts, dtype=kiln.float64, steps=STEPS):
    params = [kiln.tensor(a, dtype=dtype, requires_grad=True) for a in starts]
    opt = getattr(kiln.optim, name)(params, **kw)
    for step in range(steps):
        for p, g in zip(params, _grads(step)):
            p.grad = kiln.tensor(g, dtype=dtype)
        opt.step()
    return params, opt


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_numpy_reference(case):
    name, kw = case
    starts = _starts()
    params, _ = _kiln_run(name, kw, starts)
    ref_kw = {k: v for k, v in kw.items() if k != "foreach"}
    for i, start in enumerate(starts):
        p, st = start.copy(), {}
        for step in range(STEPS):
            p = REFERENCES[name](p, _grads(step)[i], st, **ref_kw)
        np.testing.assert_allclose(params[i].detach().numpy(), p, rtol=1e-10, atol=1e-12)


def test_asgd_averages_iterates_after_t0():
    starts = _starts()
    params, opt = _kiln_run("ASGD", dict(lr=0.1, t0=2), starts)
    for i, start in enumerate(starts):
        p, st = start.copy(), {}
        for step in range(STEPS):
            p = _asgd(p, _grads(step)[i], st, lr=0.1, t0=2)
        state = opt.state[params[i]]
        np.testing.assert_allclose(state["ax"].numpy(), st["ax"], rtol=1e-12)
        assert state["eta"].dtype == kiln.float32 and state["eta"].dim() == 0
        assert state["mu"].item() == pytest.approx(1 / (STEPS - 2))
        # ax is no longer a copy of the parameter once averaging starts.
        assert not np.allclose(state["ax"].numpy(), params[i].detach().numpy())


def test_rprop_step_sizes_are_clamped_and_skip_after_sign_flip():
    p = kiln.tensor([1.0, 1.0], requires_grad=True)
    opt = kiln.optim.Rprop([p], lr=0.1, etas=(0.5, 2.0), step_sizes=(0.04, 0.3))
    for g in ([1.0, 1.0], [1.0, -1.0], [1.0, 1.0], [1.0, 1.0]):
        p.grad = kiln.tensor(g)
        opt.step()
    # Element 0 grows 0.1 -> 0.2 -> 0.3 (clamped from 0.4) -> 0.3; element 1 flips sign: its
    # step shrinks 0.1 -> 0.05 without moving, restarts from a zero comparison (0.05) and
    # grows to 0.1.
    np.testing.assert_allclose(opt.state[p]["step_size"].numpy(), [0.3, 0.1], rtol=1e-6)
    np.testing.assert_allclose(p.detach().numpy(), [1 - 0.1 - 0.2 - 0.3 - 0.3,
                                                    1 - 0.1 - 0.0 - 0.05 - 0.1], rtol=1e-6)


def test_adafactor_factors_matrices_and_keeps_vectors_whole():
    params, opt = _kiln_run("Adafactor", {}, _starts(), steps=1)
    assert list(opt.state[params[0]]) == ["step", "row_var", "col_var"]
    assert list(opt.state[params[0]]["row_var"].shape) == [4, 1]
    assert list(opt.state[params[0]]["col_var"].shape) == [1, 3]
    assert list(opt.state[params[1]]) == ["step", "variance"]


@pytest.mark.parametrize("kw", [dict(), dict(nesterov=False, momentum=0.8, weight_decay=0.0),
                                dict(adjust_lr_fn="match_rms_adamw", lr=0.01),
                                dict(adjust_lr_fn="spectral_unclamped")])
def test_muon_matches_numpy_newton_schulz(kw):
    starts = [RNG.uniform(-1, 1, s) for s in [(6, 4), (3, 8)]]
    params = [kiln.tensor(a, requires_grad=True) for a in starts]
    opt = kiln.optim.Muon(params, **kw)
    refs = [(a.copy(), {}) for a in starts]
    for step in range(3):
        grads = [np.random.default_rng(step).uniform(-1, 1, a.shape) for a in starts]
        for p, g in zip(params, grads):
            p.grad = kiln.tensor(g)
        opt.step()
        refs = [(_muon(p, g, st, **kw), st) for (p, st), g in zip(refs, grads)]
    for p, start, (ref, _) in zip(params, starts, refs):
        # The iteration runs in bfloat16, as PyTorch's does: up to ~10% of the total move.
        moved = np.abs(ref - start).max()
        assert moved > 1e-4
        np.testing.assert_allclose(p.detach().numpy(), ref, rtol=0, atol=0.1 * moved)


def test_muon_orthogonalizes_the_update():
    g = RNG.standard_normal((8, 5))
    p = kiln.zeros((8, 5), dtype=kiln.float64, requires_grad=True)
    opt = kiln.optim.Muon([p], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False,
                          adjust_lr_fn="spectral_unclamped", ns_steps=10)
    p.grad = kiln.tensor(g)
    opt.step()
    update = -p.detach().numpy() / math.sqrt(8 / 5)
    singular = np.linalg.svd(update, compute_uv=False)
    # Muon's quintic maps singular values near 1 (roughly into [0.5, 1.5]), not exactly 1.
    assert singular.min() > 0.5 and singular.max() < 1.5
    u, _, vt = np.linalg.svd(g, full_matrices=False)
    assert np.abs(update - u @ vt).max() < 0.5


def test_sparse_adam_refuses_dense_gradients():
    p = kiln.ones(3, requires_grad=True)
    opt = kiln.optim.SparseAdam([p])
    opt.step()  # no gradient: nothing to do
    p.grad = kiln.ones(3)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()
    assert opt.defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)


@pytest.mark.parametrize("cls, kw, exc, message", [
    ("ASGD", dict(lr=-1.0), ValueError, "Invalid learning rate: -1.0"),
    ("ASGD", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    ("ASGD", dict(differentiable=True), NotImplementedError, "differentiable"),
    ("Rprop", dict(lr=-0.1), ValueError, "Invalid learning rate"),
    ("Rprop", dict(etas=(1.2, 0.5)), ValueError, "Invalid eta values: 1.2, 0.5"),
    ("Adafactor", dict(lr=-1.0), ValueError, "Learning rate should be >= 0 but is: -1.0"),
    ("Adafactor", dict(beta2_decay=0.5), ValueError, "beta2_decay should be <= 0"),
    ("Adafactor", dict(eps=(-1.0, 1e-3)), ValueError, "epsilon1 should be >= 0"),
    ("Adafactor", dict(d=0.5), ValueError, "Clipping threshold d should be >= 1"),
    ("Adafactor", dict(weight_decay=-1), ValueError, "weight_decay should be >= 0"),
    ("Muon", dict(lr=-1.0), ValueError, "Learning rate should be >= 0"),
    ("Muon", dict(momentum=-1.0), ValueError, "momentum should be >= 0"),
    ("Muon", dict(weight_decay=-1.0), ValueError, "weight decay should be >= 0"),
    ("Muon", dict(adjust_lr_fn="typo"), ValueError, "Adjust learning rate function typo"),
    ("SparseAdam", dict(lr=0.0), ValueError, "Invalid learning rate: 0.0"),
    ("SparseAdam", dict(eps=0.0), ValueError, "Invalid epsilon value"),
    ("SparseAdam", dict(betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0"),
])
def test_argument_errors(cls, kw, exc, message):
    with pytest.raises(exc, match=message):
        getattr(kiln.optim, cls)([kiln.ones(2, 2, requires_grad=True)], **kw)


def test_muon_refuses_non_matrix_parameters_and_bad_iterations():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        kiln.optim.Muon([kiln.ones(3, requires_grad=True)])
    p = kiln.ones(2, 2, requires_grad=True)
    opt = kiln.optim.Muon([p], ns_steps=100)
    p.grad = kiln.ones(2, 2)
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        opt.step()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_round_trip(case):
    name, kw = case
    starts = _starts()
    params, opt = _kiln_run(name, kw, starts, steps=3)
    fresh = [kiln.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    other = getattr(kiln.optim, name)(fresh, **kw)
    other.load_state_dict(opt.state_dict())
    for step in range(3, 5):
        for group in (params, fresh):
            for p, g in zip(group, _grads(step)):
                p.grad = kiln.tensor(g)
        opt.step()
        other.step()
    # Loaded floating state takes the parameter's dtype, as in PyTorch (ASGD's float32 eta
    # and mu become float64 here), so only rounding may differ.
    for a, b in zip(params, fresh):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# Against PyTorch (installed on the GPU machine; /work/torch-site on the development machines).

TORCH_CASES = CASES + [("Muon", dict()), ("Muon", dict(nesterov=False, adjust_lr_fn="original")),
                       ("Muon", dict(lr=0.02, momentum=0.9, weight_decay=0.0,
                                     adjust_lr_fn="match_rms_adamw"))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", TORCH_CASES, ids=case_id)
def test_trajectory_matches_torch(case, dtype):
    torch = pytest.importorskip("torch")
    name, kw = case
    shapes = [(4, 3), (3, 6)] if name == "Muon" else SHAPES
    starts = [RNG.uniform(-2, 2, s).astype(dtype) for s in shapes]
    kp = [kiln.tensor(a, requires_grad=True) for a in starts]
    tp = [torch.tensor(a, requires_grad=True) for a in starts]
    kopt = getattr(kiln.optim, name)(kp, **kw)
    topt = getattr(torch.optim, name)(tp, **kw)
    for step in range(STEPS):
        for k, t, s in zip(kp, tp, shapes):
            g = np.random.default_rng(step).uniform(-1, 1, s).astype(dtype) * (-1) ** step
            k.grad, t.grad = kiln.tensor(g), torch.tensor(g)
        kopt.step()
        topt.step()
    # Muon's Newton-Schulz runs in bfloat16 in both; the matmul's rounding may differ.
    rtol = 1e-5 if dtype == "float32" else 1e-11
    atol = rtol * 1e-1
    if name == "Muon":  # bfloat16 Newton-Schulz: a few percent of the total move
        rtol, atol = 0, 0.05 * max(np.abs(t.detach().numpy() - s).max() for t, s in
                                   zip(tp, starts))
    for k, t in zip(kp, tp):
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
    ksd, tsd = kopt.state_dict(), topt.state_dict()
    assert sorted(ksd["param_groups"][0]) == sorted(tsd["param_groups"][0])
    for i, tstate in tsd["state"].items():
        assert list(ksd["state"][i]) == list(tstate)
        for key, tv in tstate.items():
            kv = ksd["state"][i][key]
            if not isinstance(tv, torch.Tensor):
                assert kv == tv
                continue
            assert kv.dtype == getattr(kiln, str(tv.dtype).split(".")[1]), key
            scale = max(1.0, float(np.abs(tv.numpy()).max(initial=0)))
            np.testing.assert_allclose(kv.numpy(), tv.numpy(), rtol=max(rtol, 1e-5) * 10,
                                       atol=max(atol, 1e-6) * scale)
