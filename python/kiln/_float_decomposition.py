"""frexp (mantissa and exponent of floats) and mvlgamma (the multivariate log-gamma),
composed from kiln's elementwise ops."""

import math

from kiln import _C
from kiln._C import Tensor
from kiln._return_types import named

__all__ = ["frexp", "mvlgamma"]


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1;
    zero, inf and NaN keep their value as mantissa with exponent 0. Exponents are int32."""
    if not isinstance(input, Tensor):
        raise TypeError(f"[frexp] argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.is_floating_point():
        raise RuntimeError("[frexp] torch.frexp() only supports floating-point dtypes")
    x = input.detach().to(_C.float64)
    special = (x == 0) | ~_C.isfinite(x)
    safe = _C.where(special, _C.ones_like(x), x)
    exponent = _C.floor(_C.log2(safe.abs())) + 1
    # Two half-steps: 2**-exponent alone overflows float64 for subnormal inputs.
    half = _C.floor(exponent / 2)
    mantissa = safe * _C.exp2(-half) * _C.exp2(-(exponent - half))
    # log2 may round across a power of two; one correction step either way fixes it.
    too_big, too_small = mantissa.abs() >= 1, mantissa.abs() < 0.5
    mantissa = _C.where(too_big, mantissa / 2, _C.where(too_small, mantissa * 2, mantissa))
    exponent = exponent + too_big.to(exponent.dtype) - too_small.to(exponent.dtype)
    mantissa = _C.where(special, x, mantissa).to(input.dtype)
    exponent = _C.where(special, _C.zeros_like(exponent), exponent).to(_C.int32)
    return named("frexp", ("mantissa", "exponent"), (mantissa, exponent))


def mvlgamma(input, p):
    """log of the multivariate gamma function of dimension p:
    p (p - 1) / 4 log(pi) + sum_{j<p} lgamma(input - j / 2)."""
    if p < 1:
        raise RuntimeError(f"[mvlgamma] p has to be greater than or equal to 1, got {p}")
    if not input.is_floating_point():
        input = input.to(_C.get_default_dtype())
    offsets = _C.arange(p, dtype=input.dtype, device=input.device) / 2
    terms = _C.lgamma(input.unsqueeze(-1) - offsets)
    return terms.sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def install():
    Tensor.frexp = frexp
    Tensor.mvlgamma = mvlgamma
