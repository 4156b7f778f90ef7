"""kl_divergence(p, q) and register_kl: closed-form KL divergences by type pair.

Lookup takes the most specific registered pair for (type(p), type(q)) along both
classes' MROs, so a subclass of Normal uses the Normal rule unless it registers
its own.
"""

import functools
import math
import warnings

import kiln
import kiln.nn.functional as F
from kiln.distributions.bernoulli import Bernoulli
from kiln.distributions.beta import Beta
from kiln.distributions.categorical import Categorical
from kiln.distributions.cauchy import Cauchy
from kiln.distributions.dirichlet import Dirichlet
from kiln.distributions.distribution import Distribution
from kiln.distributions.exponential import Exponential
from kiln.distributions.gamma import Gamma
from kiln.distributions.geometric import Geometric
from kiln.distributions.independent import Independent
from kiln.distributions.laplace import Laplace
from kiln.distributions.multivariate_normal import MultivariateNormal, _batch_mahalanobis
from kiln.distributions.normal import Normal
from kiln.distributions.one_hot_categorical import OneHotCategorical
from kiln.distributions.transformed_distribution import TransformedDistribution
from kiln.distributions.uniform import Uniform
from kiln.distributions.utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as the KL divergence of the pair of types."""
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _dispatch_kl.cache_clear()
        return fun

    return decorator


@functools.lru_cache(maxsize=None)
def _dispatch_kl(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return None

    def rank(pair, first):
        # Distance up the MRO: smaller is more specific.
        p_rank = type_p.__mro__.index(pair[0])
        q_rank = type_q.__mro__.index(pair[1])
        return (p_rank, q_rank) if first == "p" else (q_rank, p_rank)

    left = min(matches, key=lambda pair: rank(pair, "p"))
    right = min(matches, key=lambda pair: rank(pair, "q"))
    if left != right:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left[0].__name__}, {right[1].__name__})",
                      RuntimeWarning)
    return _KL_REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q), batch-shaped."""
    fun = _dispatch_kl(type(p), type(q))
    if fun is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite_where(mask, value):
    return kiln.where(mask, kiln.full_like(value, math.inf), value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _infinite_where(q.probs == 0, t1)
    t1 = kiln.where(p.probs == 0, kiln.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _infinite_where(q.probs == 1, t2)
    t2 = kiln.where(p.probs == 1, kiln.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where((q.probs == 0).expand_as(t), t)
    t = kiln.where((p.probs == 0).expand_as(t), kiln.zeros_like(t), t)
    return t.sum(-1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_params_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_params_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * kiln.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * kiln.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * kiln.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * kiln.log(p.rate / q.rate)
    t2 = kiln.lgamma(q.concentration) - kiln.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * kiln.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    p_tril = p._unbroadcasted_scale_tril
    q_tril = q._unbroadcasted_scale_tril
    half_term1 = (q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    n = p.event_shape[0]
    combined = tuple(kiln.broadcast_shapes(q_tril.shape[:-2], p_tril.shape[:-2])) + (n, n)
    # trace(Sigma_q^-1 Sigma_p) = ||L_q^-1 L_p||_F^2
    term2 = kiln.linalg.solve_triangular(q_tril.expand(combined), p_tril.expand(combined),
                                         upper=False).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(q_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    extra_event_dim = len(p.event_shape) - len(p.base_dist.event_shape)
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra_event_dim)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * kiln.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - kiln.log1p(-q.probs) / p.probs - q.logits


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)
