"""kiln.nn.utils.parametrizations: weight_norm and spectral_norm built on
register_parametrization, with PyTorch's state_dict layout."""

import kiln
from kiln._C import Tensor
from kiln.autograd.grad_mode import no_grad
from kiln.nn import functional as F
from kiln.nn.modules.module import Module
from kiln.nn.utils import parametrize
from kiln.nn.utils.spectral_norm import _default_dim, _weight_to_matrix
from kiln.nn.utils.weight_norm import _norm_except_dim


class _WeightNorm(Module):
    """weight = g * v / ||v||, the norm over every dim but `dim` (-1: the whole tensor)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrises `name` of `module` as magnitude original0 = g and direction
    original1 = v (dim=None: one magnitude for the whole tensor)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"[weight_norm] module '{type(module).__name__}' has no parameter or "
                         f"buffer with name '{name}'")
    if dim is not None and not -1 <= dim < weight.dim():
        raise IndexError(f"[weight_norm] dim {dim} is out of range for '{name}' of size "
                         f"{list(weight.shape)}")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of weight viewed as a matrix with
    `dim` as rows, estimated by power iteration on the buffers _u / _v (updated in training
    mode only). A 1-d weight is simply normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"[spectral_norm] dim {dim} is out of range for a weight of size "
                             f"{list(weight.shape)}")
        if n_power_iterations <= 0:
            raise ValueError(f"[spectral_norm] expected n_power_iterations to be positive, got "
                             f"{n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = _weight_to_matrix(weight, self.dim)
            h, w = weight_mat.shape
            u = kiln.randn(h, dtype=weight.dtype, device=weight.device)
            v = kiln.randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            # Start from a good estimate so the first forward is already close to sigma.
            self._power_method(weight_mat, 15)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u = F.normalize(kiln.mv(weight_mat, self._v), dim=0, eps=self.eps)
                self._v = F.normalize(kiln.mv(weight_mat.mT, self._u), dim=0, eps=self.eps)

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = _weight_to_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        sigma = kiln.dot(self._u, kiln.mv(weight_mat, self._v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divides `name` of `module` by its spectral norm; dim=None means 1 for transposed
    convolutions (their output channels) and 0 otherwise."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"[spectral_norm] module '{type(module).__name__}' has no parameter or "
                         f"buffer with name '{name}'")
    if dim is None:
        dim = _default_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
