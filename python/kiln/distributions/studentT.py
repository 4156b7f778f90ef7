"""StudentT(df, loc=0., scale=1.)."""

import math

import kiln
from kiln.distributions import constraints
from kiln.distributions.chi2 import Chi2
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self._chi2.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = kiln.Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return kiln.where(self.df <= 1, kiln.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        m = kiln.where(self.df > 2, finite, kiln.full_like(finite, math.inf))
        return kiln.where(self.df <= 1, kiln.full_like(m, math.nan), m)

    def rsample(self, sample_shape=()):
        # X / sqrt(Z / df) with X standard normal and Z chi-squared: Student's t.
        shape = self._extended_shape(sample_shape)
        X = kiln.randn(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * kiln.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + kiln.lgamma(0.5 * self.df) - kiln.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * kiln.log1p(y ** 2.0 / self.df) - Z

    def entropy(self):
        lbeta = (kiln.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - kiln.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (kiln.digamma(0.5 * (self.df + 1))
                                         - kiln.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
