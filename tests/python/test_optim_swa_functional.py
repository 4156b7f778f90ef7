"""kiln.optim.swa_utils (AveragedModel, SWALR, update_bn and the averaging functions),
kiln.optim.functional and swap_in_optimizer_params_and_state (issue 17): closed forms with
NumPy, and PyTorch side by side where installed."""

import math

import numpy as np
import pytest

import kiln
from kiln.optim import swa_utils

RNG = np.random.default_rng(3)


def _model(seed=0):
    kiln.manual_seed(seed)
    return kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.BatchNorm1d(4), kiln.nn.Linear(4, 2))


def _snapshots(model, count=4):
    """count successive weight sets of model (shifted in place), as NumPy arrays."""
    snaps = []
    for i in range(count):
        with kiln.no_grad():
            for p in model.parameters():
                p.add_(kiln.tensor(RNG.uniform(-1, 1, tuple(p.shape)), dtype=p.dtype))
            model[1].running_mean.fill_(float(i))
        snaps.append([p.detach().numpy().copy() for p in model.parameters()])
        yield snaps[-1]


def test_averaged_model_is_the_running_mean_and_copies_buffers():
    model = _model()
    avg = swa_utils.AveragedModel(model)
    seen = []
    for snap in _snapshots(model):
        avg.update_parameters(model)
        seen.append(snap)
    assert int(avg.n_averaged) == 4
    for i, p in enumerate(avg.module.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), np.mean([s[i] for s in seen], axis=0),
                                   rtol=1e-5, atol=1e-6)
    # Buffers are copied, not averaged, without use_buffers.
    assert avg.module[1].running_mean.numpy().tolist() == [3.0] * 4
    x = kiln.tensor(RNG.uniform(-1, 1, (5, 3)), dtype=kiln.float32)
    avg.eval()
    np.testing.assert_allclose(avg(x).detach().numpy(), avg.module(x).detach().numpy())
    assert list(avg.state_dict())[0] == "n_averaged"  # own buffers before children, as PyTorch


