"""kiln.optim against PyTorch itself (runs where torch is installed: the GPU machine): the same
initial weights and gradients give the same parameters, state and lr sequences."""

import warnings

import numpy as np
import pytest

import kiln
from helpers import rand, requires_gpu
from optim_cases import CASES, case_id

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]
SHAPES = [(3, 4), (5,), (257, 129)]


def kiln_dtype(dtype):
    return kiln.float64 if dtype == "float64" else kiln.float32


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_parameters_match_torch(case, dtype, device):
    name, kw = case
    inits = [rand(*s).astype(dtype) for s in SHAPES]
    kp = [kiln.tensor(a).to(device).requires_grad_() for a in inits]
    tp = [torch.tensor(a, device=device, requires_grad=True) for a in inits]
    # A float64 twin of PyTorch's run: where float32 results differ by more than rounding
    # (centered RMSprop's sqrt(E[g^2] - E[g]^2) cancels), kiln must be as close to it as
    # PyTorch's float32 is.
    tp64 = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in inits]
    kopt = getattr(kiln.optim, name)(kp, **kw)
    topt = getattr(torch.optim, name)(tp, **kw)
    topt64 = getattr(torch.optim, name)(tp64, **kw)
    for _ in range(10):
        for k, t, t64, s in zip(kp, tp, tp64, SHAPES):
            g = rand(*s).astype(dtype)
            k.grad = kiln.tensor(g).to(device)
            t.grad = torch.tensor(g, device=device)
            t64.grad = torch.tensor(g.astype(np.float64))
        kopt.step()
        topt.step()
        topt64.step()
    rtol = 1e-5 if dtype == "float32" else 1e-10
    for k, t, t64 in zip(kp, tp, tp64):
        got, want = k.detach().cpu().numpy(), t.detach().cpu().numpy()
        exact = t64.detach().numpy()
        as_torch = np.abs(got - want) <= rtol * np.abs(want) + rtol * 1e-1
        if as_torch.all():
            continue
        # Rounding differences amplified by the same cancellation: each such element within
        # a small factor of PyTorch's own float32 error. (The error norm is no measure here:
        # one ill-conditioned element dominates it, and which one depends on rounding luck.)
        err, torch_err = np.abs(got - exact), np.abs(want - exact)
        bad = ~as_torch & (err > 4 * torch_err + rtol * 1e-1)
        assert not bad.any(), (f"{bad.sum()} of {bad.size} elements differ from PyTorch's "
                               f"beyond rounding and are less accurate: kiln {got[bad][:4]}, "
                               f"torch {want[bad][:4]}, float64 {exact[bad][:4]}")
    ksd, tsd = kopt.state_dict(), topt.state_dict()
    assert sorted(ksd["param_groups"][0]) == sorted(tsd["param_groups"][0])
    assert ksd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]
    assert list(ksd["state"]) == list(tsd["state"])
    for i, tstate in tsd["state"].items():
        kstate = ksd["state"][i]
        assert list(kstate) == list(tstate)
        for key, tv in tstate.items():
            kv = kstate[key]
            if key == "step":
                assert kv.dim() == tv.dim() == 0 and kv.item() == tv.item()
            else:
                # Buffers mix terms of the state's magnitude that cancel: float32
                # rounding is absolute at that scale, not relative per element.
                want = tv.cpu().numpy()
                scale = max(1.0, float(np.abs(want).max(initial=0)))
                np.testing.assert_allclose(kv.cpu().numpy(), want, rtol=rtol * 10,
                                           atol=(1e-6 if dtype == "float32" else 1e-12) * scale)


SCHEDULERS = [
    ("StepLR", dict(step_size=4, gamma=0.3)),
    ("MultiStepLR", dict(milestones=[3, 7, 7, 20], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.93)),
    ("CosineAnnealingLR", dict(T_max=9, eta_min=0.002)),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=7)),
    ("ConstantLR", dict(factor=0.4, total_iters=5)),
    ("OneCycleLR", dict(max_lr=0.3, total_steps=40)),
    ("OneCycleLR", dict(max_lr=[0.3, 0.5], total_steps=40, anneal_strategy="linear",
                        three_phase=True, pct_start=0.2)),
]


def sched_sequence(mod, opt, name, kw, steps=39):
    sched = getattr(mod.optim.lr_scheduler, name)(opt, **kw)
    seq = []
    for _ in range(steps):
        seq.append([g["lr"] for g in opt.param_groups]
                   + [g.get("momentum", g.get("betas", (0,))[0]) for g in opt.param_groups])
        opt.step()
        sched.step()
    return np.array(seq)


def two_groups(mod, cls_name):
    ps = [mod.tensor([1.0, 2.0], requires_grad=True) for _ in range(2)]
    extra = {"momentum": 0.9} if cls_name == "SGD" else {}
    return getattr(mod.optim, cls_name)([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}],
                                        lr=0.1, **extra)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("sched", SCHEDULERS, ids=lambda s: s[0] + str(len(s[1])))
def test_scheduler_sequences_match_torch(sched, optimizer):
    name, kw = sched
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = sched_sequence(torch, two_groups(torch, optimizer), name, kw)
    got = sched_sequence(kiln, two_groups(kiln, optimizer), name, kw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_lambda_and_sequential_match_torch():
    def build(mod):
        opt = two_groups(mod, "SGD")
        S = mod.optim.lr_scheduler
        warm = S.LinearLR(opt, start_factor=0.2, total_iters=3)
        mult = S.MultiplicativeLR(opt, lambda e: 0.95)
        lam = S.LambdaLR(opt, [lambda e: 0.9**e, lambda e: 1 / (e + 1)])
        cos = S.CosineAnnealingLR(opt, T_max=6)
        return opt, S.SequentialLR(opt, [warm, mult, lam, cos], milestones=[3, 8, 12])

    seqs = []
    for mod in (torch, kiln):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt, sched = build(mod)
            seq = []
            for _ in range(25):
                seq.append([g["lr"] for g in opt.param_groups])
                opt.step()
                sched.step()
            seqs.append(np.array(seq))
    np.testing.assert_allclose(seqs[1], seqs[0], rtol=1e-12, atol=1e-15)


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [5, 4, 4.5, 4.2, 4.1, 4.0, 4.0, 4.0, 3.0, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5]
    seqs = []
    for mod in (torch, kiln):
        opt = two_groups(mod, "Adam")
        sched = mod.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5, cooldown=1,
                                                         min_lr=[0.01, 0.02], threshold=0.01)
        seq = []
        for m in metrics:
            sched.step(m)
            seq.append([g["lr"] for g in opt.param_groups])
        seqs.append(np.array(seq))
    np.testing.assert_allclose(seqs[1], seqs[0], rtol=1e-12)
