"""Dropout: zeroes elements with probability p while training, scales the rest by 1/(1-p)."""

from kiln.nn import functional as F
from kiln.nn.modules.module import Module


class _DropoutNd(Module):
    """p and inplace, checked; forward applies the subclass's functional `_fn`."""

    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"[{type(self).__name__}] dropout probability has to be between 0 "
                             f"and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability p while training, scaling the rest by 1/(1-p)."""

    _fn = staticmethod(F.dropout)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of [N, C, H, W] with probability p while training (other ranks:
    see F.dropout2d)."""

    _fn = staticmethod(F.dropout2d)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) or (C, L) with probability p while training."""

    _fn = staticmethod(F.dropout1d)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p while
    training."""

    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps its input's mean and variance."""

    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """AlphaDropout of whole channels."""

    _fn = staticmethod(F.feature_alpha_dropout)