def test_averaged_model_ema_and_use_buffers():
    model = _model()
    decay = 0.8
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay),
                                  use_buffers=True)
    ema2 = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(decay),
                                   use_buffers=True)
    expected = None
    for snap in _snapshots(model, 3):
        ema.update_parameters(model)
        ema2.update_parameters(model)
        expected = snap if expected is None else [decay * e + (1 - decay) * s
                                                  for e, s in zip(expected, snap)]
    for i, (p, q) in enumerate(zip(ema.module.parameters(), ema2.module.parameters())):
        np.testing.assert_allclose(p.detach().numpy(), expected[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(q.detach().numpy(), expected[i], rtol=1e-5, atol=1e-6)
    # With use_buffers the running mean is averaged too: 0, 1, 2 -> EMA.
    want = (0 * decay + 1 * (1 - decay)) * decay + 2 * (1 - decay)
    np.testing.assert_allclose(ema.module[1].running_mean.numpy(), [want] * 4, rtol=1e-6)


def test_averaging_function_errors():
    with pytest.raises(ValueError, match="Invalid decay value 1.5"):
        swa_utils.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value -0.1"):
        swa_utils.get_ema_avg_fn(-0.1)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(_model(), avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())


def test_update_bn_recomputes_statistics_as_plain_averages():
    model = _model()
    model.eval()
    batches = [kiln.tensor(RNG.uniform(-1, 1, (6, 3)), dtype=kiln.float32) for _ in range(3)]
    loader = [(b, kiln.zeros(6)) for b in batches]
    swa_utils.update_bn(loader, model)
    assert not model.training and model[1].momentum == 0.1
    feats = [model[0](b).detach().numpy() for b in batches]
    np.testing.assert_allclose(model[1].running_mean.numpy(),
                               np.mean([f.mean(0) for f in feats], axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model[1].running_var.numpy(),
                               np.mean([f.var(0, ddof=1) for f in feats], axis=0), rtol=1e-5)
    assert int(model[1].num_batches_tracked) == 3


def _swalr_sequence(lib, kw, epochs=8):
    opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=1.0)
    sched = lib.optim.swa_utils.SWALR(opt, **kw)
    lrs = []
    for _ in range(epochs):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize("kw", [dict(swa_lr=0.1, anneal_epochs=4),
                                dict(swa_lr=0.2, anneal_epochs=3, anneal_strategy="linear"),
                                dict(swa_lr=0.05, anneal_epochs=0)])
def test_swalr_anneals_to_swa_lr(kw):
    lrs = _swalr_sequence(kiln, kw)
    n, swa = kw["anneal_epochs"], kw["swa_lr"]
    cos = kw.get("anneal_strategy", "cos") == "cos"
    for e, lr in enumerate(lrs):
        t = min(1.0, e / max(1, n)) if n else 1.0
        alpha = (1 - math.cos(math.pi * t)) / 2 if cos else t
        assert lr == pytest.approx(swa * alpha + 1.0 * (1 - alpha), rel=1e-9)
    torch = pytest.importorskip("torch")
    assert lrs == pytest.approx(_swalr_sequence(torch, kw), rel=1e-12)


def test_swalr_errors():
    opt = kiln.optim.SGD([kiln.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        swa_utils.SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        swa_utils.SWALR(opt, [0.1, 0.2])


def test_averaged_model_matches_torch():
    torch = pytest.importorskip("torch")
    starts = [RNG.uniform(-1, 1, (4, 3)), RNG.uniform(-1, 1, 4)]
    tm, km = torch.nn.Linear(3, 4), kiln.nn.Linear(3, 4)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(starts[0])), tm.bias.copy_(torch.tensor(starts[1]))
    km.load_state_dict({"weight": kiln.tensor(starts[0], dtype=kiln.float32),
                        "bias": kiln.tensor(starts[1], dtype=kiln.float32)})
    ta, ka = torch.optim.swa_utils.AveragedModel(tm), swa_utils.AveragedModel(km)
    for i in range(5):
        for m, lib in ((tm, torch), (km, kiln)):
            with lib.no_grad():
                m.weight.mul_(0.9).add_(0.1 * i)
        ta.update_parameters(tm)
        ka.update_parameters(km)
    np.testing.assert_allclose(ka.module.weight.detach().numpy(),
                               ta.module.weight.detach().numpy(), rtol=1e-6)
    assert int(ka.n_averaged) == int(ta.n_averaged) == 5


# ---------------------------------------------------------------------------------------------
# optim.functional: the same trajectory as the optimizer classes, on caller-held state.

FUNCTIONAL = [
    ("sgd", "SGD", dict(weight_decay=0.1, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True,
                        maximize=False), ["momentum_buffer"]),
    ("adam", "Adam", dict(amsgrad=True, beta1=0.8, beta2=0.9, lr=0.01, weight_decay=0.1,
                          eps=1e-8, maximize=True),
     ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]),
    ("adamw", "AdamW", dict(amsgrad=False, beta1=0.9, beta2=0.99, lr=0.01, weight_decay=0.1,
                            eps=1e-8, maximize=False),
     ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]),
    ("rmsprop", "RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-8, weight_decay=0.0, momentum=0.5,
                                centered=True), ["square_avg", "grad_avg", "momentum_buffer",
                                                 "step"]),
    ("adagrad", "Adagrad", dict(lr=0.1, weight_decay=0.0, lr_decay=0.01, eps=1e-10,
                                maximize=False), ["sum", "step"]),
    ("adadelta", "Adadelta", dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False),
     ["square_avg", "acc_delta", "step"]),
    ("adamax", "Adamax", dict(eps=1e-8, beta1=0.9, beta2=0.999, lr=0.01, weight_decay=0.0),
     ["exp_avg", "exp_inf", "step"]),
    ("nadam", "NAdam", dict(beta1=0.9, beta2=0.999, lr=0.01, weight_decay=0.0,
                            momentum_decay=4e-3, eps=1e-8),
     ["exp_avg", "exp_avg_sq", "mu_product", "step"]),
    ("radam", "RAdam", dict(beta1=0.9, beta2=0.999, lr=0.01, weight_decay=0.0, eps=1e-8),
     ["exp_avg", "exp_avg_sq", "step"]),
    ("asgd", "ASGD", dict(lambd=1e-2, lr=0.05, t0=1, alpha=0.75, weight_decay=0.0),
     ["ax", "mu", "eta", "step"]),
    ("rprop", "Rprop", dict(step_size_min=1e-6, step_size_max=50, etaminus=0.5, etaplus=1.2),
     ["prev", "step_size", "step"]),
    ("adafactor", "Adafactor", dict(d=1.0, lr=0.01, beta2_decay=-0.8, weight_decay=0.0,
                                    eps1=None, eps2=1e-3, maximize=False),
     ["row_var", "col_var", "variance", "step"]),
]


def _class_kwargs(name, kw):
    kw = dict(kw)
    if "beta1" in kw:
        kw["betas"] = (kw.pop("beta1"), kw.pop("beta2"))
    if name == "Rprop":
        kw = dict(etas=(kw.pop("etaminus"), kw.pop("etaplus")),
                  step_sizes=(kw.pop("step_size_min"), kw.pop("step_size_max")))
    if name == "Adafactor":
        kw["eps"] = (kw.pop("eps1"), kw.pop("eps2"))
    if name == "AdamW":
        kw.pop("amsgrad")
    return kw


