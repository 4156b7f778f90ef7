"""The add*mm family (addmm, baddbmm, addbmm, addmv, addr): beta * input + alpha * product,
against NumPy, with float64 finite-difference gradients, in-place forms and error messages."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, noncontig, rand, to_kiln

# name -> (product of the two NumPy operands, operand shapes, input shapes to try: full and
# broadcast).
PRODUCTS = {
    "addmm": (lambda a, b: a @ b, (3, 4), (4, 5), [(3, 5), (5,), (1, 5), ()]),
    "baddbmm": (lambda a, b: a @ b, (2, 3, 4), (2, 4, 5), [(2, 3, 5), (3, 5), (1, 1, 5)]),
    "addbmm": (lambda a, b: np.einsum("bij,bjk->ik", a, b), (2, 3, 4), (2, 4, 5),
               [(3, 5), (5,)]),
    "addmv": (lambda a, b: a @ b, (3, 4), (4,), [(3,), (1,)]),
    "addr": (lambda a, b: np.outer(a, b), (3,), (4,), [(3, 4), (4,)]),
}
CASES = [(name, shape) for name, (_, _, _, shapes) in PRODUCTS.items() for shape in shapes]


@pytest.mark.parametrize("name,input_shape", CASES)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_matches_numpy(name, input_shape, beta, alpha):
    product, sa, sb, _ = PRODUCTS[name]
    c, a, b = rand(*input_shape), rand(*sa), rand(*sb)
    got = getattr(kiln, name)(to_kiln(c), to_kiln(a), to_kiln(b), beta=beta, alpha=alpha)
    want = alpha * product(a, b) + (beta * c if beta != 0 else 0)
    assert_close(got, np.broadcast_to(want, product(a, b).shape))
    # The Tensor method takes the input as self.
    method = getattr(to_kiln(c), name)(to_kiln(a), to_kiln(b), beta=beta, alpha=alpha)
    assert_close(method, np.broadcast_to(want, product(a, b).shape))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_beta_zero_ignores_nan_input(name):
    product, sa, sb, shapes = PRODUCTS[name]
    a, b = rand(*sa), rand(*sb)
    c = np.full(shapes[0], np.nan)
    got = getattr(kiln, name)(to_kiln(c), to_kiln(a), to_kiln(b), beta=0)
    assert_close(got, product(a, b))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_non_contiguous_operands(name):
    product, sa, sb, shapes = PRODUCTS[name]
    c, a, b = rand(*shapes[0]), rand(*sa), rand(*sb)
    got = getattr(kiln, name)(noncontig(c), noncontig(a), noncontig(b), beta=2)
    assert_close(got, 2 * c + product(a, b))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_gradients_float64(name):
    _, sa, sb, shapes = PRODUCTS[name]
    fn = getattr(kiln, name)
    for shape in shapes:
        gradcheck(lambda c, a, b: fn(c, a, b, beta=0.7, alpha=-1.3), rand(*shape), rand(*sa),
                  rand(*sb))


@pytest.mark.parametrize("name", list(PRODUCTS))
def test_inplace_writes_into_self(name):
    product, sa, sb, shapes = PRODUCTS[name]
    c, a, b = rand(*shapes[0]), rand(*sa), rand(*sb)
    x = to_kiln(c)
    out = getattr(x, name + "_")(to_kiln(a), to_kiln(b), beta=0.5, alpha=2)
    assert out is x
    assert_close(x, 0.5 * c + 2 * product(a, b))


def test_inplace_gradient_flows_through_self():
    c, a, b = rand(3, 5), rand(3, 4), rand(4, 5)
    leaf = to_kiln(c, requires_grad=True)
    x = leaf * 1
    x.addmm_(to_kiln(a), to_kiln(b), beta=3)
    x.sum().backward()
    assert_close(leaf.grad, np.full((3, 5), 3.0))


def test_empty_batch_and_inner_dims():
    # No batches: addbmm is beta * input; an empty inner dim: the product is zeros.
    c = rand(3, 5)
    got = kiln.addbmm(to_kiln(c), kiln.zeros(0, 3, 4, dtype=kiln.float64),
                      kiln.zeros(0, 4, 5, dtype=kiln.float64), beta=2)
    assert_close(got, 2 * c)
    got = kiln.baddbmm(kiln.ones(2, 3, 5, dtype=kiln.float64),
                       kiln.zeros(2, 3, 0, dtype=kiln.float64),
                       kiln.zeros(2, 0, 5, dtype=kiln.float64))
    assert_close(got, np.ones((2, 3, 5)))
    assert kiln.baddbmm(kiln.zeros(0, 3, 5), kiln.zeros(0, 3, 4), kiln.zeros(0, 4, 5)).shape == (0, 3, 5)


def test_errors_name_the_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"\[baddbmm\] batch1 of shape \[2, 3, 4\] and batch2 of "
                                           r"shape \[3, 4, 5\] cannot be multiplied"):
        kiln.baddbmm(kiln.zeros(2, 3, 5), kiln.zeros(2, 3, 4), kiln.zeros(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"\[addbmm\] batch1 and batch2 must be 3-D"):
        kiln.addbmm(kiln.zeros(3, 5), kiln.zeros(3, 4), kiln.zeros(4, 5))
    with pytest.raises(RuntimeError, match=r"\[baddbmm\] .*shapes \[4, 3, 5\] and \[2, 3, 5\] "
                                           r"cannot be broadcast"):
        kiln.baddbmm(kiln.zeros(4, 3, 5), kiln.zeros(2, 3, 4), kiln.zeros(2, 4, 5))
    # Broadcastable, but only to a larger shape than the product's.
    with pytest.raises(RuntimeError, match=r"\[baddbmm\] input of shape \[4, 1, 3, 5\] cannot be "
                                           r"broadcast to the product shape \[2, 3, 5\]"):
        kiln.baddbmm(kiln.zeros(4, 1, 3, 5), kiln.zeros(2, 3, 4), kiln.zeros(2, 4, 5))
    with pytest.raises(RuntimeError, match=r"\[addmm\] input and the product must have the same "
                                           r"dtype, but got Float and Double"):
        kiln.addmm(kiln.zeros(3, 5), kiln.zeros(3, 4, dtype=kiln.float64),
                   kiln.zeros(4, 5, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[mv\] size mismatch"):
        kiln.addmv(kiln.zeros(3), kiln.zeros(3, 4), kiln.zeros(5))
    with pytest.raises(RuntimeError, match=r"\[outer\] expected 1-D tensors"):
        kiln.addr(kiln.zeros(3, 4), kiln.zeros(3, 1), kiln.zeros(4))


def test_half_precision_on_cpu():
    a, b, c = rand(2, 3, 4), rand(2, 4, 5), rand(2, 3, 5)
    got = kiln.baddbmm(to_kiln(c, kiln.bfloat16), to_kiln(a, kiln.bfloat16),
                       to_kiln(b, kiln.bfloat16))
    assert got.dtype == kiln.bfloat16
    assert_close(got, c + a @ b, atol=0.1, rtol=0.05)
