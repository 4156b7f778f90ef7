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


def _orthonormalize(A):
    """The Q factor of A = QR for a tall A, its columns' signs chosen so diag(R) >= 0 (the
    unique choice, so an orthogonal A maps to itself)."""
    Q, R = kiln.linalg.qr(A)
    signs = kiln.sign(R.diagonal(dim1=-2, dim2=-1))
    return Q * kiln.where(signs == 0, kiln.ones_like(signs), signs).unsqueeze(-2)


class _Orthogonal(Module):
    """Maps a matrix (or batch) X to an orthogonal one through the Cayley transform of the
    skew-symmetric matrix built from X's lower triangle. With trivialization the result is
    multiplied by the buffer `base` (set by right_inverse), so training moves around base."""

    def __init__(self, weight, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        X = X.tril()
        if n != k:
            pad = kiln.zeros(*X.shape[:-1], n - k, dtype=X.dtype, device=X.device)
            X = kiln.cat([X, pad], dim=-1)
        A = X - X.mT
        eye = kiln.eye(n, dtype=A.dtype, device=A.device)
        # Cayley map (I + A/2)(I - A/2)^-1; I - A/2 is invertible for skew-symmetric A, and
        # the two factors commute, so solving from the left gives the same matrix.
        Q = kiln.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
        if n != k:
            Q = Q[..., :k]
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"[orthogonal] expected a matrix or batch of matrices of shape "
                             f"{list(self.shape)}, got {list(Q.shape)}")
        if "base" not in self._buffers:
            raise NotImplementedError("[orthogonal] assigning to an orthogonal parametrization "
                                      "with the Cayley map requires use_trivialization=True")
        with no_grad():
            target = Q.mT if Q.shape[-2] < Q.shape[-1] else Q
            n, k = target.shape[-2], target.shape[-1]
            if n != k:
                # Extend the k columns to a full orthonormal basis of R^n.
                extra = kiln.randn(*target.shape[:-1], n - k, dtype=Q.dtype, device=Q.device)
                target = kiln.cat([target, extra], dim=-1)
            self.base = _orthonormalize(target)
            # Minus the identity maps to A = 0 (forward = base), and is what PyTorch stores.
            neg_eye = kiln.zeros_like(Q)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrains `name` of `module` to orthogonal matrices (orthonormal rows or columns for a
    non-square weight). kiln implements the "cayley" map only; orthogonal_map=None selects it
    (PyTorch's default, "matrix_exp" / "householder", is not available)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"[orthogonal] module '{type(module).__name__}' has no parameter or "
                         f"buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"[orthogonal] expected a matrix or batch of matrices, got a tensor of "
                         f"{weight.dim()} dimensions")
    if orthogonal_map is None:
        orthogonal_map = "cayley"
    if orthogonal_map in ("matrix_exp", "householder"):
        raise NotImplementedError(f"[orthogonal] orthogonal_map '{orthogonal_map}' is not "
                                  "implemented in kiln; use 'cayley'")
    if orthogonal_map != "cayley":
        raise ValueError(f"[orthogonal] orthogonal_map has to be one of 'matrix_exp', 'cayley', "
                         f"'householder', got {orthogonal_map!r}")
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, use_trivialization=use_trivialization), unsafe=True)
    return module
