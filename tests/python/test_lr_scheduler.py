"""kiln.optim.lr_scheduler: lr sequences against hand-computed closed forms, state dicts and
argument errors."""

import math
from bisect import bisect_right

import numpy as np
import pytest

import kiln
from kiln.optim import lr_scheduler as S
from helpers import rand


def make_opt(lr=1.0, groups=1, cls=kiln.optim.SGD, **kw):
    params = [kiln.tensor(rand(2), requires_grad=True) for _ in range(groups)]
    return cls([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(params)], lr=lr, **kw)


def lrs_over(opt, sched, epochs):
    """The lr of each group at epochs 0..epochs-1 (after construction, then after each step)."""
    out = []
    for _ in range(epochs):
        out.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == out[-1]
        opt.step()
        sched.step()
    return np.array(out)


def closed_form(fn, epochs, groups=2):
    return np.array([[fn(e, float(i + 1)) for i in range(groups)] for e in range(epochs)])


CASES = {
    "StepLR": (lambda o: S.StepLR(o, step_size=3, gamma=0.1),
               lambda e, b: b * 0.1 ** (e // 3)),
    "MultiStepLR": (lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 8], gamma=0.5),
                    lambda e, b: b * 0.5 ** bisect_right([2, 5, 5, 8], e)),
    "ExponentialLR": (lambda o: S.ExponentialLR(o, gamma=0.9), lambda e, b: b * 0.9**e),
    "CosineAnnealingLR": (lambda o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
                          lambda e, b: 0.01 + (b - 0.01) * (1 + math.cos(math.pi * e / 7)) / 2),
    "LambdaLR": (lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)), lambda e, b: b / (1 + e)),
    "MultiplicativeLR": (lambda o: S.MultiplicativeLR(o, lambda e: 0.8),
                         lambda e, b: b * 0.8**e),
    "LinearLR": (lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
                 lambda e, b: b * (0.25 + 0.65 * min(6, e) / 6)),
    "ConstantLR": (lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
                   lambda e, b: b * (0.5 if e < 4 else 1.0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sequence_matches_closed_form(name):
    make, formula = CASES[name]
    opt = make_opt(groups=2)
    sched = make(opt)
    assert [g["initial_lr"] for g in opt.param_groups] == [1.0, 2.0]
    assert sched.last_epoch == 0
    got = lrs_over(opt, sched, 25)
    np.testing.assert_allclose(got, closed_form(formula, 25), rtol=1e-12, atol=1e-15)
    assert sched.last_epoch == 25


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "LinearLR", "ConstantLR"])
def test_step_to_epoch_uses_closed_form(name):
    make, formula = CASES[name]
    opt = make_opt(groups=2)
    sched = make(opt)
    sched.step(9)
    np.testing.assert_allclose(sched.get_last_lr(), [formula(9, 1.0), formula(9, 2.0)],
                               rtol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_resumes(name):
    make, _ = CASES[name]
    opt = make_opt(groups=2)
    sched = make(opt)
    for _ in range(5):
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 5
    opt2 = make_opt(groups=2)
    sched2 = make(opt2)
    opt2.load_state_dict(opt.state_dict())  # restores the groups' lrs
    sched2.load_state_dict(sd)
    for _ in range(6):
        sched.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
        assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]


