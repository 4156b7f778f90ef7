"""On CUDA: in-place overwrite gradients (Note [Overwritten history]) and the composite ops
(addcmul/addcdiv, diag/diagonal/trace, repeat_interleave, isclose/allclose/equal, inner,
movedim) match the CPU."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand, requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("op", [
    lambda y: y.fill_(1.5), lambda y: y.zero_(), lambda y: y.lt_(0.2), lambda y: y.uniform_(),
    lambda y: y.normal_(), lambda y: y.bernoulli_(0.5), lambda y: y.copy_(kiln.ones(4)),
    lambda y: y[1].fill_(3.0),
])
def test_overwrite_gradient(op):
    a, w = rand(3, 4), rand(3, 4)
    grads = []
    for dev in ("cpu", "cuda"):
        x = kiln.tensor(a, device=dev, requires_grad=True)
        y = x * 1
        op(y)
        assert y._version == 1
        (y * kiln.tensor(w, device=dev)).sum().backward()
        grads.append(x.grad.cpu().numpy())
    assert_close(kiln.tensor(grads[1]), grads[0])


def test_copy_from_cpu_source_sends_gradient_back_to_cpu():
    s = kiln.tensor(rand(4), requires_grad=True)
    x = kiln.tensor(rand(3, 4), device="cuda", requires_grad=True)
    y = x * 1
    y.copy_(s)
    y.sum().backward()
    assert s.grad.device.type == "cpu"
    assert_close(s.grad, np.full(4, 3.0))
    assert_close(x.grad.cpu(), np.zeros((3, 4)))


def test_clamp_inplace_gradient():
    a = rand(3, 4)
    x = kiln.tensor(a, device="cuda", requires_grad=True)
    y = x * 1
    y.clamp_(-0.5, 0.5)
    y.sum().backward()
    assert_close(x.grad.cpu(), ((a >= -0.5) & (a <= 0.5)).astype(np.float64))


def _both(fn, *arrays):
    cpu = [kiln.tensor(a) for a in arrays]
    return fn(*cpu), fn(*[t.to("cuda") for t in cpu])


@pytest.mark.parametrize("fn,shapes", [
    (lambda a, b, c: kiln.addcmul(a, b, c, value=0.5), [(3, 4), (4,), (3, 1)]),
    (lambda a, b, c: a.addcdiv(b, c.abs() + 1, value=-2), [(3, 4), (4,), (3, 1)]),
    (lambda a, b, c: (a * 1).lerp_(b, c), [(3, 4), (4,), (3, 1)]),
    (lambda a: kiln.diag(a, 1), [(4,)]),
    (lambda a: kiln.diag(a, -1), [(3, 4)]),
    (lambda a: kiln.diagonal(a, 1, 2, 0), [(3, 2, 4)]),
    (lambda a: kiln.trace(a), [(3, 4)]),
    (lambda a: a.repeat_interleave(2, dim=1), [(2, 3)]),
    (lambda a: a.repeat_interleave(kiln.tensor([2, 0, 1], device=a.device), dim=0), [(3, 2)]),
    (lambda a, b: kiln.inner(a, b), [(2, 3, 4), (5, 4)]),
    (lambda a: kiln.movedim(a, (0, 1), (2, 0)), [(2, 3, 4)]),
    (lambda a, b: [kiln.isclose(a, a + 1e-7), kiln.fmod(a, b), kiln.square(b)], [(3, 4), (4,)]),
])
def test_composites_match_cpu(fn, shapes):
    want, got = _both(fn, *[rand(*s) for s in shapes])
    for w, g in zip(want if isinstance(want, list) else [want],
                    got if isinstance(got, list) else [got]):
        assert g.device.type == "cuda"
        assert_close(g.cpu(), w.numpy())


def test_allclose_and_equal():
    a = rand(3, 4)
    x = kiln.tensor(a, device="cuda")
    assert kiln.allclose(x, x + 1e-9) and not kiln.allclose(x, x + 1)
    assert kiln.equal(x, x.clone()) and not kiln.equal(x, x[:2])
