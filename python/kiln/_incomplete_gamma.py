"""igamma / igammac: the regularized lower and upper incomplete gamma functions
P(a, x) and Q(a, x) = 1 - P(a, x), with torch.special's gammainc / gammaincc names.

The expansions are the ones the gamma sampler's gradient uses
(kiln/distributions/_gamma.py: the series for x < a + 1, Lentz's continued fraction
for Q otherwise), evaluated in float64 with where() per element, then PyTorch's edge
values: P(0, x > 0) = 1, P(a, 0) = 0, P(a, inf) = 1, NaN for negative arguments.
As in PyTorch, only x gets a gradient, dP/dx = x**(a-1) e**-x / Gamma(a); asking
for the gradient of a raises NotImplementedError.
"""

from kiln import _C
from kiln._C import Tensor
from kiln.autograd.function import Function
from kiln.functional import broadcast_tensors

__all__ = ["igamma", "igammac"]


def _operands(op, input, other):
    if not isinstance(input, Tensor):
        raise TypeError(f"[{op}] argument 'input' must be Tensor, not {type(input).__name__}")
    other = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    dtype = _C.result_type(input, other)
    if not dtype.is_floating_point:
        raise NotImplementedError(f"[{op}] not implemented for '{str(dtype).split('.')[-1]}': "
                                  "expected floating-point tensors")
    a, x = broadcast_tensors(input.to(dtype), other.to(dtype))
    return a, x


def _lower_and_upper(a, x):
    """(P, Q) in float64, each from the expansion accurate for it, plus the edge values."""
    from kiln.distributions._gamma import _lower_series, _upper_fraction

    a64, x64 = a.detach().double(), x.detach().double()
    bad = (a64 < 0) | (x64 < 0) | (a64 != a64) | (x64 != x64) | ((a64 == 0) & (x64 == 0))
    interior = ~bad & (a64 > 0) & (x64 > 0) & _C.isfinite(x64)
    one = _C.ones_like(a64)
    a_safe = _C.where(interior & _C.isfinite(a64), a64, one)
    x_safe = _C.where(interior, x64, one)
    use_series = x_safe < a_safe + 1.0
    series = _lower_series(a_safe, _C.where(use_series, x_safe, a_safe))
    fraction = _upper_fraction(a_safe, _C.where(use_series, a_safe + 2.0, x_safe))
    lower = _C.where(use_series, series, 1.0 - fraction)
    upper = _C.where(use_series, 1.0 - series, fraction)
    # Edges: x = 0 or a = inf -> P = 0; a = 0 (x > 0) or x = inf -> P = 1.
    edge_one = ((a64 == 0) & (x64 > 0)) | (x64 == float("inf"))
    edge_zero = (x64 == 0) | (a64 == float("inf"))
    nan = _C.full_like(a64, float("nan"))
    lower = _C.where(edge_one, one, _C.where(edge_zero, one * 0, lower))
    upper = _C.where(edge_one, one * 0, _C.where(edge_zero, one, upper))
    return _C.where(bad, nan, lower), _C.where(bad, nan, upper)


class _IncompleteGamma(Function):
    @staticmethod
    def forward(ctx, a, x, upper):
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        lower_value, upper_value = _lower_and_upper(a, x)
        return (upper_value if upper else lower_value).to(a.dtype)

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        name = "igammac" if ctx.upper else "igamma"
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        density = _C.exp((a - 1) * _C.log(x) - x - _C.lgamma(a))
        return None, grad * (-density if ctx.upper else density), None


def _apply(op, input, other, upper):
    a, x = _operands(op, input, other)
    if _C.is_grad_enabled() and (a.requires_grad or x.requires_grad):
        return _IncompleteGamma.apply(a, x, upper)
    lower_value, upper_value = _lower_and_upper(a, x)
    return (upper_value if upper else lower_value).to(a.dtype)


def igamma(input, other):
    """P(input, other), the regularized lower incomplete gamma function."""
    return _apply("igamma", input, other, False)


def igammac(input, other):
    """Q(input, other) = 1 - P(input, other), computed directly (accurate in the tail)."""
    return _apply("igammac", input, other, True)


def install():
    Tensor.igamma = igamma
    Tensor.igammac = igammac
