"""kiln.distributions: probability distributions with PyTorch's torch.distributions API.

Written with kiln ops, so they run on any device and differentiate through
rsample and log_prob. Validation (on by default, as PyTorch under __debug__)
raises ValueError with PyTorch's messages; turn it off per instance with
validate_args=False or globally with Distribution.set_default_validate_args.
"""

from kiln.distributions import constraints, transforms
from kiln.distributions.bernoulli import Bernoulli
from kiln.distributions.beta import Beta
from kiln.distributions.categorical import Categorical
from kiln.distributions.cauchy import Cauchy
from kiln.distributions.chi2 import Chi2
from kiln.distributions.dirichlet import Dirichlet
from kiln.distributions.distribution import Distribution
from kiln.distributions.exponential import Exponential
from kiln.distributions.gamma import Gamma
from kiln.distributions.geometric import Geometric
from kiln.distributions.gumbel import Gumbel
from kiln.distributions.half_normal import HalfNormal
from kiln.distributions.independent import Independent
from kiln.distributions.kl import kl_divergence, register_kl
from kiln.distributions.laplace import Laplace
from kiln.distributions.log_normal import LogNormal
from kiln.distributions.multivariate_normal import MultivariateNormal
from kiln.distributions.normal import Normal
from kiln.distributions.one_hot_categorical import OneHotCategorical
from kiln.distributions.studentT import StudentT
from kiln.distributions.transformed_distribution import TransformedDistribution
from kiln.distributions.transforms import (AbsTransform, AffineTransform, ComposeTransform,
                                           ExpTransform, PowerTransform, SigmoidTransform,
                                           SoftmaxTransform, TanhTransform, Transform,
                                           identity_transform)
from kiln.distributions.uniform import Uniform

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Categorical", "Cauchy", "Chi2",
    "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential", "Gamma",
    "Geometric", "Gumbel", "HalfNormal", "Independent", "Laplace", "LogNormal",
    "MultivariateNormal", "Normal", "OneHotCategorical", "PowerTransform", "SigmoidTransform",
    "SoftmaxTransform", "StudentT", "TanhTransform", "Transform", "TransformedDistribution",
    "Uniform", "constraints", "identity_transform", "kl_divergence", "register_kl",
    "transforms",
]
