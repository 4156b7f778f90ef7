"""kiln.optim against NumPy re-implementations of PyTorch's algorithms, plus the Optimizer
base class's behaviour (groups, state dicts, hooks, errors)."""

import numpy as np
import pytest

import kiln
from helpers import RNG, rand, requires_gpu
from optim_cases import CASES, case_id, reference

SHAPES = [(3, 4), (5,), (300, 300)]  # the last one is big enough for the threaded path
STEPS = 10


def make_params(shapes, dtype):
    arrays = [rand(*s) for s in shapes]
    params = [kiln.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    start = [p.detach().double().numpy().copy() for p in params]
    return params, start


def make_grads(shapes, steps=STEPS):
    return [[rand(*s) for s in shapes] for _ in range(steps)]


def run_steps(opt, params, grads, dtype):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = kiln.tensor(g, dtype=dtype)
        opt.step()


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32])
def test_matches_reference(case, dtype):
    name, kw = case
    params, start = make_params(SHAPES, dtype)
    grads = make_grads(SHAPES)
    opt = getattr(kiln.optim, name)(params, **kw)
    run_steps(opt, params, grads, dtype)
    rtol, atol = (1e-6, 1e-9) if dtype == kiln.float64 else (1e-5, 1e-5)
    for i, p in enumerate(params):
        # float32 runs compare against the reference fed the same float32-rounded values.
        cast = np.float64 if dtype == kiln.float64 else np.float32
        want = reference(name, start[i].astype(cast), [g[i].astype(cast) for g in grads], kw)
        assert p.dtype == dtype
        np.testing.assert_allclose(p.detach().double().numpy(), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_half_params(name, dtype):
    # Half parameters update in float and round once per step.
    kw = {"lr": 0.01, "momentum": 0.9} if name == "SGD" else {"lr": 0.01}
    p = kiln.tensor(rand(4, 5), dtype=dtype, requires_grad=True)
    start = p.detach().double().numpy().copy()
    grads = [kiln.tensor(rand(4, 5), dtype=dtype) for _ in range(3)]
    opt = getattr(kiln.optim, name)([p], **kw)
    for g in grads:
        p.grad = g
        opt.step()
    assert p.dtype == dtype
    state = opt.state[p]["momentum_buffer" if name == "SGD" else "step"]
    assert state.dtype == (dtype if name == "SGD" else kiln.float32)
    want = reference(name, start, [g.double().numpy() for g in grads], kw)
    tol = 1e-2 if dtype == kiln.float16 else 5e-2
    np.testing.assert_allclose(p.detach().double().numpy(), want, rtol=tol, atol=tol)


def test_state_layout_matches_pytorch():
    p = kiln.tensor(rand(3), requires_grad=True)
    q = kiln.tensor(rand(2), requires_grad=True)
    opt = kiln.optim.Adam([p, q], amsgrad=True)
    p.grad = kiln.tensor(rand(3))
    opt.step()
    opt.step()
    st = opt.state[p]
    assert list(st) == ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
    assert st["step"].dtype == kiln.float32 and st["step"].dim() == 0
    assert st["step"].device.type == "cpu" and st["step"].item() == 2.0
    assert q not in opt.state  # no grad, no state
    sd = opt.state_dict()
    assert list(sd) == ["state", "param_groups"]
    assert list(sd["state"]) == [0]
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert sd["param_groups"][0]["lr"] == 1e-3 and sd["param_groups"][0]["betas"] == (0.9, 0.999)

    opt = kiln.optim.RMSprop([p], momentum=0.5, centered=True)
    p.grad = kiln.tensor(rand(3))
    opt.step()
    assert list(opt.state[p]) == ["step", "square_avg", "momentum_buffer", "grad_avg"]
    opt = kiln.optim.SGD([p], lr=0.1, momentum=0.9)
    opt.step()
    assert list(opt.state[p]) == ["momentum_buffer"]
    assert kiln.optim.SGD([p], lr=0.1).state_dict()["state"] == {}
    opt = kiln.optim.Adagrad([p, q], initial_accumulator_value=0.25)
    assert list(opt.state[q]) == ["step", "sum"]  # created eagerly, as in PyTorch
    np.testing.assert_allclose(opt.state[q]["sum"].numpy(), [0.25, 0.25])


def test_param_groups_with_different_lr():
    a = kiln.tensor(rand(4), requires_grad=True)
    b = kiln.tensor(rand(3), requires_grad=True)
    start = [a.detach().numpy().copy(), b.detach().numpy().copy()]
    opt = kiln.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[0]["momentum"] == 0 and opt.param_groups[1]["params"] == [b]
    grads = [[rand(4), rand(3)] for _ in range(3)]
    run_steps(opt, [a, b], grads, kiln.float64)
    np.testing.assert_allclose(a.detach().numpy(),
                               reference("SGD", start[0], [g[0] for g in grads], {"lr": 0.1}))
    np.testing.assert_allclose(b.detach().numpy(), reference(
        "SGD", start[1], [g[1] for g in grads], {"lr": 0.5, "momentum": 0.9}))


def test_add_param_group():
    a = kiln.tensor(rand(2), requires_grad=True)
    b = kiln.tensor(rand(2), requires_grad=True)
    opt = kiln.optim.Adam([a], lr=0.1)
    opt.add_param_group({"params": b, "eps": 1e-3})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["eps"] == 1e-3
    with pytest.raises(ValueError, match=r"\[Adam.add_param_group\] some parameters appear"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match=r"\[Adam.add_param_group\] param_group must be a dict"):
        opt.add_param_group([a])
    with pytest.raises(TypeError, match=r"ordered collections"):
        opt.add_param_group({"params": {kiln.tensor(rand(2), requires_grad=True)}})


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_construction_errors(name):
    cls = getattr(kiln.optim, name)
    p = kiln.tensor(rand(2), requires_grad=True)
    with pytest.raises(ValueError, match=rf"\[{name}\] Invalid learning rate: -1"):
        cls([p], lr=-1)
    with pytest.raises(ValueError, match=r"empty parameter list"):
        cls([], lr=0.1)
    with pytest.raises(TypeError, match=r"iterable of Tensors or dicts"):
        cls(p, lr=0.1)
    with pytest.raises(TypeError, match=r"can only optimize Tensors, but params\[1\] is"):
        cls([p, 3.0], lr=0.1)
    with pytest.raises(ValueError, match=r"can't optimize a non-leaf Tensor"):
        cls([p * 2], lr=0.1)
    with pytest.raises(ValueError, match=r"duplicate parameters"):
        cls([p, p], lr=0.1)
    with pytest.raises(NotImplementedError, match=rf"\[{name}\] differentiable"):
        cls([p], lr=0.1, differentiable=True)


@pytest.mark.parametrize("cls, kw, message", [
    (kiln.optim.SGD, dict(momentum=-0.1), "Invalid momentum value: -0.1"),
    (kiln.optim.SGD, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (kiln.optim.SGD, dict(nesterov=True), "Nesterov momentum requires a momentum and zero"),
    (kiln.optim.SGD, dict(nesterov=True, momentum=0.9, dampening=0.1), "Nesterov momentum"),
    (kiln.optim.Adam, dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (kiln.optim.Adam, dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (kiln.optim.AdamW, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (kiln.optim.AdamW, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (kiln.optim.RMSprop, dict(alpha=-0.5), "Invalid alpha value: -0.5"),
    (kiln.optim.RMSprop, dict(momentum=-1), "Invalid momentum value: -1"),
    (kiln.optim.Adagrad, dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    (kiln.optim.Adagrad, dict(initial_accumulator_value=-1),
     "Invalid initial_accumulator_value value: -1"),
])
def test_hyper_parameter_errors(cls, kw, message):
    p = kiln.tensor(rand(2), requires_grad=True)
    with pytest.raises(ValueError, match=message):
        cls([p], **kw)


def test_fused_and_foreach_exclusive():
    p = kiln.tensor(rand(2), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[Adam\] `fused` and `foreach`"):
        kiln.optim.Adam([p], fused=True, foreach=True)
    kiln.optim.Adam([p], fused=True).step()  # accepted: kiln's step is always fused


def state_snapshot(opt):
    sd = opt.state_dict()
    return {"state": {k: {n: (v.clone() if isinstance(v, kiln.Tensor) else v)
                          for n, v in s.items()} for k, s in sd["state"].items()},
            "param_groups": sd["param_groups"]}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_state_dict_round_trip(case):
    name, kw = case
    shapes = [(3, 4), (5,)]
    params, start = make_params(shapes, kiln.float32)
    grads = make_grads(shapes, 6)
    opt = getattr(kiln.optim, name)(params, **kw)
    run_steps(opt, params, grads[:3], kiln.float32)
    saved = state_snapshot(opt)
    copies = [kiln.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    # The new optimizer is built with other hyper-parameters: load_state_dict restores them.
    other = getattr(kiln.optim, name)(copies, lr=0.5)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert other.param_groups[0]["params"] == copies
    run_steps(opt, params, grads[3:], kiln.float32)
    run_steps(other, copies, grads[3:], kiln.float32)
    for p, c in zip(params, copies):
        np.testing.assert_array_equal(p.detach().numpy(), c.detach().numpy())
    # The loaded state is the loader's own: the snapshot did not move.
    for k, s in other.state_dict()["state"].items():
        for n, v in s.items():
            if isinstance(v, kiln.Tensor):
                assert v is not saved["state"][k][n]


def test_load_state_dict_casts_and_validates():
    p = kiln.tensor(rand(3), requires_grad=True)
    opt = kiln.optim.Adam([p])
    p.grad = kiln.tensor(rand(3))
    opt.step()
    sd = state_snapshot(opt)
    p32 = kiln.tensor(rand(3), dtype=kiln.float32, requires_grad=True)
    opt32 = kiln.optim.Adam([p32])
    opt32.load_state_dict(sd)
    st = opt32.state[p32]
    assert st["exp_avg"].dtype == kiln.float32 and st["step"].dtype == kiln.float32
    assert st["step"].item() == 1.0
    q = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(ValueError, match=r"\[Adam.load_state_dict\] .*different number of "
                                         r"parameter groups"):
        kiln.optim.Adam([{"params": [p]}, {"params": [q]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match=r"doesn't match the size of optimizer's group"):
        kiln.optim.Adam([p, q]).load_state_dict(sd)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    p = kiln.tensor(rand(3), requires_grad=True)
    q = kiln.tensor(rand(2), requires_grad=True)
    opt = kiln.optim.SGD([p, q], lr=0.1)
    (p * 2).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=set_to_none)
    if set_to_none:
        assert p.grad is None
    else:
        assert p.grad is g
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3))
    assert q.grad is None
    opt.zero_grad()
    assert p.grad is None


def test_closure_and_none_grads():
    w = kiln.tensor(rand(3), requires_grad=True)
    unused = kiln.tensor(rand(2), requires_grad=True)
    before = unused.detach().numpy().copy()
    x = kiln.tensor(rand(3))
    opt = kiln.optim.Adam([w, unused], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (w * x).sum()
        loss.backward()
        return loss

    start = w.detach().numpy().copy()
    loss = opt.step(closure)
    assert len(calls) == 1 and isinstance(loss, kiln.Tensor)
    np.testing.assert_allclose(loss.item(), (start * x.numpy()).sum())
    np.testing.assert_allclose(w.detach().numpy(), reference("Adam", start, [x.numpy()],
                                                             {"lr": 0.1}))
    np.testing.assert_array_equal(unused.detach().numpy(), before)
    assert unused not in opt.state
    assert opt.step() is None


def test_mixed_dtypes_in_one_group():
    a = kiln.tensor(rand(4), dtype=kiln.float32, requires_grad=True)
    b = kiln.tensor(rand(2, 3), dtype=kiln.float64, requires_grad=True)
    starts = [a.detach().double().numpy(), b.detach().numpy().copy()]
    opt = kiln.optim.AdamW([a, b], lr=0.01)
    grads = [[rand(4), rand(2, 3)] for _ in range(4)]
    for step in grads:
        a.grad = kiln.tensor(step[0], dtype=kiln.float32)
        b.grad = kiln.tensor(step[1])
        opt.step()
    assert a.dtype == kiln.float32 and b.dtype == kiln.float64
    want_a = reference("AdamW", starts[0].astype(np.float32),
                       [g[0].astype(np.float32) for g in grads], {"lr": 0.01})
    np.testing.assert_allclose(a.detach().double().numpy(), want_a, rtol=1e-5)
    np.testing.assert_allclose(b.detach().numpy(), reference(
        "AdamW", starts[1], [g[1] for g in grads], {"lr": 0.01}), rtol=1e-10)


def test_non_contiguous_param():
    base = rand(4, 3)
    p = kiln.tensor(base.T.copy()).t().detach().requires_grad_()  # a transposed leaf
    assert not p.is_contiguous()
    opt = kiln.optim.SGD([p], lr=0.1, momentum=0.9)
    grads = [rand(4, 3) for _ in range(3)]
    for g in grads:
        p.grad = kiln.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), reference(
        "SGD", base, grads, {"lr": 0.1, "momentum": 0.9}))


def test_step_bumps_version():
    p = kiln.tensor(rand(3), requires_grad=True)
    opt = kiln.optim.SGD([p], lr=0.1)
    p.grad = kiln.tensor(rand(3))
    v = p._version
    opt.step()
    assert p._version > v


def test_step_hooks():
    p = kiln.tensor(rand(3), requires_grad=True)
    opt = kiln.optim.SGD([p], lr=0.1)
    p.grad = kiln.tensor(rand(3))
    seen = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: seen.append(("pre", o)))
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append(("post", o)))
    opt.step()
    assert seen == [("pre", opt), ("post", opt)]
    pre.remove()
    opt.step()
    assert seen[2:] == [("post", opt)]


def test_step_hooks_run_once_for_subclass_steps():
    class Clipped(kiln.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    p = kiln.tensor(rand(3), requires_grad=True)
    p.grad = kiln.tensor(rand(3))
    opt = Clipped([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.step()
    assert calls == ["pre", "post"]


def test_repr():
    p = kiln.tensor(rand(3), requires_grad=True)
    text = repr(kiln.optim.SGD([p], lr=0.1))
    assert text.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.1\n" in text


def test_fused_functions_check_their_arguments():
    p = kiln.tensor(rand(3))
    g = kiln.tensor(rand(3))
    s = kiln.zeros((), dtype=kiln.float32)
    z = kiln.zeros(3, dtype=kiln.float64)
    with pytest.raises(ValueError, match=r"\[_fused_adam_\] grads has 0 tensors but params has 1"):
        kiln._C._fused_adam_([p], [], [z], [z], [], [s], 0.1, 0.9, 0.99, 0.0, 1e-8, False, False)
    with pytest.raises(RuntimeError, match=r"\[_fused_adam_\] exp_avgs\[0\] has shape \[2\] but "
                                           r"params\[0\] has shape \[3\]"):
        kiln._C._fused_adam_([p], [g], [kiln.zeros(2, dtype=kiln.float64)], [z], [], [s], 0.1,
                             0.9, 0.99, 0.0, 1e-8, False, False)
    with pytest.raises(RuntimeError, match=r"\[_fused_sgd_\] grads\[0\] has dtype float32"):
        kiln._C._fused_sgd_([p], [g.float()], [], 0.1, 0.0, 0.0, 0.0, False, False)
    with pytest.raises(RuntimeError, match=r"\[_fused_sgd_\] params\[0\] must be floating"):
        kiln._C._fused_sgd_([kiln.tensor([1, 2])], [kiln.tensor([1, 2])], [], 0.1, 0.0, 0.0,
                            0.0, False, False)
    with pytest.raises(RuntimeError, match=r"\[_fused_adagrad_\] steps\[0\] must be a "
                                           r"one-element float32"):
        kiln._C._fused_adagrad_([p], [g], [z], [kiln.zeros(2)], 0.1, 0.0, 0.0, 1e-10, False)
    with pytest.raises(TypeError, match=r"\[_fused_rmsprop_\] grads must contain tensors"):
        kiln._C._fused_rmsprop_([p], [1.0], [z], [], [], [s], 0.1, 0.9, 1e-8, 0.0, 0.0, False,
                                False)


def test_mlp_training_reduces_loss():
    x = kiln.tensor(rand(64, 8))
    y = kiln.tensor(rand(64, 1))
    w1 = kiln.tensor(rand(8, 16) * 0.3, requires_grad=True)
    w2 = kiln.tensor(rand(16, 1) * 0.3, requires_grad=True)
    opt = kiln.optim.Adam([w1, w2], lr=0.01)
    sched = kiln.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = ((kiln.tanh(x @ w1) @ w2 - y) ** 2).mean()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01 * 0.25)


@requires_gpu
@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16])
def test_cuda_step_matches_cpu(case, dtype):
    name, kw = case
    # Many tensors (more than one launch's worth), odd sizes, a multi-chunk tensor, and an
    # unaligned view (storage offset 1) so both the vector and scalar paths run.
    shapes = [(7,), (300, 300), (70001,), (1,)] + [(i + 2, 3) for i in range(30)]
    cpu, _ = make_params(shapes, dtype)
    gpu = [p.detach().to("cuda").requires_grad_() for p in cpu]
    base = kiln.tensor(rand(1001), dtype=dtype)
    cpu.append(base[1:].detach().requires_grad_())
    gpu.append(base.to("cuda")[1:].detach().requires_grad_())
    assert gpu[-1].data_ptr() % 16 != 0
    opt_cpu = getattr(kiln.optim, name)(cpu, **kw)
    opt_gpu = getattr(kiln.optim, name)(gpu, **kw)
    for _ in range(4):
        for pc, pg in zip(cpu, gpu):
            g = kiln.tensor(rand(*pc.shape), dtype=dtype)
            pc.grad = g
            pg.grad = g.to("cuda")
        opt_cpu.step()
        opt_gpu.step()
    tol = {kiln.float64: 1e-12, kiln.float32: 1e-5, kiln.float16: 1e-2}[dtype]
    for pc, pg in zip(cpu, gpu):
        np.testing.assert_allclose(pg.detach().cpu().double().numpy(),
                                   pc.detach().double().numpy(), rtol=tol, atol=tol)
    st = opt_gpu.state[gpu[0]]
    if "step" in st:
        assert st["step"].device.type == "cpu" and st["step"].item() == 4.0


@requires_gpu
def test_cuda_many_chunks_one_tensor():
    # More chunks than one launch holds (320 x 64K elements).
    n = 25_000_000
    p = kiln.zeros(n, device="cuda", requires_grad=True)
    opt = kiln.optim.SGD([p], lr=0.5)
    p.grad = kiln.ones(n, device="cuda")
    opt.step()
    assert p.detach().min().item() == -0.5 and p.detach().max().item() == -0.5


@requires_gpu
def test_cuda_and_cpu_params_in_one_group():
    a = kiln.tensor(rand(3, 4), requires_grad=True)
    b = kiln.tensor(rand(5), requires_grad=True).detach().to("cuda").requires_grad_()
    starts = [a.detach().numpy().copy(), b.detach().cpu().numpy().copy()]
    opt = kiln.optim.Adam([a, b], lr=0.1, amsgrad=True)
    grads = [[rand(3, 4), rand(5)] for _ in range(3)]
    for ga, gb in grads:
        a.grad = kiln.tensor(ga)
        b.grad = kiln.tensor(gb).to("cuda")
        opt.step()
    kw = {"lr": 0.1, "amsgrad": True}
    np.testing.assert_allclose(a.detach().numpy(),
                               reference("Adam", starts[0], [g[0] for g in grads], kw))
    np.testing.assert_allclose(b.detach().cpu().numpy(),
                               reference("Adam", starts[1], [g[1] for g in grads], kw))
    assert opt.state[b]["exp_avg"].device.type == "cuda"


@requires_gpu
def test_load_cpu_state_into_cuda_optimizer():
    p = kiln.tensor(rand(3, 2), requires_grad=True)
    opt = kiln.optim.Adam([p], lr=0.1)
    p.grad = kiln.tensor(rand(3, 2))
    opt.step()
    q = p.detach().to("cuda").requires_grad_()
    other = kiln.optim.Adam([q], lr=0.1)
    other.load_state_dict(state_snapshot(opt))
    st = other.state[q]
    assert st["exp_avg"].device.type == "cuda" and st["step"].device.type == "cpu"
    g = rand(3, 2)
    p.grad = kiln.tensor(g)
    q.grad = kiln.tensor(g).to("cuda")
    opt.step()
    other.step()
    np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().numpy(), rtol=1e-12)
