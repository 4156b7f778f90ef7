"""Geometric(probs=None, logits=None): the number of failures before the first success."""

from numbers import Number

import kiln
import kiln.nn.functional as F
from kiln.distributions import constraints
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import (broadcast_all, lazy_property, logits_to_probs,
                                      probs_to_logits)

__all__ = ["Geometric"]


class Geometric(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        param = self.probs if probs is not None else self.logits
        is_scalar = isinstance(probs if probs is not None else logits, Number)
        super().__init__(kiln.Size() if is_scalar else param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            # The unit interval admits 0, which Geometric does not.
            value = self.probs
            if not bool((value > 0).all()):
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                    f"{constraints.unit_interval!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = kiln.Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return kiln.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = kiln.finfo(self.probs.dtype).tiny
        with kiln.no_grad():
            u = kiln.rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # 0 * log(1 - 1) is taken as 0: a certain success has probability 1 at value 0.
        failures = kiln.where((probs == 1) & (value == 0), kiln.zeros_like(probs),
                              value * (-probs).log1p())
        return failures + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                  reduction="none") / self.probs
