"""Activations and dropout variants of kiln.nn.functional written in Python on kiln ops (every
device, gradients from the composition), with PyTorch's names, defaults and error types."""

import warnings

import kiln
from kiln import _C

_nn = _C._nn

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
# -SELU_SCALE * SELU_ALPHA: the value SELU saturates to, which alpha dropout drops to.
_ALPHA_PRIME = 1.7580993408473766


def _apply(fn, input, inplace):
    """fn(input), or fn(input) written back into input. The result is computed from a copy when
    input needs a gradient, so no saved tensor of fn is the one overwritten."""
    if not inplace:
        return fn(input)
    source = input.clone() if input.requires_grad else input
    return input.copy_(fn(source))


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _apply(lambda x: _nn.elu(x, _SELU_ALPHA) * _SELU_SCALE, input, inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha)."""
    if alpha == 0:
        raise RuntimeError("[celu] ZeroDivisionError: alpha must not be 0 (got alpha=0)")
    return _apply(lambda x: _nn.elu(x / alpha, 1.0) * alpha, input, inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def _threshold(input, threshold, value, inplace):
    return _apply(lambda x: kiln.where(x > threshold, x, kiln.full_like(x, value)), input,
                  inplace)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    return _threshold(input, threshold, value, inplace)


def threshold_(input, threshold, value):
    return _threshold(input, threshold, value, True)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - input.tanh()


def _check_lambd(name, lambd):
    if lambd < 0:
        raise RuntimeError(f"[{name}] lambda must be greater or equal to 0, but found to be "
                           f"{lambd}.")


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _check_lambd("softshrink", lambd)
    shrunk = input - input.sign() * lambd
    return kiln.where(input.abs() > lambd, shrunk, kiln.zeros_like(input))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    _check_lambd("hardshrink", lambd)
    return kiln.where(input.abs() > lambd, input, kiln.zeros_like(input))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element while
    training, and is (lower + upper) / 2 otherwise."""
    if lower > upper:
        raise RuntimeError(f"[rrelu] Lower bound should be less than or equal to the upper bound "
                           f"(got lower={lower}, upper={upper})")

    def fn(x):
        if training:
            slope = kiln.rand(x.shape, dtype=x.dtype, device=x.device) * (upper - lower) + lower
        else:
            slope = (lower + upper) / 2
        return kiln.where(x >= 0, x, x * slope)

    return _apply(fn, input, inplace)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def _check_p(name, p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"[{name}] dropout probability has to be between 0 and 1, but got {p}")


def _channel_mask_shape(input):
    return list(input.shape[:2]) + [1] * (input.dim() - 2)


def _channel_dropout(input, p, inplace):
    """Zeroes whole channels (dim 1) of a batched input with probability p."""
    keep = kiln.rand(_channel_mask_shape(input), dtype=input.dtype, device=input.device) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return _apply(lambda x: x * (keep.to(x.dtype) * scale), input, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, L) or unbatched (C, L) inputs."""
    _check_p("dropout1d", p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"[dropout1d] Expected 2D or 3D input, but received a {input.dim()}D "
                           f"input of size {list(input.shape)}. Note that dropout1d exists to "
                           f"provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           f"channel dimension, and an optional batch dimension (i.e. 2D or 3D "
                           f"inputs).")
    if not training or p == 0.0:
        return input
    if input.dim() == 2:
        out = _channel_dropout(input.unsqueeze(0), p, False).squeeze(0)
        return input.copy_(out) if inplace else out
    return _channel_dropout(input, p, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""
    _check_p("dropout3d", p)
    if input.dim() not in (4, 5):
        warnings.warn(f"[dropout3d] Received a {input.dim()}-D input to dropout3d, which is "
                      f"deprecated and will result in an error in a future release. To retain "
                      f"the behavior and silence this warning, please use dropout instead. Note "
                      f"that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 4D or 5D inputs).")
    if not training or p == 0.0:
        return input
    if input.dim() == 4:
        out = _channel_dropout(input.unsqueeze(0), p, False).squeeze(0)
        return input.copy_(out) if inplace else out
    return _channel_dropout(input, p, inplace)


def _alpha_dropout(name, input, p, training, inplace, mask_shape):
    """Dropped values become SELU's saturation value and an affine map a * x + b restores zero
    mean and unit variance (for unit-normal inputs)."""
    _check_p(name, p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply(lambda x: x * 0.0, input, inplace)
    keep = (kiln.rand(mask_shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    a = ((_ALPHA_PRIME ** 2 * p + 1) * (1 - p)) ** -0.5
    b = (keep - 1) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
    return _apply(lambda x: x * (keep * a) + b, input, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the mean and variance of its input."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, list(input.shape))


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout that drops whole channels (dim 1)."""
    if input.dim() < 2:
        raise RuntimeError(f"[feature_alpha_dropout] Feature dropout requires at least 2 "
                           f"dimensions in the input, got input of size {list(input.shape)}")
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace,
                          _channel_mask_shape(input))


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) with g ~ Gumbel(0, 1); `hard` returns the one-hot argmax with
    the soft sample's gradient (straight-through)."""
    uniform = kiln.rand(logits.shape, dtype=logits.dtype, device=logits.device)
    # -log(E) with E ~ Exp(1), E = -log(U); tiny U clamped so the log stays finite.
    gumbels = -(-(uniform.clamp(min=1e-20)).log()).log()
    soft = _nn.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = kiln.zeros_like(logits).scatter(dim, index, 1.0)
    return one_hot - soft.detach() + soft
