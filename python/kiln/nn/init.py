"""kiln.nn.init: in-place parameter initialisers with PyTorch's formulas and names.

Every function fills `tensor` without recording autograd history, accepts an
optional `generator=` and returns the tensor.
"""

import math
import numbers
import warnings


import kiln
from kiln.autograd.grad_mode import no_grad

_LINEAR_GAINS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended scale of weights feeding `nonlinearity` (keeps activations' variance)."""
    if nonlinearity in _LINEAR_GAINS:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Number) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"[init.calculate_gain] negative_slope {param!r} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"[init.calculate_gain] Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("[init._calculate_fan_in_and_fan_out] Fan in and fan out can not be "
                         f"computed for tensor with fewer than 2 dimensions, got shape "
                         f"{list(tensor.shape)}")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"[init._calculate_correct_fan] Mode {mode} not supported, please use "
                         "one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(tensor, name):
    if tensor.numel() == 0:
        warnings.warn(f"Initializing zero-element tensors is a no-op ({name})")
        return True
    return False


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor with U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor with N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def ones_(tensor):
    with no_grad():
        return tensor.fill_(1.0)


def eye_(tensor):
    """Fills a 2-D tensor with the identity (ones on the main diagonal)."""
    if tensor.dim() != 2:
        raise ValueError(f"[init.eye_] Only tensors with 2 dimensions are supported, got shape "
                         f"{list(tensor.shape)}")
    with no_grad():
        return tensor.copy_(kiln.eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _empty(tensor, "kaiming_uniform_"):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if _empty(tensor, "kaiming_normal_"):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def _erfinv(x):
    """Inverse error function of a float tensor: Giles' single-precision polynomial
    (M. Giles, "Approximating the erfinv function", 2010), then one Newton step on erf
    for float64 accuracy."""
    w = -kiln.log((1 - x) * (1 + x))
    central = w - 2.5
    p = kiln.full_like(x, 2.81022636e-08)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p = c + p * central
    tail = kiln.sqrt(w) - 3
    q = kiln.full_like(x, -0.000200214257)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        q = c + q * tail
    y = kiln.where(w < 5.0, p, q) * x
    return y - (kiln.erf(y) - x) / (2.0 / math.sqrt(math.pi) * kiln.exp(-y * y))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) restricted to [a, b], drawn by inverting the normal CDF."""
    def cdf(v):
        return (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.")
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    work_dtype = kiln.float64 if tensor.dtype == kiln.float64 else kiln.float32
    with no_grad():
        u = kiln.empty(tuple(tensor.shape), dtype=work_dtype, device=tensor.device)
        u.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        # Keep erfinv's argument inside (-1, 1) so the ends stay finite.
        eps = 1e-15 if work_dtype == kiln.float64 else 1e-7
        values = _erfinv(u.clamp(-1 + eps, 1 - eps)) * (std * math.sqrt(2.0)) + mean
        return tensor.copy_(values.clamp(a, b))


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one (Saxe et al.,
    2013); dims after the first are flattened. The QR runs in NumPy on the host."""
    if tensor.dim() < 2:
        raise ValueError(f"[init.orthogonal_] Only tensors with 2 or more dimensions are "
                         f"supported, got shape {list(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        gauss = kiln.empty((rows, cols), dtype=tensor.dtype, device=tensor.device)
        gauss.normal_(0.0, 1.0, generator=generator)
        import numpy as np  # lazily: import kiln need not load NumPy

        flat = gauss.double().cpu().numpy()
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        result = kiln.tensor(np.ascontiguousarray(q * gain)).reshape(tuple(tensor.shape))
        return tensor.copy_(result)



def dirac_(tensor, groups=1):
    """Fills a 3-, 4- or 5-D convolution weight with the Dirac delta, so the convolution keeps
    its input: in each of `groups` groups, out-channel d passes in-channel d through the kernel
    centre (the channels without a partner stay zero)."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError(f"[init.dirac_] Only tensors with 3, 4, or 5 dimensions are supported, "
                         f"got shape {list(tensor.shape)}")
    sizes = list(tensor.shape)
    if groups <= 0 or sizes[0] % groups != 0:
        raise ValueError(f"[init.dirac_] dim 0 must be divisible by groups, got size {sizes[0]} "
                         f"and groups={groups}")
    out_per_group = sizes[0] // groups
    centre = tuple(s // 2 for s in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(out_per_group, sizes[1])):
                tensor[(g * out_per_group + d, d) + centre] = 1
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std^2) with ceil(sparsity * rows) zeros per column, at rows
    picked uniformly without replacement (Martens, 2010)."""
    if tensor.dim() != 2:
        raise ValueError(f"[init.sparse_] Only tensors with 2 dimensions are supported, got shape "
                         f"{list(tensor.shape)}")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            zero_rows = kiln.randperm(rows, generator=generator, device=tensor.device)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


def _deprecated(new):
    """PyTorch's pre-0.4 names without the trailing underscore: they warn and call `new`."""
    old = new.__name__[:-1]

    def init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)

    init.__name__ = init.__qualname__ = old
    init.__doc__ = f"Deprecated alias of {new.__name__}."
    return init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
