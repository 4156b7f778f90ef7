"""Gamma(concentration, rate)."""

from numbers import Number

import kiln
from kiln.distributions import constraints
from kiln.distributions._gamma import standard_gamma
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import broadcast_all

__all__ = ["Gamma"]


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = kiln.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        """Reparameterized through the implicit gradient (Note [Gamma samples and their
        gradient])."""
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=kiln.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = kiln.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (kiln.xlogy(self.concentration, self.rate)
                + kiln.xlogy(self.concentration - 1, value)
                - self.rate * value - kiln.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - kiln.log(self.rate) + kiln.lgamma(self.concentration)
                + (1.0 - self.concentration) * kiln.digamma(self.concentration))
