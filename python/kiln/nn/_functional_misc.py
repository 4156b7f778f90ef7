"""Shape and pooling helpers of kiln.nn.functional written in Python on kiln ops (every device,
gradients from the composition): channel_shuffle, local_response_norm, lp_pool*, max_unpool*,
affine_grid and grid_sample, with PyTorch's names, defaults and error types."""

import kiln
from kiln import _C

_nn = _C._nn


def channel_shuffle(input, groups):
    """(N, g * k, *) -> (N, k * g, *): channel c = i * k + j moves to j * g + i."""
    if input.dim() < 3:
        raise RuntimeError(f"[channel_shuffle] channel_shuffle expects input to have at least 3 "
                           f"dimensions, but got input with sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"[channel_shuffle] Number of groups to divide channels in must be "
                           f"positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"[channel_shuffle] Number of channels must be divisible by groups. "
                           f"Got {c} channels and {groups} groups.")
    rest = list(input.shape[2:])
    return (input.reshape([n, groups, c // groups] + rest).transpose(1, 2)
            .reshape(list(input.shape)))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the window
    zero-padded by size // 2 before and (size - 1) // 2 after each channel."""
    if input.dim() < 3:
        raise ValueError(f"[local_response_norm] Expected 3D or higher dimensionality input (got "
                         f"{input.dim()} dimensions, input of size {list(input.shape)})")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    squared = input * input
    pad = [0, 0] * (input.dim() - 2) + [size // 2, (size - 1) // 2]
    padded = _nn.pad(squared, pad)
    window = padded.narrow(1, 0, c)
    for offset in range(1, size):
        window = window + padded.narrow(1, offset, c)
    return input / (window * (alpha / size) + k) ** beta


def _lp_pool(name, pool, max_pool, input, norm_type, kernel_size, stride, ceil_mode, count):
    if float(norm_type) == float("inf"):
        return max_pool(input, kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == 0:
        raise RuntimeError(f"[{name}] norm_type must be non-zero, got {norm_type}")
    out = pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    # The mean may round below zero for inputs that cancel; PyTorch clamps it the same way.
    return (out.sign() * out.abs().relu() * count).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    k = kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size
    return _lp_pool("lp_pool1d", _nn.avg_pool1d, _nn.max_pool1d, input, norm_type, kernel_size,
                    stride, ceil_mode, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    kh, kw = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 2
    return _lp_pool("lp_pool2d", _nn.avg_pool2d, _nn.max_pool2d, input, norm_type, kernel_size,
                    stride, ceil_mode, kh * kw)


def _tuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _max_unpool(name, n, input, indices, kernel_size, stride, padding, output_size):
    """Scatters input into zeros at `indices` (flat positions in each channel's spatial
    output, as max_pool returns them)."""
    kernel = _tuple(kernel_size, n)
    stride = kernel if stride is None else _tuple(stride, n)
    padding = _tuple(padding, n)
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"[{name}] Expected {n + 1}D or {n + 2}D input, got input of size "
                           f"{list(input.shape)}")
    if list(indices.shape) != list(input.shape):
        raise RuntimeError(f"[{name}] Expected shape of indices to be same as that of the input "
                           f"tensor ({list(input.shape)}) but got indices tensor with shape "
                           f"{list(indices.shape)}")
    spatial_in = list(input.shape[-n:])
    if output_size is None:
        spatial = [(spatial_in[d] - 1) * stride[d] - 2 * padding[d] + kernel[d] for d in range(n)]
    else:
        spatial = [int(s) for s in list(output_size)[-n:]]
        if len(list(output_size)) not in (n, n + 2):
            raise ValueError(f"[{name}] output_size must have {n} or {n + 2} elements, got "
                             f"{list(output_size)}")
    lead = list(input.shape[:-n])
    flat_in = input.reshape(lead + [-1])
    total = 1
    for s in spatial:
        total *= s
    out = kiln.zeros(lead + [total], dtype=input.dtype, device=input.device)
    flat_idx = indices.reshape(lead + [-1])
    if flat_idx.numel() and (bool((flat_idx < 0).any()) or bool((flat_idx >= total).any())):
        raise RuntimeError(f"[{name}] Found an invalid max index (an index outside output of "
                           f"size {spatial})")
    return out.scatter(-1, flat_idx, flat_in).reshape(lead + spatial)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: maxima back at their positions, zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: maxima back at their positions, zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)
