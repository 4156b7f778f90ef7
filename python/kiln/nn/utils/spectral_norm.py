"""spectral_norm / remove_spectral_norm: the old hook-based reparametrisation
w = w_orig / sigma(w_orig), with `name`_orig as the parameter, `name`_u / `name`_v as the power
iteration buffers and `name` recomputed before every forward."""

import kiln
from kiln.autograd.grad_mode import no_grad
from kiln.nn import functional as F
from kiln.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from kiln.nn.parameter import Parameter


def _weight_to_matrix(weight, dim):
    """weight with `dim` moved first and the other dims flattened: the matrix whose largest
    singular value spectral norm divides by."""
    if dim != 0:
        weight = weight.movedim(dim, 0)
    return weight.flatten(1)


def _default_dim(module):
    """Transposed convolutions keep output channels in dim 1."""
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


class _SpectralNorm:
    def __init__(self, name, n_power_iterations, dim, eps):
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = _weight_to_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                mat = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v = F.normalize(kiln.mv(mat.mT, u), dim=0, eps=self.eps)
                    u = F.normalize(kiln.mv(mat, v), dim=0, eps=self.eps)
            setattr(module, self.name + "_u", u)
            setattr(module, self.name + "_v", v)
        sigma = kiln.dot(u, kiln.mv(weight_mat, v))
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Replaces parameter `name` by `name`_orig / sigma, sigma estimated by
    n_power_iterations steps of power iteration per training forward."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            raise RuntimeError(f"[spectral_norm] Cannot register two spectral_norm hooks on the "
                               f"same parameter {name}")
    weight = module._parameters.get(name) if hasattr(module, "_parameters") else None
    if weight is None:
        raise AttributeError(f"[spectral_norm] '{type(module).__name__}' object has no parameter "
                             f"'{name}'")
    if n_power_iterations <= 0:
        raise ValueError(f"[spectral_norm] expected n_power_iterations to be positive, got "
                         f"{n_power_iterations}")
    if dim is None:
        dim = _default_dim(module)
    if not -weight.dim() <= dim < weight.dim():
        raise IndexError(f"[spectral_norm] dim {dim} is out of range for parameter '{name}' of "
                         f"size {list(weight.shape)}")
    dim %= weight.dim()
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    with no_grad():
        h, w = _weight_to_matrix(weight, dim).shape
        u = F.normalize(kiln.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        v = F.normalize(kiln.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Turns `name` back into a plain parameter holding the current normalised weight."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False).detach()
            del module._forward_pre_hooks[key]
            for suffix in ("_orig", "_u", "_v"):
                delattr(module, name + suffix)
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"[remove_spectral_norm] spectral_norm of '{name}' not found in {module}")
