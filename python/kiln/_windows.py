"""Window functions (torch.hann_window, ...), PyTorch's definitions.

Each window of length N is a function of t = n / (N - 1) for the symmetric window;
the periodic window (the default, for spectral analysis) is the symmetric window of
length N + 1 without its last point. Values are computed in float64 on the target
device and cast to the requested floating dtype.
"""

import math

from kiln import _C

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window"]


def _window(name, window_length, periodic, dtype, device, requires_grad, shape_fn):
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"[{name}] window_length must be an int, not "
                        f"{type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"[{name}] {name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    dtype = _C.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"[{name}] {name} expects floating point dtypes, got: {dtype}")
    if window_length <= 1:
        values = _C.ones(window_length, dtype=dtype, device=device)
    else:
        length = window_length + 1 if periodic else window_length
        n = _C.arange(window_length, dtype=_C.float64, device=device)
        values = shape_fn(n / (length - 1)).to(dtype)
    return values.requires_grad_(requires_grad) if requires_grad else values


def _cosine_sum(coefficients):
    """sum_k (-1)^k a_k cos(2 pi k t): the Hann, Hamming and Blackman family."""
    def shape(t):
        result = _C.full_like(t, coefficients[0])
        for k, a in enumerate(coefficients[1:], start=1):
            result = result + (-1) ** k * a * _C.cos(2 * math.pi * k * t)
        return result
    return shape


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((alpha, beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.42, 0.5, 0.08)))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda t: 1 - _C.abs(2 * t - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    def shape(t):
        radius = _C.sqrt(_C.clamp(1 - (2 * t - 1) ** 2, min=0))
        return _C.i0(beta * radius) / _C.i0(_C.tensor(beta, dtype=_C.float64, device=t.device))
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   shape)
