"""kiln.nn.utils: gradient clipping by norm and value, parameters <-> vector."""

import numpy as np
import pytest

import kiln
from kiln import nn
from helpers import assert_close, rand, requires_gpu


def params_with_grads(*grads, device="cpu"):
    params = []
    for g in grads:
        p = nn.Parameter(kiln.zeros(np.shape(g), dtype=kiln.float64, device=device))
        p.grad = kiln.tensor(g, device=device)
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_numpy(norm_type, max_norm):
    grads = [rand(3, 4), rand(5), rand(2, 2, 2)]
    params = params_with_grads(*grads)
    params.append(nn.Parameter(kiln.zeros(3)))  # no grad: skipped
    flat = np.concatenate([g.ravel() for g in grads])
    total = np.abs(flat).max() if norm_type == float("inf") else \
        (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    norm = nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    assert isinstance(norm, kiln.Tensor) and norm.dim() == 0
    assert_close(norm, total)
    coef = min(1.0, max_norm / (total + 1e-6))
    for p, g in zip(params, grads):
        assert_close(p.grad, g * coef)


def test_clip_grad_norm_single_tensor_empty_and_nonfinite():
    (p,) = params_with_grads(np.array([3.0, 4.0]))
    assert_close(nn.utils.clip_grad_norm_(p, 1.0), 5.0)
    assert_close(p.grad, np.array([0.6, 0.8]), atol=1e-6)
    assert_close(nn.utils.clip_grad_norm_([nn.Parameter(kiln.zeros(2))], 1.0), 0.0)
    bad = params_with_grads(np.array([1.0, np.inf]))
    with pytest.raises(RuntimeError, match=r"\[clip_grad_norm_\] The total norm of order 2.0"):
        nn.utils.clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)
    assert not np.isfinite(nn.utils.clip_grad_norm_(bad, 1.0).item())


def test_clip_grad_norm_mixed_dtypes_and_a_model():
    lin = nn.Linear(4, 3)
    lin(kiln.randn(5, 4)).sum().backward()
    expected = np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum()
                           for p in lin.parameters()))
    norm = nn.utils.clip_grad_norm_(lin.parameters(), 0.1)
    assert_close(norm, expected, dtype=kiln.float32)
    after = np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum() for p in lin.parameters()))
    assert after == pytest.approx(0.1, rel=1e-4)
    mixed = params_with_grads(np.array([3.0]))
    half = nn.Parameter(kiln.zeros(1, dtype=kiln.float16))
    half.grad = kiln.tensor([4.0], dtype=kiln.float16)
    assert_close(nn.utils.clip_grad_norm_(mixed + [half], 10.0), 5.0)


def test_clip_grad_value():
    grads = [rand(3, 4), rand(5)]
    params = params_with_grads(*grads)
    nn.utils.clip_grad_value_(params, 0.5)
    for p, g in zip(params, grads):
        assert_close(p.grad, np.clip(g, -0.5, 0.5))


def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    expected = np.concatenate([lin.weight.detach().numpy().ravel(), lin.bias.detach().numpy()])
    assert_close(vec, expected, dtype=kiln.float32)
    weight = lin.weight
    new = kiln.arange(8, dtype=kiln.float32)
    nn.utils.vector_to_parameters(new, lin.parameters())
    assert lin.weight is weight
    assert_close(lin.weight, np.arange(6).reshape(2, 3), dtype=kiln.float32)
    assert_close(lin.bias, np.array([6, 7]), dtype=kiln.float32)
    with pytest.raises(TypeError, match=r"\[vector_to_parameters\] expected kiln.Tensor"):
        nn.utils.vector_to_parameters([1.0], lin.parameters())


@requires_gpu
def test_clip_grad_norm_cuda():
    grads = [rand(3, 4), rand(5)]
    params = params_with_grads(*grads, device="cuda")
    total = np.sqrt(sum((g**2).sum() for g in grads))
    norm = nn.utils.clip_grad_norm_(params, 1.0)
    assert norm.is_cuda
    assert_close(norm.cpu(), total)
    for p, g in zip(params, grads):
        assert_close(p.grad.cpu(), g / (total + 1e-6))
