"""In-place ops through views of tensors in the autograd graph
(Note [In-place on views] in autograd/function.cpp)."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand


def test_mul_through_slice_reaches_base_and_sibling_views():
    a = rand(4)
    x = kiln.tensor(a, requires_grad=True)
    y = x * 1
    whole = y.view(4)  # created before the write: must see it
    y[1:].mul_(3)
    (whole * kiln.tensor([1.0, 2.0, 3.0, 4.0], dtype=kiln.float64)).sum().backward()
    assert_close(x.grad, [1.0, 6.0, 9.0, 12.0])
    assert_close(whole, a * np.array([1, 3, 3, 3]))


def test_copy_into_column_of_plain_tensor_makes_it_differentiable():
    a = rand(2, 3)
    x = kiln.tensor(a, requires_grad=True)
    out = kiln.zeros(2, 3, dtype=kiln.float64)
    col = out[:, 0]
    out[:, 0].copy_(x[:, 1] * 3)
    assert out.requires_grad and col.requires_grad
    (col * 2).sum().backward()
    expected = np.zeros((2, 3))
    expected[:, 1] = 6.0
    assert_close(x.grad, expected)


def test_add_through_transposed_view():
    a = rand(2, 3)
    x = kiln.tensor(a, requires_grad=True)
    y = x * 2
    y.t().add_(x.t() * x.t())
    y.sum().backward()
    assert_close(x.grad, 2 + 2 * a)


@pytest.mark.parametrize("case", ["slice_mul", "select_add", "narrow_exp", "setitem"])
def test_gradcheck_inplace_on_views(case):
    def fn(x):
        y = x * 1.5
        if case == "slice_mul":
            y[:, 1:].mul_(x[:, :2])
        elif case == "select_add":
            y[1].add_(x[0] * x[0])
        elif case == "narrow_exp":
            y.narrow(1, 0, 2).exp_()
        else:
            y[0, :2] = x[1, 1:] * 4
        return y * y

    gradcheck(fn, rand(2, 3))


def test_view_of_leaf_requiring_grad_is_refused():
    w = kiln.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\[add_\] a view of a leaf Variable"):
        w[0].add_(1)
    with kiln.no_grad():
        w[0].add_(1)  # fine without the tape
    assert w.tolist() == [2.0, 1.0, 1.0]
