"""End-to-end checks of the package surface (the issue's acceptance lines)."""

import subprocess
import sys

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand


def test_matmul_acceptance_line():
    code = ("import kiln; x = kiln.randn(1024, 1024); w = kiln.randn(1024, 1024); "
            "y = kiln.matmul(x, w); print(y.shape, y.device)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "kiln.Size([1024, 1024]) cpu"


def test_add_mul_backward_matches_numpy():
    a, b = rand(3, 4), rand(4)
    x = kiln.tensor(a, requires_grad=True)
    y = kiln.tensor(b, requires_grad=True)
    loss = (x * y + x).sum()
    loss.backward()
    assert_close(loss, np.sum(a * b + a))
    assert_close(x.grad, np.broadcast_to(b + 1, a.shape))
    assert_close(y.grad, a.sum(0))


def test_gradcheck_mul_div():
    gradcheck(lambda x, y: x * y / (y * y + 1), rand(2, 3), rand(3))


def test_error_types():
    with pytest.raises(RuntimeError, match=r"\[add\]"):
        kiln.ones(2, 3) + kiln.ones(4)
    with pytest.raises(IndexError, match=r"\[transpose\]"):
        kiln.ones(2, 3).transpose(0, 5)
    with pytest.raises(TypeError):
        kiln.ones(2) + "a"


def test_compile_returns_the_callable_and_checks_its_arguments():
    model = kiln.nn.Linear(3, 2)
    assert kiln.compile(model) is model
    assert kiln.compile(model, mode="max-autotune", dynamic=True) is model

    @kiln.compile(fullgraph=True)
    def double(x):
        return x * 2

    assert double(kiln.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match=r"\[compile\] Unrecognized mode"):
        kiln.compile(model, mode="fastest")
    with pytest.raises(RuntimeError, match=r"\[compile\] Either mode or options"):
        kiln.compile(model, mode="default", options={})
    with pytest.raises(RuntimeError, match=r"\[compile\] expected a callable"):
        kiln.compile(3)
