"""In-place ops that overwrite a tensor inside the graph (Note [Overwritten history] in
ops/elementwise.cpp): the overwritten values get a zero gradient, and every in-place op
bumps the version counter once."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand

F64 = kiln.float64


def _graph(shape=(3, 4)):
    a = rand(*shape)
    x = kiln.tensor(a, requires_grad=True)
    return a, x, x * 1


OVERWRITES = {
    "fill_": lambda y: y.fill_(1.5),
    "zero_": lambda y: y.zero_(),
    "lt_": lambda y: y.lt_(0.25),
    "le_": lambda y: y.le_(0.25),
    "gt_": lambda y: y.gt_(0.25),
    "ge_": lambda y: y.ge_(0.25),
    "eq_": lambda y: y.eq_(y.round()),
    "ne_": lambda y: y.ne_(y.round()),
    "uniform_": lambda y: y.uniform_(),
    "normal_": lambda y: y.normal_(),
    "bernoulli_": lambda y: y.bernoulli_(0.5),
    "bernoulli_tensor": lambda y: y.bernoulli_(kiln.full((3, 4), 0.5)),
    "random_": lambda y: y.random_(0, 5),
    "exponential_": lambda y: y.exponential_(),
    "copy_constant": lambda y: y.copy_(kiln.ones(4)),
}


@pytest.mark.parametrize("name", sorted(OVERWRITES))
def test_overwrite_gives_zero_gradient_and_one_version(name):
    a, x, y = _graph()
    before = y._version
    OVERWRITES[name](y)
    assert y._version == before + 1
    assert y.requires_grad and y.grad_fn is not None
    (y * kiln.tensor(rand(3, 4))).sum().backward()
    # PyTorch gives zeros here (not None): the old history is still reached.
    assert_close(x.grad, np.zeros((3, 4)))


def test_values_written_are_still_right():
    a, x, y = _graph()
    y.lt_(0.25)
    assert_close(y, (a < 0.25).astype(np.float64))
    y.fill_(-2)
    assert_close(y, np.full((3, 4), -2.0))


def test_later_ops_after_overwrite_still_differentiate():
    a, x, y = _graph()
    b = kiln.tensor(rand(4), requires_grad=True)
    y.mul_(b).fill_(1.5).add_(b)
    y.sum().backward()
    assert_close(x.grad, np.zeros((3, 4)))
    assert_close(b.grad, np.full(4, 3.0))  # only through add_: mul_'s values were overwritten


def test_compare_with_tensor_other_gets_zero_gradient():
    a, x, y = _graph()
    b = kiln.tensor(rand(4), requires_grad=True)
    y.ge_(b)
    y.sum().backward()
    assert_close(x.grad, np.zeros((3, 4)))
    assert_close(b.grad, np.zeros(4))


def test_copy_sends_gradient_to_broadcast_source_in_its_dtype():
    a, x, y = _graph()
    s = kiln.tensor(rand(4).astype(np.float32), requires_grad=True)
    y.copy_(s)
    assert y.dtype == F64
    w = rand(3, 4)
    (y * kiln.tensor(w)).sum().backward()
    assert_close(x.grad, np.zeros((3, 4)))
    assert s.grad.dtype == kiln.float32
    assert_close(s.grad, w.sum(0), dtype=kiln.float32)


def test_copy_gradcheck():
    gradcheck(lambda x, s: (x * 2).copy_(s) * x, rand(2, 3), rand(3))


def test_copy_into_leaf_requiring_grad_raises_unless_no_grad():
    x = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[copy_\] a leaf Variable that requires grad"):
        x.copy_(kiln.ones(3))
    with kiln.no_grad():
        x.copy_(kiln.ones(3))
    assert_close(x, np.ones(3))
    assert x.is_leaf and x.requires_grad


def test_fill_through_view_cuts_only_the_view():
    a, x, y = _graph()
    y[0].fill_(2.0)
    y[:, 1].zero_()
    w = rand(3, 4)
    (y * kiln.tensor(w)).sum().backward()
    expected = w.copy()
    expected[0] = 0
    expected[:, 1] = 0
    assert_close(x.grad, expected)
    ref = a.copy()
    ref[0] = 2.0
    ref[:, 1] = 0
    assert_close(y, ref)


def test_copy_through_view_routes_view_region_to_source():
    a, x, y = _graph()
    s = kiln.tensor(rand(3), requires_grad=True)
    y[:, 2].copy_(s * 3)
    w = rand(3, 4)
    (y * kiln.tensor(w)).sum().backward()
    expected = w.copy()
    expected[:, 2] = 0
    assert_close(x.grad, expected)
    assert_close(s.grad, 3 * w[:, 2])


def test_random_fill_of_plain_tensor_stays_out_of_the_graph():
    y = kiln.zeros(3)
    y.uniform_()
    assert not y.requires_grad and y._version == 1


@pytest.mark.parametrize("op", [
    lambda y: y.add_(1), lambda y: y.mul_(2), lambda y: y.exp_(), lambda y: y.clamp_(0, 1),
    lambda y: y.fill_(1), lambda y: y.zero_(), lambda y: y.copy_(kiln.ones(3)),
    lambda y: y.lt_(0), lambda y: y.uniform_(), lambda y: y.normal_(), lambda y: y.relu_(),
    lambda y: y.div_(2, rounding_mode="floor"), lambda y: y.masked_fill_(y > 0, 1),
    lambda y: y.clip_(min=kiln.zeros(3)), lambda y: kiln.nn.functional.elu(y, inplace=True),
    lambda y: y.__setitem__(0, 1.0), lambda y: y.__setitem__(kiln.tensor([0, 2]), 1.0),
    lambda y: y.put_(kiln.tensor([1]), kiln.ones(1, dtype=y.dtype)),
    lambda y: y.addcmul_(y.detach(), y.detach()), lambda y: y.lerp_(kiln.zeros(3), 0.5),
    lambda y: y.fmod_(0.5), lambda y: y.square_(), lambda y: y.bernoulli_(0.5),
])
def test_every_inplace_op_bumps_version_once(op):
    for grad in (False, True):
        y = kiln.tensor(rand(3), requires_grad=True) * 1 if grad else kiln.tensor(rand(3))
        op(y)
        assert y._version == 1


def test_clamp_inplace_on_non_leaf_differentiates():
    a = np.array([[0.1, -0.2, 2.0], [-3.0, 0.45, -0.7]])
    x = kiln.tensor(a, requires_grad=True)
    y = x * 1.0
    y.clamp_(-0.5, 0.5)
    y.sum().backward()
    assert_close(x.grad, ((a >= -0.5) & (a <= 0.5)).astype(np.float64))
    assert_close(y, np.clip(a, -0.5, 0.5))
    gradcheck(lambda t: (t * 1).clip_(min=-0.5) * 2, a)
    gradcheck(lambda t, lo: (t * 1).clamp_(min=lo, max=lo + 1), a, rand(3))


@pytest.mark.parametrize("name,op", [("fill_", lambda x: x.fill_(1)),
                                     ("uniform_", lambda x: x.uniform_()),
                                     ("lt_", lambda x: x.lt_(0)),
                                     ("clamp_", lambda x: x.clamp_(0, 1))])
def test_overwriting_a_leaf_that_requires_grad_raises(name, op):
    x = kiln.tensor(rand(3), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[" + name + r"\] a leaf Variable"):
        op(x)
    with kiln.no_grad():
        op(x)
    assert x.is_leaf and x._version == 1
