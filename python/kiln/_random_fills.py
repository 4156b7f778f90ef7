"""In-place random fills PyTorch has beyond kiln's kernels: cauchy_, log_normal_ and
geometric_, each an inverse-CDF transform of kiln's Philox uniforms, so a seed (or
a generator=) reproduces them like every other kiln random op. The result is copied
in with copy_, which bumps the version and cuts the old history (Note [Overwritten
history])."""

import math

from kiln import _C
from kiln._C import Tensor


def _uniform_like(self, generator):
    """Uniforms in [0, 1), float64 so the transforms keep their tails."""
    return _C.empty(self.shape, dtype=_C.float64, device=self.device).uniform_(
        0, 1, generator=generator)


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if sigma <= 0:
        raise RuntimeError(f"[cauchy_] cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform_like(self, generator)
    return self.copy_(median + sigma * _C.tan(math.pi * (u - 0.5)))


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if std <= 0:
        raise RuntimeError(f"[log_normal_] log_normal_ expects std > 0.0, but found std={std}")
    normal = _C.empty(self.shape, dtype=_C.float64, device=self.device).normal_(
        mean, std, generator=generator)
    return self.copy_(_C.exp(normal))


def _geometric_(self, p, *, generator=None):
    """The number of Bernoulli(p) trials up to the first success: values 1, 2, ..."""
    if not 0 < p < 1:
        raise RuntimeError(f"[geometric_] geometric_ expects p to be in (0, 1), but got p={p}")
    u = 1 - _uniform_like(self, generator)  # (0, 1]: log never sees 0
    return self.copy_(_C.clamp(_C.ceil(_C.log(u) / math.log1p(-p)), min=1))


def install():
    Tensor.cauchy_ = _cauchy_
    Tensor.log_normal_ = _log_normal_
    Tensor.geometric_ = _geometric_
