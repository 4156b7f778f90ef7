"""matmul's backward: gradients laid out like their inputs (a transposed weight
view gets a transposed gradient, so the weight's own gradient is contiguous),
no gradient for an input that does not need one, values vs NumPy, and double
backward through transposed views."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand, requires_gpu

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_linear_weight_gradient_is_contiguous_and_right(device):
    x, w, g = rand(6, 3), rand(5, 3), rand(6, 5)
    xt = kiln.tensor(x, device=device)
    wt = kiln.tensor(w, device=device, requires_grad=True)
    y = xt @ wt.t()
    y.backward(kiln.tensor(g, device=device))
    assert wt.grad.is_contiguous()
    assert_close(wt.grad.cpu(), g.T @ x)
    assert xt.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_transposed_operands_get_gradients_of_their_layout(device):
    a, b, g = rand(3, 5, 4), rand(3, 5, 6), rand(3, 4, 6)
    base_a = kiln.tensor(a, device=device, requires_grad=True)  # used as a.mT: column-major
    base_b = kiln.tensor(b, device=device, requires_grad=True)
    out = kiln.bmm(base_a.mT, base_b)
    out.backward(kiln.tensor(g, device=device))
    assert base_a.grad.is_contiguous() and base_b.grad.is_contiguous()
    assert_close(base_a.grad.cpu(), b @ np.swapaxes(g, 1, 2))
    assert_close(base_b.grad.cpu(), a @ g)


def test_gradcheck_and_double_backward_with_transposed_views():
    gradcheck(lambda a, b: kiln.matmul(a, b.t()), rand(4, 3), rand(5, 3))
    gradcheck(lambda a, b: kiln.matmul(a.t(), b), rand(3, 4), rand(3, 2))
    a = kiln.tensor(rand(3, 3), requires_grad=True)
    b = kiln.tensor(rand(3, 3), requires_grad=True)
    (ga,) = kiln.autograd.grad((a @ b.t()).pow(2).sum(), [a], create_graph=True)
    ga.sum().backward()
    assert b.grad is not None and np.isfinite(b.grad.numpy()).all()
