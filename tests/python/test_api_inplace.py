"""The table-built in-place variants (kiln/_inplace.py), aliases (kiln/_aliases.py) and
in-place views (Note [In-place views], python/bind_inplace.cpp)."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand


@pytest.mark.parametrize("name, ref", [("sin_", np.sin), ("exp_", np.exp), ("neg_", np.negative),
                                       ("trunc_", np.trunc), ("arctan_", np.arctan),
                                       ("negative_", np.negative), ("sqrt_", np.sqrt)])
def test_top_level_inplace_writes_into_input_and_returns_it(name, ref):
    a = rand(3, 4, low=0.1, high=2.0)
    x = kiln.tensor(a)
    out = getattr(kiln, name)(x)
    assert out is x and x._version == 1
    assert_close(x, ref(a))


def test_top_level_inplace_names_the_op_for_non_tensors():
    with pytest.raises(TypeError, match=r"\[sin_\].*Tensor"):
        kiln.sin_([1.0])


@pytest.mark.parametrize("alias, target", [("arccos", "acos"), ("arcsinh", "asinh"),
                                           ("arctan2", "atan2"), ("absolute_", "abs_"),
                                           ("divide_", "div_"), ("greater_", "gt_"),
                                           ("not_equal_", "ne_")])
def test_aliases_are_their_targets(alias, target):
    assert getattr(kiln.Tensor, alias) is getattr(kiln.Tensor, target)


def test_true_divide_inplace_on_ints_raises_like_div_():
    x = kiln.tensor([1.0, 3.0])
    assert_close(x.true_divide_(2), [0.5, 1.5])
    with pytest.raises(RuntimeError):
        kiln.tensor([1, 3]).true_divide_(2)


@pytest.mark.parametrize("name, call, ref", [
    ("cumsum_", lambda t: t.cumsum_(1), lambda a: np.cumsum(a, 1)),
    ("cumprod_", lambda t: t.cumprod_(0), lambda a: np.cumprod(a, 0)),
    ("nan_to_num_", lambda t: t.nan_to_num_(0.0), lambda a: a),
])
def test_assigned_inplace_matches_numpy_on_noncontiguous_input(name, call, ref):
    a = rand(3, 4)
    x = noncontig(a)
    assert call(x) is x
    assert_close(x, ref(a))
    assert x._version == 1


def test_assigned_inplace_gradient_through_history():
    def f(x):
        y = x * 1
        y.cumsum_(0)
        return y
    gradcheck(f, rand(4, 3))


def test_assigned_inplace_refuses_leaf_requiring_grad():
    x = kiln.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.cumsum_(0)


def test_assigned_inplace_tensor_operand_gets_gradient():
    # Only the operand requires grad: autograd must still see it as an input of igamma_.
    w = kiln.tensor([0.5, 1.5, 4.0], dtype=kiln.float64, requires_grad=True)
    y = kiln.tensor([1.0, 2.0, 3.0], dtype=kiln.float64)
    y.igamma_(w)
    assert y.requires_grad
    y.sum().backward()
    a = np.array([1.0, 2.0, 3.0])
    x = np.array([0.5, 1.5, 4.0])
    from math import lgamma
    density = np.exp((a - 1) * np.log(x) - x - np.array([lgamma(v) for v in a]))
    assert_close(w.grad, density)


@pytest.mark.parametrize("op, args", [("t_", ()), ("transpose_", (0, 1)), ("swapaxes_", (0, 1)),
                                      ("swapdims_", (1, 0))])
def test_inplace_views_reshape_self_and_keep_values(op, args):
    a = rand(2, 3)
    x = kiln.tensor(a)
    ptr = x.data_ptr()
    assert getattr(x, op)(*args) is x
    assert tuple(x.shape) == (3, 2) and x.data_ptr() == ptr and x._version == 1
    assert_close(x, a.T)


def test_squeeze_unsqueeze_as_strided_inplace():
    x = kiln.tensor(rand(3, 1))
    x.squeeze_()
    assert tuple(x.shape) == (3,)
    x.unsqueeze_(0)
    assert tuple(x.shape) == (1, 3)
    x.as_strided_((2,), (2,))
    assert tuple(x.shape) == (2,) and x.stride() == (2,)


def test_inplace_view_gradient_flows_through_the_view_backward():
    a = rand(2, 3)
    x = kiln.tensor(a, requires_grad=True)
    y = x * 2
    y.t_()
    w = kiln.tensor(rand(3, 2))
    (y * w).sum().backward()
    assert_close(x.grad, 2 * w.numpy().T)


def test_inplace_view_on_leaf_requiring_grad_raises_like_torch():
    x = kiln.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.t_()


def test_fill_returns_new_tensor():
    x = kiln.zeros(2)
    y = kiln.fill(x, 3.0)
    assert_close(y, [3.0, 3.0])
    assert_close(x, [0.0, 0.0])


def test_against_torch():
    torch = pytest.importorskip("torch")
    a = rand(3, 4)
    for name in ("cumsum_", "cumprod_"):
        k = kiln.tensor(a)
        t = torch.tensor(a)
        getattr(k, name)(1)
        getattr(t, name)(1)
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-12)
    k, t = kiln.tensor(a), torch.tensor(a)
    k.transpose_(0, 1)
    t.transpose_(0, 1)
    np.testing.assert_allclose(k.numpy(), t.numpy())
