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
from kiln.distributions.dirichlet import Dirichlet
from kiln.distributions.distribution import Distribution
from kiln.distributions.gamma import Gamma
from kiln.distributions.independent import Independent
from kiln.distributions.kl import kl_divergence, register_kl
from kiln.distributions.multivariate_normal import MultivariateNormal
from kiln.distributions.normal import Normal
from kiln.distributions.transformed_distribution import TransformedDistribution
from kiln.distributions.transforms import (AffineTransform, ComposeTransform, ExpTransform,
                                           SigmoidTransform, TanhTransform, Transform,
                                           identity_transform)
from kiln.distributions.uniform import Uniform

__all__ = [
    "AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform", "Dirichlet",
    "Distribution", "ExpTransform", "Gamma", "Independent", "MultivariateNormal", "Normal",
    "SigmoidTransform", "TanhTransform", "Transform", "TransformedDistribution", "Uniform",
    "constraints", "identity_transform", "kl_divergence", "register_kl", "transforms",
]
