"""Laplace(loc, scale)."""

from numbers import Number

import kiln
from kiln.distributions import constraints
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = (kiln.Size() if isinstance(loc, Number) and isinstance(scale, Number)
                       else self.loc.size())
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Laplace, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        finfo = kiln.finfo(self.loc.dtype)
        # u in (-1, 1): the inverse CDF of a symmetric exponential.
        u = kiln.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * 2 - 1
        u = u.clamp(min=finfo.eps - 1, max=1 - finfo.eps)
        return self.loc - self.scale * u.sign() * kiln.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -kiln.log(2 * self.scale) - kiln.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * kiln.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * kiln.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + kiln.log(2 * self.scale)
