"""Cauchy(loc, scale)."""

import math

import kiln
from kiln.distributions._location_scale import LocationScale

__all__ = ["Cauchy"]


class Cauchy(LocationScale):
    @property
    def mean(self):
        return kiln.full(self._extended_shape(), math.nan, dtype=self.loc.dtype,
                         device=self.loc.device)

    @property
    def variance(self):
        return kiln.full(self._extended_shape(), math.inf, dtype=self.loc.dtype,
                         device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = kiln.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + kiln.tan(math.pi * (u - 0.5)) * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return kiln.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return kiln.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
