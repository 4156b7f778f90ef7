"""PyTorch's complex-number API on kiln's real tensors.

kiln has no complex dtypes (scripts/api_coverage.py lists them as not planned),
but programs call ``x.conj()``, ``x.real``, ``x.mH`` or ``torch.angle`` on real
tensors, where PyTorch defines them: the conjugate of a real tensor is the tensor
itself, its real part too, ``imag`` raises, and the adjoint is the transpose.
"""

import math
import warnings

from kiln import _C
from kiln._C import Tensor


def _real_only(input, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"[{op}] argument 'input' must be Tensor, not {type(input).__name__}")
    return input


def real(input):
    """The real part: a real tensor itself (PyTorch returns the same tensor)."""
    return _real_only(input, "real")


def imag(input):
    _real_only(input, "imag")
    raise TypeError("imag is not implemented for tensors with non-complex dtypes.")


def conj(input):
    """The conjugate: a real tensor itself."""
    return _real_only(input, "conj")


def conj_physical_(input):
    return _real_only(input, "conj_physical_")


def angle(input):
    """0 for x >= 0 (and -0.0), pi for x < 0, NaN for NaN; integers and bools give
    the default float dtype. The gradient is zero where defined, as in PyTorch."""
    _real_only(input, "angle")
    x = input if input.is_floating_point() else input.to(_C.get_default_dtype())
    constant = _C.where(x < 0, _C.full_like(x, math.pi), _C.zeros_like(x))
    return _C.where(x != x, x, constant)  # NaN stays NaN; the gradient is zero elsewhere


def _matrix_check(input, op, what):
    if input.dim() == 0:
        warnings.warn(f"Tensor.{op} is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=3)
        return False
    if input.dim() < 2:
        raise RuntimeError(f"tensor.{what} is only supported on matrices or batches of "
                           f"matrices. Got {input.dim()}-D tensor.")
    return True


def adjoint(input):
    """The conjugate transpose of the last two dims: for real tensors, x.mT (a view)."""
    if input.dim() < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.dim()}-D tensor.")
    return input.transpose(-2, -1)


def _mH(self):
    return self.transpose(-2, -1) if _matrix_check(self, "mH", "mH") else self


def _H(self):
    if self.dim() == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return self
    if self.dim() != 2:
        hint = (" For batches of matrices, consider using tensor.mH" if self.dim() > 2 else "")
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.dim()}-D tensor.{hint}")
    return self.transpose(0, 1)


# Each of these returns its input for a real tensor (PyTorch returns the same object).
_IDENTITIES = ("resolve_conj", "resolve_neg", "conj_physical")

__all__ = ["real", "imag", "conj", "conj_physical_", "angle", "adjoint", *_IDENTITIES]


def _identity(name):
    def function(input):
        return _real_only(input, name)

    function.__name__ = name
    function.__doc__ = f"``{name}`` of a real tensor: the tensor itself."
    return function


for _name in _IDENTITIES:
    globals()[_name] = _identity(_name)


def install():
    for name in ("conj", "conj_physical_", "angle", "adjoint", *_IDENTITIES):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, globals()[name])
    Tensor.real = property(real)
    Tensor.imag = property(imag)
    Tensor.mH = property(_mH)
    Tensor.H = property(_H)
