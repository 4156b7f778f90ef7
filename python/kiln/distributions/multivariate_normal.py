"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril).

The distribution is kept as its lower Cholesky factor L (covariance = L L^T):
sampling is loc + L eps, and log_prob needs only a triangular solve and the
diagonal of L. The factor is stored unbroadcast so a batch of means sharing one
covariance does not copy it.
"""

import math

import kiln
from kiln.distributions import constraints
from kiln.distributions.distribution import Distribution
from kiln.distributions.utils import lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat, bvec):
    """Matrix-vector product over broadcast batch dims."""
    return kiln.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^-1 x for x of shape (..., n) and L of shape (..., n, n)."""
    n = bx.size(-1)
    batch_shape = kiln.broadcast_shapes(bL.shape[:-2], bx.shape[:-1])
    bL = bL.expand(tuple(batch_shape) + (n, n))
    bx = bx.expand(tuple(batch_shape) + (n,))
    solution = kiln.linalg.solve_triangular(bL, bx.unsqueeze(-1), upper=False).squeeze(-1)
    return solution.pow(2).sum(-1)


def _precision_to_scale_tril(P):
    """Lower Cholesky factor of P^-1 without inverting P: flip, factor, solve."""
    Lf = kiln.linalg.cholesky(kiln.flip(P, (-2, -1)))
    L_inv = kiln.transpose(kiln.flip(Lf, (-2, -1)), -2, -1)
    eye = kiln.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return kiln.linalg.solve_triangular(L_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = sum(m is not None for m in (covariance_matrix, precision_matrix, scale_tril))
        if given != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        for name, matrix in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                             ("precision_matrix", precision_matrix)):
            if matrix is None:
                continue
            if matrix.dim() < 2:
                raise ValueError(f"{name} matrix must be at least two-dimensional, with "
                                 "optional leading batch dimensions")
            batch_shape = kiln.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
            setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = kiln.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = kiln.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(
            tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return kiln.matmul(L, L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        return kiln.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = kiln.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
