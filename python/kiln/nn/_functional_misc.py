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


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    kd, kh, kw = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 3
    return _lp_pool("lp_pool3d", _nn.avg_pool3d, _nn.max_pool3d, input, norm_type, kernel_size,
                    stride, ceil_mode, kd * kh * kw)


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


def _base_coordinates(steps, align_corners, theta):
    """The normalised [-1, 1] pixel coordinates of one axis: pixel centres, or the corner
    pixels' centres at +-1 with align_corners."""
    if steps <= 1:
        return kiln.zeros((steps,), dtype=theta.dtype, device=theta.device)
    coords = kiln.linspace(-1.0, 1.0, steps, dtype=theta.dtype, device=theta.device)
    return coords if align_corners else coords * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) of (x, y) positions that the 2-D affine maps theta
    (N, 2, 3) send the output pixels of `size` (N, C, H, W) to."""
    align_corners = bool(align_corners)
    if not kiln.is_floating_point(theta):
        raise ValueError(f"[affine_grid] Expected theta to have floating point type, but got "
                         f"{theta.dtype}")
    size = [int(s) for s in size]
    if len(size) == 5:
        raise NotImplementedError(f"[affine_grid] kiln supports 2-D affine grids (4-D sizes) "
                                  f"only, got size {size}")
    if len(size) != 4:
        raise NotImplementedError(f"[affine_grid] affine_grid only supports 4D and 5D sizes, for "
                                  f"2D and 3D affine transforms, respectively. Got size {size}.")
    if theta.dim() != 3 or list(theta.shape[1:]) != [2, 3]:
        raise ValueError(f"[affine_grid] Expected a batch of 2D affine matrices of shape Nx2x3 "
                         f"for size {size}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"[affine_grid] Expected non-zero, positive output size. Got {size}")
    n, _, h, w = size
    if theta.shape[0] != n:
        raise RuntimeError(f"[affine_grid] theta holds {theta.shape[0]} matrices for a batch of "
                           f"{n} (size {size})")
    xs = _base_coordinates(w, align_corners, theta)
    ys = _base_coordinates(h, align_corners, theta)
    base = kiln.stack([xs.unsqueeze(0).expand(h, w), ys.unsqueeze(1).expand(h, w),
                       kiln.ones((h, w), dtype=theta.dtype, device=theta.device)], -1)
    return (base.reshape(1, h * w, 3) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def _reflect(coord, twice_low, twice_high):
    """Folds coordinates into [twice_low / 2, twice_high / 2] by mirroring at both ends."""
    if twice_low == twice_high:
        return kiln.zeros_like(coord)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    dist = (coord - low).abs()
    flips = (dist / span).floor()
    extra = dist - flips * span
    even = (flips - 2 * (flips / 2).floor()) == 0
    return kiln.where(even, extra + low, span - extra + low)


def _source_coordinate(coord, size, padding_mode, align_corners):
    """Normalised grid coordinates ([-1, 1]) as pixel positions, after the padding mode."""
    if align_corners:
        coord = (coord + 1) / 2 * (size - 1)
    else:
        coord = ((coord + 1) * size - 1) / 2
    if padding_mode == "reflection":
        coord = (_reflect(coord, 0, 2 * (size - 1)) if align_corners
                 else _reflect(coord, -1, 2 * size - 1))
    if padding_mode in ("border", "reflection"):
        coord = coord.clamp(0, size - 1)
    return coord


def _gather_pixels(flat, xi, yi, h, w):
    """input values at integer pixels (xi, yi) of shape (N, Ho, Wo), zero outside."""
    n, c = flat.shape[0], flat.shape[1]
    inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
    index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).to(kiln.int64)
    out_shape = list(xi.shape)
    index = index.reshape(n, 1, -1).expand(n, c, index[0].numel())
    values = flat.gather(2, index).reshape([n, c] + out_shape[1:])
    return values * inside.unsqueeze(1).to(flat.dtype)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples input (N, C, H, W) at the normalised positions grid (N, Ho, Wo, 2) (x, y in
    [-1, 1]), bilinearly or from the nearest pixel; positions outside read zeros, the border
    pixel or the mirrored position according to padding_mode."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"[grid_sample] nn.functional.grid_sample(): expected mode to be "
                         f"'bilinear', 'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"[grid_sample] nn.functional.grid_sample(): expected padding_mode to "
                         f"be 'zeros', 'border', or 'reflection', but got: '{padding_mode}'")
    if mode == "bicubic" or input.dim() == 5:
        raise NotImplementedError(f"[grid_sample] kiln samples 4-D inputs in 'bilinear' or "
                                  f"'nearest' mode only, got mode '{mode}' and input of size "
                                  f"{list(input.shape)}")
    if input.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2 or \
            grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"[grid_sample] expected input (N, C, H, W) and grid (N, H_out, "
                           f"W_out, 2), got input of size {list(input.shape)} and grid of size "
                           f"{list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"[grid_sample] expected input and grid to have the same dtype, got "
                           f"{input.dtype} and {grid.dtype}")
    align_corners = bool(align_corners)
    n, c, h, w = input.shape
    ix = _source_coordinate(grid[..., 0], w, padding_mode, align_corners)
    iy = _source_coordinate(grid[..., 1], h, padding_mode, align_corners)
    flat = input.reshape(n, c, h * w)
    if mode == "nearest":
        return _gather_pixels(flat, ix.round().detach(), iy.round().detach(), h, w)
    x0, y0 = ix.floor().detach(), iy.floor().detach()
    wx1, wy1 = (ix - x0).unsqueeze(1), (iy - y0).unsqueeze(1)
    wx0, wy0 = 1 - wx1, 1 - wy1
    return (_gather_pixels(flat, x0, y0, h, w) * wx0 * wy0
            + _gather_pixels(flat, x0 + 1, y0, h, w) * wx1 * wy0
            + _gather_pixels(flat, x0, y0 + 1, h, w) * wx0 * wy1
            + _gather_pixels(flat, x0 + 1, y0 + 1, h, w) * wx1 * wy1)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d: maxima back at their positions, zeros elsewhere."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)
