"""Laplace(loc, scale)."""


import kiln
from kiln.distributions._location_scale import LocationScale

__all__ = ["Laplace"]


class Laplace(LocationScale):
    @property
    def mean(self):
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