def test_lambda_state_dict_saves_callable_objects():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, e):
            return self.rate**e

    opt = make_opt()
    sched = S.LambdaLR(opt, Decay())
    sched.lr_lambdas[0].rate = 0.25
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.25}]
    sched2 = S.LambdaLR(make_opt(), Decay())
    sched2.load_state_dict(sd)
    assert sched2.lr_lambdas[0].rate == 0.25
    assert S.LambdaLR(make_opt(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]


def test_resume_needs_initial_lr():
    with pytest.raises(KeyError, match=r"initial_lr"):
        S.StepLR(make_opt(), step_size=2, last_epoch=3)
    opt = make_opt()
    opt.param_groups[0]["initial_lr"] = 0.5
    sched = S.ExponentialLR(opt, gamma=0.5, last_epoch=3)
    assert sched.last_epoch == 4 and sched.base_lrs == [0.5]


def test_sequential_lr():
    opt = make_opt(groups=1)
    warm = S.ConstantLR(opt, factor=0.1, total_iters=2)
    decay = S.ExponentialLR(opt, gamma=0.9)
    sched = S.SequentialLR(opt, [warm, decay], milestones=[2])
    got = lrs_over(opt, sched, 6)[:, 0]
    np.testing.assert_allclose(got, [0.1, 0.1, 1.0, 0.9, 0.81, 0.729], rtol=1e-12)
    sd = sched.state_dict()
    assert "optimizer" not in sd and len(sd["_schedulers"]) == 2
    with pytest.raises(ValueError, match=r"\[SequentialLR\] .*number of milestones"):
        S.SequentialLR(opt, [warm, decay], milestones=[2, 3])
    with pytest.raises(ValueError, match=r"\[SequentialLR\] expects at least one scheduler"):
        S.SequentialLR(opt, [], milestones=[])


def one_cycle_expected(step, total, max_lr, pct=0.3, div=25.0, final_div=1e4, lo=0.85, hi=0.95):
    def cos(start, end, frac):
        return end + (start - end) / 2 * (math.cos(math.pi * frac) + 1)
    init = max_lr / div
    up_end = pct * total - 1
    if step <= up_end:
        frac = step / up_end
        return cos(init, max_lr, frac), cos(hi, lo, frac)
    frac = (step - up_end) / (total - 1 - up_end)
    return cos(max_lr, init / final_div, frac), cos(lo, hi, frac)


@pytest.mark.parametrize("cls", [kiln.optim.SGD, kiln.optim.Adam])
def test_one_cycle(cls):
    opt = make_opt(cls=cls, **({"momentum": 0.9} if cls is kiln.optim.SGD else {}))
    sched = S.OneCycleLR(opt, max_lr=0.1, total_steps=20)
    for step in range(20):
        lr, momentum = one_cycle_expected(step, 20, 0.1)
        group = opt.param_groups[0]
        assert group["lr"] == pytest.approx(lr, rel=1e-12)
        got_m = group["betas"][0] if cls is kiln.optim.Adam else group["momentum"]
        assert got_m == pytest.approx(momentum, rel=1e-12)
        if step < 19:
            sched.step()
    with pytest.raises(ValueError, match=r"Tried to step 21 times"):
        sched.step()
        sched.step()


def test_one_cycle_linear_three_phase():
    opt = make_opt(momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="linear",
                         three_phase=True, div_factor=10.0, final_div_factor=100.0)
    got = lrs_over(opt, sched, 10)[:, 0]
    # Phases end at steps 2 (up to 1.0), 4 (back to 0.1), 9 (down to 0.001).
    want = [0.1, 0.55, 1.0, 0.55, 0.1, 0.1 - 0.099 * 0.2, 0.1 - 0.099 * 0.4, 0.1 - 0.099 * 0.6,
            0.1 - 0.099 * 0.8, 0.001]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_one_cycle_errors():
    opt = make_opt(momentum=0.9)
    with pytest.raises(ValueError, match=r"You must define either total_steps"):
        S.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match=r"Expected positive integer total_steps, but got 0"):
        S.OneCycleLR(opt, max_lr=0.1, total_steps=0)
    with pytest.raises(ValueError, match=r"Expected float between 0 and 1 pct_start"):
        S.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=2.0)
    with pytest.raises(ValueError, match=r"anneal_strategy must be one of"):
        S.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match=r"max_lr must have the same length"):
        S.OneCycleLR(opt, max_lr=[0.1, 0.2], total_steps=10)
    sched = S.OneCycleLR(opt, max_lr=0.1, epochs=2, steps_per_epoch=5)
    assert sched.total_steps == 10


def test_reduce_lr_on_plateau():
    opt = make_opt(lr=1.0)
    sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, cooldown=1,
                                min_lr=0.2)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    want = [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2]
    got = []
    for m in metrics:
        sched.step(m)
        got.append(opt.param_groups[0]["lr"])
    assert got == want
    assert sched.get_last_lr() == [0.2]
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["best"] == 0.9 and sd["last_epoch"] == 13
    other = S.ReduceLROnPlateau(make_opt(lr=0.2))
    other.load_state_dict(sd)
    assert other.patience == 2 and other.num_bad_epochs == sched.num_bad_epochs


@pytest.mark.parametrize("mode, threshold_mode, metrics, want", [
    ("max", "rel", [10.0, 10.5], [1.0, 0.1]),   # 10.5 is not above 10 * 1.1
    ("max", "abs", [10.0, 10.5], [1.0, 1.0]),   # 10.5 is above 10 + 0.1
    ("min", "rel", [10.0, 9.5], [1.0, 0.1]),    # 9.5 is not below 10 * 0.9
    ("min", "abs", [10.0, 9.5], [1.0, 1.0]),
])
def test_reduce_lr_on_plateau_modes(mode, threshold_mode, metrics, want):
    opt = make_opt(lr=1.0)
    sched = S.ReduceLROnPlateau(opt, mode=mode, threshold_mode=threshold_mode, threshold=0.1,
                                patience=0, factor=0.1)
    got = []
    for m in metrics:
        sched.step(m)
        got.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_reduce_lr_on_plateau_errors():
    opt = make_opt()
    with pytest.raises(ValueError, match=r"\[ReduceLROnPlateau\] Factor should be < 1.0"):
        S.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match=r"mode sideways is unknown"):
        S.ReduceLROnPlateau(opt, mode="sideways")
    with pytest.raises(ValueError, match=r"threshold mode x is unknown"):
        S.ReduceLROnPlateau(opt, threshold_mode="x")
    with pytest.raises(ValueError, match=r"expected 1 min_lrs, got 2"):
        S.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2])


def test_factor_errors():
    opt = make_opt()
    with pytest.raises(ValueError, match=r"\[ConstantLR\] Constant multiplicative factor"):
        S.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match=r"\[LinearLR\] Starting multiplicative factor"):
        S.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match=r"\[LinearLR\] Ending multiplicative factor"):
        S.LinearLR(opt, end_factor=1.5)
    with pytest.raises(ValueError, match=r"\[LambdaLR\] Expected 1 lr_lambdas, but got 2"):
        S.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0])


def test_scheduler_step_before_optimizer_step_is_silent(recwarn):
    opt = make_opt()
    sched = S.StepLR(opt, step_size=1)
    sched.step()
    assert len(recwarn) == 0
