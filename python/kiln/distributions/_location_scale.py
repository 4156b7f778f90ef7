"""The shared part of the real-valued location-scale families (Normal, Laplace, Cauchy)."""

from numbers import Number

import kiln
from kiln.distributions import constraints
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import broadcast_all


class LocationScale(Distribution):
    """A distribution on the reals given by ``loc`` and a positive ``scale``, broadcast together.

    Subclasses add the family's own formulas; construction, ``expand`` and the constraints are
    the same for every such family, so they live here once.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = (kiln.Size() if isinstance(loc, Number) and isinstance(scale, Number)
                       else self.loc.size())
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = kiln.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mode(self):
        return self.loc
