"""The Python operators of kiln.Tensor (Note [Fast operators] in
python/bind_elementwise.cpp): METH_FASTCALL descriptors outside pybind11's
dispatcher, so argument handling, NotImplemented, errors and identity are
checked here directly."""

import operator

import numpy as np
import pytest

import kiln
from helpers import assert_close, rand

BINARY = [
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
    ("truediv", operator.truediv), ("pow", operator.pow),
]


@pytest.mark.parametrize("name,op", BINARY)
def test_tensor_and_number_on_either_side(name, op):
    xn = rand(2, 3, dtype=np.float32, low=0.5, high=2.0)
    x = kiln.from_numpy(xn)
    f32 = kiln.float32
    assert_close(op(x, x), op(xn, xn), f32)
    assert_close(op(x, 1.5), op(xn, np.float32(1.5)), f32)
    assert_close(op(1.5, x), op(np.float32(1.5), xn), f32)
    assert_close(op(x, 2), op(xn, np.float32(2)), f32)
    assert_close(op(3, x), op(np.float32(3), xn), f32)


def test_integer_operators_and_comparisons():
    a = kiln.tensor([5, -7, 9])
    b = kiln.tensor([3, 2, -4])
    an, bn = a.numpy(), b.numpy()
    assert (a // b).tolist() == (an // bn).tolist()
    assert (a % b).tolist() == (an % bn).tolist()
    assert (a & b).tolist() == (an & bn).tolist()
    assert (a | b).tolist() == (an | bn).tolist()
    assert (a ^ b).tolist() == (an ^ bn).tolist()
    assert (10 - a).tolist() == (10 - an).tolist()
    assert (a < b).tolist() == (an < bn).tolist()
    assert (a >= 0).tolist() == (an >= 0).tolist()
    assert (a == b).tolist() == (an == bn).tolist()


def test_lists_and_arrays_as_operands():
    x = kiln.tensor([1.0, 2.0])
    assert (x + [10.0, 20.0]).tolist() == [11.0, 22.0]
    assert (x * np.array([2.0, 3.0], np.float32)).tolist() == [2.0, 6.0]


def test_unsupported_operands_raise_pythons_type_error():
    x = kiln.ones(2)
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        "a" + x
    with pytest.raises(TypeError):
        x * object()


def test_other_types_reflected_operator_gets_its_turn():
    class Other:
        def __radd__(self, other):
            return "radd"

        def __rmul__(self, other):
            return "rmul"

    x = kiln.ones(2)
    assert x + Other() == "radd"
    assert x * Other() == "rmul"


def test_kiln_errors_keep_their_type_and_message():
    with pytest.raises(RuntimeError, match=r"\[add\].*\[2\] and \[3\]"):
        kiln.ones(2) + kiln.ones(3)
    x = kiln.ones(2, dtype=kiln.int64)
    with pytest.raises(RuntimeError, match=r"\[add_\] result type Float"):
        x += 1.5


def test_wrong_argument_count_is_a_type_error():
    x = kiln.ones(2)
    with pytest.raises(TypeError, match="expected 1 argument, got 0"):
        kiln.Tensor.__add__(x)
    with pytest.raises(TypeError):
        pow(x, 2, 3)
    with pytest.raises(TypeError):
        kiln.Tensor.__mul__(2, x)  # self must be a Tensor
    assert kiln.Tensor.__add__(x, 1).tolist() == [2.0, 2.0]


def test_in_place_operators_return_the_same_object():
    x = kiln.ones(3)
    alias = x
    x += 1
    x *= kiln.full((3,), 3.0)
    x -= 2
    x /= 2
    assert x is alias
    assert x.tolist() == [2.0, 2.0, 2.0]
    m = kiln.tensor([6, 7])
    m //= 4
    m %= 2
    m |= 2
    assert m.tolist() == [3, 3]


def test_operator_results_are_new_tensors_with_autograd():
    w = kiln.tensor(rand(3), requires_grad=True)
    xn = rand(3)
    x = kiln.tensor(xn)
    y = w * x + 2 * w - w / 4
    assert type(y) is kiln.Tensor and y is not w
    y.sum().backward()
    assert_close(w.grad, xn + 2 - 0.25)


def test_parameters_use_the_same_operators():
    p = kiln.nn.Parameter(kiln.ones(2))
    assert (p + 1).tolist() == [2.0, 2.0]
    assert (1 - p).tolist() == [0.0, 0.0]
    assert (p @ kiln.ones(2)).item() == 2.0
