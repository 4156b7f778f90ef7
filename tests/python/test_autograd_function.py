"""kiln.autograd.Function (custom ops in Python), once_differentiable and anomaly mode."""

import warnings

import numpy as np
import pytest

import kiln
from kiln.autograd import Function
from kiln.autograd.function import once_differentiable
from helpers import assert_close, rand, requires_gpu

pytestmark = pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")


def leaf(a):
    return kiln.tensor(a).requires_grad_(True)


class Exp(Function):
    """Saves its output: the case that needs SavedTensor::output (no cycle)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ScaledMul(Function):
    """Two tensors and a non-tensor input; stores an attribute on ctx."""

    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.scale = scale
        ctx.save_for_backward(a, b)
        return a * b * scale

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g * b * ctx.scale if ctx.needs_input_grad[0] else None
        gb = g * a * ctx.scale if ctx.needs_input_grad[1] else None
        return ga, gb, None


class Cube(Function):
    """The newer style: forward without ctx plus setup_context."""

    @staticmethod
    def forward(x):
        return x * x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x


def test_forward_backward_and_gradcheck():
    a = rand(2, 3)
    x = leaf(a)
    y = Exp.apply(x)
    assert_close(y, np.exp(a))
    assert type(y.grad_fn).__name__ == "_FunctionNode" and y.grad_fn.name() == "ExpBackward"
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    y.sum().backward()
    assert_close(x.grad, np.exp(a))
    assert kiln.autograd.gradcheck(Exp.apply, (leaf(rand(2, 3)),))
    assert kiln.autograd.gradcheck(Cube.apply, (leaf(rand(3)),))


def test_non_tensor_inputs_and_needs_input_grad():
    a, b = rand(2, 3), rand(2, 3)
    x, w = leaf(a), kiln.tensor(b)
    seen = {}

    class Spy(ScaledMul):
        @staticmethod
        def backward(ctx, g):
            seen["needs"] = ctx.needs_input_grad
            return ScaledMul.backward(ctx, g)

    out = Spy.apply(x, w, 2.5)
    assert_close(out, a * b * 2.5)
    out.sum().backward()
    assert seen["needs"] == (True, False, False)
    assert_close(x.grad, b * 2.5)
    assert w.grad is None
    assert kiln.autograd.gradcheck(lambda p, q: ScaledMul.apply(p, q, -1.5),
                                   (leaf(rand(2, 3)), leaf(rand(2, 3))))


def test_save_none_and_vjp_spelling():
    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            missing, x = ctx.saved_tensors
            assert missing is None and x.shape == g.shape
            return g * 2

    x = leaf(rand(3))
    Double.apply(x).sum().backward()
    assert_close(x.grad, np.full(3, 2.0))

    class SavesNumber(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(3)
            return x

    with pytest.raises(TypeError, match=r"\[save_for_backward\].*got int"):
        SavesNumber.apply(leaf(rand(3)))


def test_no_graph_without_grad():
    x = leaf(rand(3))
    with kiln.no_grad():
        y = Exp.apply(x)
    assert y.grad_fn is None and not y.requires_grad
    assert Exp.apply(kiln.tensor(rand(3))).grad_fn is None


def test_multiple_outputs_and_non_tensor_outputs():
    class SinCos(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), "label", x.cos()

        @staticmethod
        def backward(ctx, gs, _unused, gc):
            (x,) = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()

    a = rand(4)
    x = leaf(a)
    s, label, c = SinCos.apply(x)
    assert label == "label"
    assert s.grad_fn is c.grad_fn
    (2 * s + 3 * c).sum().backward()
    assert_close(x.grad, 2 * np.cos(a) - 3 * np.sin(a))
    # Only one output used: the other's gradient is materialized as zeros.
    x.grad = None
    s, _, c = SinCos.apply(x)
    c.sum().backward()
    assert_close(x.grad, -np.sin(a))


def test_set_materialize_grads_false_passes_none():
    got = {}

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            got["grads"] = (g1, g2)
            return (g1 * 2 if g1 is not None else 0) + (g2 * 3 if g2 is not None else 0)

    x = leaf(rand(3))
    _, b = Two.apply(x)
    b.sum().backward()
    assert got["grads"][0] is None and got["grads"][1] is not None
    assert_close(x.grad, np.full(3, 3.0))


def test_mark_non_differentiable():
    class MaxWithIndex(Function):
        @staticmethod
        def forward(ctx, x):
            m = x.max()
            mask = (x == m).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(mask)
            return m, mask

        @staticmethod
        def backward(ctx, g, g_mask):
            (mask,) = ctx.saved_tensors
            return g * mask

    a = rand(5)
    x = leaf(a)
    m, mask = MaxWithIndex.apply(x)
    assert m.requires_grad and not mask.requires_grad
    m.backward()
    assert_close(x.grad, (a == a.max()).astype(np.float64))


def test_mark_dirty_inplace():
    class MulTwo_(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = rand(3)
    x = leaf(a)
    y = x * 3
    z = MulTwo_.apply(y)
    assert z is y and y.grad_fn.name() == "MulTwo_Backward"
    assert_close(y, a * 6)
    (z * z).sum().backward()
    assert_close(x.grad, 2 * (a * 6) * 6)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        MulTwo_.apply(leaf(rand(3)))


def test_returning_an_input_makes_an_alias():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return 5 * g

    x = leaf(rand(3))
    y = x * 1
    z = Identity.apply(y)
    assert z is not y and y.grad_fn.name() == "MulBackward0"
    assert z.grad_fn.name() == "IdentityBackward"
    z.sum().backward()
    assert_close(x.grad, np.full(3, 5.0))


def test_backward_none_for_input_without_grad_and_trailing_nones():
    class AddConst(Function):
        @staticmethod
        def forward(ctx, x, c):
            return x + c

        @staticmethod
        def backward(ctx, g):
            return g, None, None  # an extra trailing None is tolerated

    x = leaf(rand(2))
    AddConst.apply(x, kiln.tensor(rand(2))).sum().backward()
    assert_close(x.grad, np.ones(2))


def test_saved_tensor_modified_inplace_errors():
    x = leaf(rand(3))
    y = x * 1
    out = ScaledMul.apply(y, kiln.tensor(rand(3)), 1.0)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_saved_tensors_freed_after_backward():
    x = leaf(rand(3))
    out = Exp.apply(x)
    out.backward(kiln.ones_like(out), retain_graph=True)
    out.backward(kiln.ones_like(out))
    assert_close(x.grad, 2 * np.exp(x.detach().numpy()))
    with pytest.raises(RuntimeError, match=r"\[ExpBackward\] Trying to backward through the graph"):
        out.backward(kiln.ones_like(out))


def test_wrong_number_of_gradients_names_the_class():
    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match=r"\[TooMany\.backward\].*expected 1, got 2"):
        TooMany.apply(leaf(rand(3))).sum().backward()


def test_wrong_gradient_shape_names_class_and_shapes():
    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum(0)

    with pytest.raises(RuntimeError, match=r"\[BadShape\.backward\].*got \[4\] but expected "
                                           r"shape compatible with \[2, 4\]"):
        BadShape.apply(leaf(rand(2, 4))).sum().backward()

    class Broadcastable(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.unsqueeze(0).expand(3, 2, 4)  # summed down to [2, 4] by the engine

    x = leaf(rand(2, 4))
    Broadcastable.apply(x).sum().backward()
    assert_close(x.grad, np.full((2, 4), 3.0))


def test_gradient_for_non_tensor_input_errors():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match=r"\[Bad\.backward\].*position 1"):
        Bad.apply(leaf(rand(3)), 2.0).sum().backward()


def test_python_errors_in_backward_propagate():
    class Raises(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom from backward")

    with pytest.raises(ValueError, match="boom from backward"):
        Raises.apply(leaf(rand(3))).sum().backward()


def test_double_backward():
    a = rand(4)
    x = leaf(a)
    (g,) = kiln.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert_close(g, 3 * a * a)
    (gg,) = kiln.autograd.grad(g.sum(), x)
    assert_close(gg, 6 * a)
    # Through a saved output, too.
    x2 = leaf(a)
    (g2,) = kiln.autograd.grad(Exp.apply(x2).sum(), x2, create_graph=True)
    g2.sum().backward()
    assert_close(x2.grad, np.exp(a))
    assert kiln.autograd.gradgradcheck(Cube.apply, (leaf(rand(2, 3)),))


def test_once_differentiable():
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    a = rand(3)
    x = leaf(a)
    Square.apply(x).sum().backward()
    assert_close(x.grad, 2 * a)
    (g,) = kiln.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    assert_close(g, 2 * a)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_anomaly_flag_and_context_managers():
    assert not kiln.autograd.is_anomaly_enabled()
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with kiln.autograd.detect_anomaly():
            assert kiln.autograd.is_anomaly_enabled()
    assert not kiln.autograd.is_anomaly_enabled()
    with kiln.autograd.set_detect_anomaly(True):
        assert kiln.autograd.is_anomaly_enabled()
    kiln.autograd.set_detect_anomaly(True)
    try:
        assert kiln.autograd.is_anomaly_enabled()
    finally:
        kiln.autograd.set_detect_anomaly(False)
    assert not kiln.autograd.is_anomaly_enabled()


def test_anomaly_nan_in_builtin_backward():
    x = leaf(np.array([0.0, 1.0]))
    (x.sqrt() * 0).sum().backward()  # 0 * inf = nan, unchecked without anomaly mode
    assert np.isnan(x.grad.numpy()[0])
    x.grad = None
    with kiln.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values "
                                               r"in its 0th output\."):
            (x.sqrt() * 0).sum().backward()
    with kiln.autograd.detect_anomaly(check_nan=False):
        (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_anomaly_nan_in_custom_backward():
    class NanGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    with kiln.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Function 'NanGradBackward' returned nan"):
            NanGrad.apply(leaf(rand(2))).sum().backward()


def test_anomaly_names_the_failing_node():
    x = leaf(rand(3))
    y = x.exp()
    y.add_(1)  # invalidates the output ExpBackward0 saved
    with kiln.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Error detected in ExpBackward0"):
            y.sum().backward()

    class Raises(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bad backward")

    with kiln.autograd.detect_anomaly():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="Error detected in RaisesBackward: bad backward"):
                Raises.apply(leaf(rand(3))).sum().backward()
    assert any("Traceback of forward call" in str(w.message) for w in caught)


# PyTorch comparison: the same custom Function in both libraries.

DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_custom_function_vs_torch(device):
    torch = pytest.importorskip("torch")

    def make(lib):
        class Softplus(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, beta):
                ctx.beta = beta
                ctx.save_for_backward(x)
                return (1 + (x * beta).exp()).log() / beta

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * (x * ctx.beta).sigmoid(), None
        return Softplus

    a = rand(3, 4)
    xk = kiln.tensor(a, device=device).requires_grad_(True)
    xt = torch.tensor(a, device=device).requires_grad_(True)
    yk, yt = make(kiln).apply(xk, 1.5), make(torch).apply(xt, 1.5)
    (gk,) = kiln.autograd.grad((yk * yk).sum(), xk, create_graph=True)
    (gt,) = torch.autograd.grad((yt * yt).sum(), xt, create_graph=True)
    assert_close(yk.cpu(), yt.detach().cpu().numpy())
    assert_close(gk.cpu(), gt.detach().cpu().numpy())
    gk.sum().backward()
    gt.sum().backward()
    assert_close(xk.grad.cpu(), xt.grad.cpu().numpy())
