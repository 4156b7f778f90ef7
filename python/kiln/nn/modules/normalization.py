"""LayerNorm and RMSNorm over the trailing `normalized_shape` dims."""

import numbers

from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module, _register_empty_parameter


def _init_norm(module, normalized_shape, eps, elementwise_affine, device, dtype):
    """The attributes and the weight (None without elementwise_affine) LayerNorm and RMSNorm
    share; reset_parameters fills the weight."""
    if isinstance(normalized_shape, numbers.Integral):
        module.normalized_shape = (int(normalized_shape),)
    else:
        module.normalized_shape = tuple(int(s) for s in normalized_shape)
    module.eps = eps
    module.elementwise_affine = elementwise_affine
    _register_empty_parameter(module, "weight", module.normalized_shape, elementwise_affine,
                              device, dtype)


def _norm_repr(m):
    return f"{m.normalized_shape}, eps={m.eps}, elementwise_affine={m.elementwise_affine}"


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        _init_norm(self, normalized_shape, eps, elementwise_affine, device, dtype)
        _register_empty_parameter(self, "bias", self.normalized_shape, elementwise_affine and bias,
                                  device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        # PyTorch 2.15's format (earlier releases leave out the bias).
        return f"{_norm_repr(self)}, bias={self.bias is not None}"


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight; eps=None uses the dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        _init_norm(self, normalized_shape, eps, elementwise_affine, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return _norm_repr(self)


class LocalResponseNorm(Module):
    """x / (k + alpha / size * sum of x^2 over `size` neighbouring channels)^beta."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


# PyTorch's module path for GroupNorm (torch.nn.modules.normalization); kiln defines it beside
# batch norm, whose statistics code it shares.
from kiln.nn.modules.batchnorm import GroupNorm  # noqa: E402,F401


def _cross_map_windows(channels, size):
    """windows[c][j] = 1 when channel j enters channel c's sum. Built by PyTorch's running-sum
    recurrence, which never drops channel 0 once a window has slid past it; kept so outputs
    match PyTorch's CrossMapLRN2d."""
    pre_pad = (size - 1) // 2 + 1
    window = set(range(min(pre_pad, channels)))
    rows = [sorted(window)]
    for c in range(1, channels):
        if c < channels - pre_pad + 1:
            window.add(c + pre_pad - 1)
        if c > pre_pad:
            window.discard(c - pre_pad)
        rows.append(sorted(window))
    return [[1.0 if j in row else 0.0 for j in range(channels)] for row in rows]


class CrossMapLRN2d(Module):
    """Local response normalization across channels of (N, C, H, W) input (Lua Torch's
    layer): x / (k + alpha / size * sum of x^2 over neighbouring channels)^beta."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        import kiln

        if input.dim() != 4:
            raise ValueError(f"[CrossMapLRN2d] CrossMapLRN2d: Expected input to be 4D, got "
                             f"{input.dim()}D instead.")
        windows = kiln.tensor(_cross_map_windows(input.shape[1], self.size), dtype=input.dtype,
                              device=input.device)
        sums = kiln.einsum("cj,njhw->nchw", windows, input * input)
        return input * (sums * (self.alpha / self.size) + self.k).pow(-self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
