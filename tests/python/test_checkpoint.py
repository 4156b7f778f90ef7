"""kiln.utils.checkpoint: recomputed blocks give the plain run's values and gradients."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from kiln.utils.checkpoint import checkpoint, checkpoint_sequential
from helpers import assert_close, rand, requires_gpu


def make_block(seed=0):
    kiln.manual_seed(seed)
    lin = kiln.nn.Linear(4, 5).double()

    def block(x, scale=1.0):
        return F.dropout(lin(x).tanh(), 0.5, True) * scale

    return lin, block


def grads_of(run, x, lin):
    x = x.detach().requires_grad_(True)
    kiln.manual_seed(123)
    out = run(x)
    (out * out).sum().backward()
    return out.detach().numpy(), x.grad.numpy(), lin.weight.grad.numpy()


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_plain_run_with_dropout(use_reentrant):
    lin, block = make_block()
    x = kiln.tensor(rand(3, 4))
    plain = grads_of(block, x, lin)
    lin.zero_grad()
    ckpt = grads_of(lambda t: checkpoint(block, t, use_reentrant=use_reentrant), x, lin)
    for a, b in zip(ckpt, plain):
        assert_close(kiln.tensor(a), b)
    assert (plain[0] == 0).any()  # dropout really dropped something


def test_checkpoint_keeps_no_graph_inside_and_restores_rng():
    lin, block = make_block()
    x = kiln.tensor(rand(3, 4)).requires_grad_(True)
    out = checkpoint(block, x, use_reentrant=True)
    # One node for the whole block: its internals were not recorded.
    assert out.grad_fn.name() == "_CheckpointFunctionBackward"
    assert out.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    kiln.manual_seed(7)
    expected = kiln.rand(4).numpy()
    kiln.manual_seed(7)
    out.sum().backward()  # recomputation replays the forward's RNG, then restores ours
    assert_close(kiln.rand(4), expected)


def test_checkpoint_multiple_outputs_non_tensor_args_and_kwargs():
    a = rand(3)
    x = kiln.tensor(a).requires_grad_(True)

    def fn(t, k):
        return t.sin() * k, t.cos()

    s, c = checkpoint(fn, x, 2.0, use_reentrant=True)
    (s.sum() + 3 * c.sum()).backward()
    assert_close(x.grad, 2 * np.cos(a) - 3 * np.sin(a))
    x.grad = None
    out = checkpoint(lambda t, scale: t.exp() * scale, x, use_reentrant=False, scale=4.0)
    out.sum().backward()
    assert_close(x.grad, 4 * np.exp(a))
    with pytest.raises(ValueError, match=r"\[checkpoint\] Unexpected keyword arguments: scale"):
        checkpoint(lambda t, scale: t, x, use_reentrant=True, scale=4.0)


def test_non_reentrant_with_only_parameters_requiring_grad():
    lin = kiln.nn.Linear(3, 2).double()
    x = kiln.tensor(rand(4, 3))
    checkpoint(lambda t: lin(t).exp(), x, use_reentrant=False).sum().backward()
    expected = lin.weight.grad.numpy().copy()
    lin.zero_grad()
    lin(x).exp().sum().backward()
    assert_close(kiln.tensor(expected), lin.weight.grad.numpy())


def test_use_reentrant_warnings():
    x = kiln.tensor(rand(3)).requires_grad_(True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint(lambda t: t * 2, x)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(lambda t: t * 2, kiln.tensor(rand(3)), use_reentrant=True)


def test_checkpoint_sequential_matches_sequential():
    kiln.manual_seed(0)
    model = kiln.nn.Sequential(kiln.nn.Linear(4, 6), kiln.nn.Tanh(), kiln.nn.Linear(6, 6),
                               kiln.nn.Dropout(0.3), kiln.nn.Linear(6, 2)).double()
    x = kiln.tensor(rand(5, 4))
    plain = grads_of(model, x, model[0])
    model.zero_grad()
    ckpt = grads_of(lambda t: checkpoint_sequential(model, 2, t, use_reentrant=True), x, model[0])
    for a, b in zip(ckpt, plain):
        assert_close(kiln.tensor(a), b)
    with pytest.raises(ValueError, match=r"\[checkpoint_sequential\] segments must be between"):
        checkpoint_sequential(model, 9, x, use_reentrant=True)


@requires_gpu
def test_checkpoint_dropout_on_cuda_replays_the_mask():
    kiln.manual_seed(0)
    lin = kiln.nn.Linear(4, 5).double().to("cuda")

    def block(t):
        return F.dropout(lin(t).tanh(), 0.5, True)

    x = kiln.tensor(rand(3, 4), device="cuda")
    results = []
    for run in (block, lambda t: checkpoint(block, t, use_reentrant=True)):
        xg = x.detach().requires_grad_(True)
        kiln.manual_seed(5)
        (run(xg) ** 2).sum().backward()
        results.append(xg.grad.cpu().numpy())
    assert_close(kiln.tensor(results[1]), results[0])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_gpu)])
def test_checkpoint_vs_torch(device):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint  # noqa: F401
    w, x = rand(4, 4), rand(3, 4)

    def run(lib, ckpt):
        wt = lib.tensor(w, device=device).requires_grad_(True)
        xt = lib.tensor(x, device=device).requires_grad_(True)
        fn = lambda t: (t @ wt).sigmoid() @ wt  # noqa: E731
        out = ckpt(fn, xt, use_reentrant=False) if ckpt else fn(xt)
        (out ** 2).sum().backward()
        return out.detach().cpu().numpy(), xt.grad.cpu().numpy(), wt.grad.cpu().numpy()

    got = run(kiln, checkpoint)
    for a, b in zip(got, run(torch, torch.utils.checkpoint.checkpoint)):
        assert_close(kiln.tensor(a), b)