@pytest.mark.parametrize("fn, cls, kw, keys", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_matches_the_optimizer_class(fn, cls, kw, keys):
    starts = [RNG.uniform(-1, 1, s) for s in [(3, 4), (5,)]]
    grads = [[RNG.uniform(-1, 1, s.shape) for s in starts] for _ in range(4)]
    cls_params = [kiln.tensor(a, requires_grad=True) for a in starts]
    opt = getattr(kiln.optim, cls)(cls_params, **_class_kwargs(cls, kw))
    # The first step makes the state; the functional form continues from a copy of it.
    for p, g in zip(cls_params, grads[0]):
        p.grad = kiln.tensor(g)
    opt.step()
    fn_params = [p.detach().clone() for p in cls_params]
    lists = {key: [opt.state[p][key].clone() if opt.state[p].get(key) is not None else None
                   for p in cls_params] for key in keys}
    for step in range(1, 4):
        for p, g in zip(cls_params, grads[step]):
            p.grad = kiln.tensor(g)
        opt.step()
        getattr(kiln.optim.functional, fn)(fn_params, [kiln.tensor(g) for g in grads[step]],
                                          *lists.values(), **kw)
    for a, b in zip(cls_params, fn_params):
        np.testing.assert_allclose(a.detach().numpy(), b.numpy(), rtol=1e-12, atol=1e-14)
    if "step" in lists:
        assert [s.item() for s in lists["step"]] == [4.0, 4.0]


def test_functional_sgd_makes_missing_momentum_buffers():
    p = [kiln.tensor([1.0, 2.0])]
    bufs = [None]
    kiln.optim.functional.sgd(p, [kiln.tensor([0.5, 0.5])], bufs, weight_decay=0.0, momentum=0.9,
                              lr=0.1, dampening=0.0, nesterov=False, maximize=False)
    np.testing.assert_allclose(bufs[0].numpy(), [0.5, 0.5])
    np.testing.assert_allclose(p[0].numpy(), [0.95, 1.95])
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        kiln.optim.functional.sparse_adam(p, [kiln.ones(2)], [], [], [], eps=1e-8, beta1=0.9,
                                          beta2=0.99, lr=0.1, maximize=False)


def test_swap_in_optimizer_params_and_state():
    live = [kiln.tensor([1.0, 2.0], requires_grad=True)]
    opt = kiln.optim.Adam(live, lr=0.1)
    live[0].grad = kiln.tensor([1.0, 1.0])
    opt.step()
    live_value = live[0].detach().clone()
    swap = {"w": kiln.tensor([5.0, 5.0], requires_grad=True)}
    osd = {"state": {0: {k: v.clone() for k, v in opt.state[live[0]].items()}},
           "param_groups": [dict(opt.state_dict()["param_groups"][0], lr=1.0)]}
    # What a separate Adam at lr=1.0 with the same state does.
    twin = [kiln.tensor([5.0, 5.0], requires_grad=True)]
    twin_opt = kiln.optim.Adam(twin, lr=1.0)
    twin_opt.load_state_dict(osd)
    twin[0].grad = kiln.tensor([1.0, -1.0])
    twin_opt.step()
    with kiln.optim.swap_in_optimizer_params_and_state(opt, swap, osd):
        assert opt.param_groups[0]["params"][0] is swap["w"]
        swap["w"].grad = kiln.tensor([1.0, -1.0])
        opt.step()
    np.testing.assert_array_equal(swap["w"].detach().numpy(), twin[0].detach().numpy())
    assert not np.allclose(swap["w"].detach().numpy(), [5.0, 5.0])
    # The caller's state tensors were updated in place.
    assert osd["state"][0]["step"].item() == 2.0
    # The live optimizer is untouched.
    assert opt.param_groups[0]["params"][0] is live[0] and opt.param_groups[0]["lr"] == 0.1
    np.testing.assert_array_equal(live[0].detach().numpy(), live_value.numpy())
    assert opt.state[live[0]]["step"].item() == 1.0
    with pytest.raises(ValueError, match="got 2 swap-in parameters for an optimizer of 1"):
        with kiln.optim.swap_in_optimizer_params_and_state(opt, {"a": live[0], "b": live[0]},
                                                            osd):
            pass
    fresh = kiln.optim.SGD([kiln.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
        with kiln.optim.swap_in_optimizer_params_and_state(fresh, {}, osd):
            pass
