"""Scans without a kernel of their own: cummax, cummin, logcumsumexp.

Note [Scans by doubling]: each is an inclusive scan with an associative combine,
computed as ceil(log2(n)) passes of "combine every element with the one 2**k
before it" (Hillis-Steele). Every pass is a few elementwise kiln ops over the
whole tensor, so the scan runs on any device, and gradients come from those ops:
logcumsumexp's combine is logaddexp (stable for any spread of values, unlike
log(cumsum(exp(x)))), and cummax/cummin gather their values at the scanned
indices, so the gradient goes to the element each running extreme came from.
"""

from kiln import _C
from kiln._C import Tensor

__all__ = ["cummax", "cummin", "logcumsumexp"]


def _shifted(t, dim, step, head):
    """t moved `step` places forward along dim (t[i - step] at i), head(first) before."""
    n = t.shape[dim]
    return _C.cat([head(t.narrow(dim, 0, step)), t.narrow(dim, 0, n - step)], dim)


def _scan(x, dim, combine, fill):
    step = 1
    while step < x.shape[dim]:
        x = combine(x, _shifted(x, dim, step, lambda first: _C.full_like(first, fill)))
        step *= 2
    return x


def _dim(input, dim, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"[{op}] argument 'input' must be Tensor, not {type(input).__name__}")
    ndim = max(input.dim(), 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"[{op}] Dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def _running_extreme(input, dim, op, take_later):
    """(values, indices) of the running extreme. take_later(new, old) says where the later
    element wins; ties go to the later index and NaN wins from where it appears."""
    dim = _dim(input, dim, op)
    x = input if input.dim() else input.reshape(1)
    if x.numel() == 0:
        return input.clone(), _C.zeros(input.shape, dtype=_C.int64, device=input.device)
    shape = [1] * x.dim()
    shape[dim] = x.shape[dim]
    index = _C.arange(x.shape[dim], device=x.device).reshape(shape).expand(x.shape)
    values = x.detach()
    # Scan over (value, index) pairs; an earlier pair fills the head with itself (no change).
    step = 1
    while step < x.shape[dim]:
        prev_v = _shifted(values, dim, step, lambda first: first)
        prev_i = _shifted(index, dim, step, lambda first: first)
        keep = take_later(values, prev_v) | (prev_i == index)
        values = _C.where(keep, values, prev_v)
        index = _C.where(keep, index, prev_i)
        step *= 2
    result = x.gather(dim, index)
    if input.dim() == 0:
        return result.reshape(()), index.reshape(())
    return result, index


def _nan(t):
    return t != t if t.is_floating_point() else _C.zeros_like(t, dtype=_C.bool)


def cummax(input, dim):
    """(values, indices): the running maximum along dim and where it was taken."""
    return _result("cummax", _running_extreme(
        input, dim, "cummax",
        lambda new, old: (_nan(new) | (new >= old)) & ~(_nan(old) & ~_nan(new))))


def cummin(input, dim):
    """(values, indices): the running minimum along dim and where it was taken."""
    return _result("cummin", _running_extreme(
        input, dim, "cummin",
        lambda new, old: (_nan(new) | (new <= old)) & ~(_nan(old) & ~_nan(new))))


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, without overflow (Note [Scans by doubling])."""
    dim = _dim(input, dim, "logcumsumexp")
    if not input.is_floating_point():
        input = input.to(_C.get_default_dtype())
    if input.dim() == 0 or input.numel() == 0:
        return input.clone()
    return _scan(input, dim, _C.logaddexp, float("-inf"))


def _result(name, pair):
    from kiln._return_types import named

    return named(name, ("values", "indices"), pair)


def install():
    for name in __all__:
        setattr(Tensor, name, globals()[name])
