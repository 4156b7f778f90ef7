"""Fractional max pooling (Graham, 2014): max over kernel_size windows whose starts follow a
pseudo-random increasing sequence, so the output may be any size up to input - kernel + 1.
Python on kiln ops: the window starts are built on the host from the random samples, the
maxima are a gather plus a max (gradients from the composition)."""

import kiln

_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}


def _tuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _starts(sample, input_size, output_size, pool_size, real):
    """PyTorch's interval sequence: alpha = (in - k) / (out - 1), start_i =
    int((i + u) * alpha) - int(u * alpha), the last window flush with the end. `real` is the
    input's floating type: the arithmetic runs in it, as PyTorch's kernel does."""
    import numpy as np  # lazily: import kiln need not load NumPy

    starts = np.empty(output_size, dtype=np.int64)
    if output_size > 1:
        u = real(sample)
        alpha = real(input_size - pool_size) / real(output_size - 1)
        i = np.arange(output_size - 1, dtype=real)
        starts[:-1] = ((i + u) * alpha).astype(np.int64) - np.int64(u * alpha)
    if output_size > 0:
        starts[-1] = input_size - pool_size
    return starts


def _fractional_max_pool(name, n, input, kernel_size, output_size, output_ratio,
                         return_indices, _random_samples):
    if output_size is None and output_ratio is None:
        raise ValueError(f"[{name}] {name} requires specifying either an output_size or an "
                         f"output_ratio")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"[{name}] {name}(): Expected {n + 1}D or {n + 2}D tensor, but got "
                           f"input of size {list(input.shape)}")
    batched = input.dim() == n + 2
    x = input if batched else input.unsqueeze(0)
    batch, planes = x.shape[0], x.shape[1]
    spatial = list(x.shape[2:])
    kernel = _tuple(kernel_size, n)
    if output_size is None:
        ratio = _tuple(output_ratio, n)
        output_size = [int(s * r) for s, r in zip(spatial, ratio)]
    out_size = list(_tuple(output_size, n))
    for d in range(n):
        if out_size[d] + kernel[d] - 1 > spatial[d]:
            raise RuntimeError(f"[{name}] {name}(): pool {_DIM_NAMES[n][d]} {kernel[d]} too "
                               f"large relative to input {_DIM_NAMES[n][d]} {spatial[d]}")
    if _random_samples is None:
        _random_samples = kiln.rand(batch, planes, n, dtype=x.dtype, device=x.device)
    elif _random_samples.dim() != 3 or list(_random_samples.shape[:2]) != [batch, planes] \
            or _random_samples.shape[2] != n:
        raise RuntimeError(f"[{name}] Expect _random_samples of size [{batch}, {planes}, {n}], "
                           f"got {list(_random_samples.shape)}")
    import numpy as np  # lazily: import kiln need not load NumPy

    real = np.float64 if x.dtype == kiln.float64 else np.float32
    samples = _random_samples.detach().cpu().to(kiln.float64).numpy()
    # Sample k of a plane drives dim (n - 1 - k) for 2-d (width first), dim k for 3-d, as in
    # PyTorch's kernels.
    sample_dim = [n - 1 - d for d in range(n)] if n == 2 else list(range(n))
    # Flat input positions of every window element: (batch, planes, out..., kernel...).
    strides = [int(np.prod(spatial[d + 1:])) for d in range(n)]
    table = np.zeros((batch, planes) + tuple(out_size) + tuple(kernel), dtype=np.int64)
    for b in range(batch):
        for c in range(planes):
            pos = np.zeros(tuple(out_size) + tuple(kernel), dtype=np.int64)
            for d in range(n):
                starts = _starts(samples[b, c, sample_dim[d]], spatial[d], out_size[d],
                                 kernel[d], real)
                coord = starts.reshape([-1 if e == d else 1 for e in range(n)] + [1] * n) \
                    + np.arange(kernel[d]).reshape([1] * n + [-1 if e == d else 1
                                                              for e in range(n)])
                pos = pos + coord * strides[d]
            table[b, c] = pos
    count = int(np.prod(out_size))
    index = kiln.tensor(table.reshape(batch, planes, -1), device=x.device)
    window = x.reshape(batch, planes, -1).gather(2, index).reshape(
        [batch, planes, count, int(np.prod(kernel))])
    out, arg = window.max(dim=-1)
    out = out.reshape([batch, planes] + out_size)
    if not batched:
        out = out.squeeze(0)
    if not return_indices:
        return out
    flat_index = index.reshape([batch, planes, count, -1]).gather(3, arg.unsqueeze(-1))
    indices = flat_index.reshape([batch, planes] + out_size)
    return out, (indices if batched else indices.squeeze(0))


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """2-d fractional max pooling of (N, C, H, W) or (C, H, W); indices are flat H * W
    positions, as max_unpool2d takes them."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """3-d fractional max pooling of (N, C, T, H, W) or (C, T, H, W)."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size,
                                output_ratio, return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    """fractional_max_pool2d that always returns (output, indices)."""
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    """fractional_max_pool3d that always returns (output, indices)."""
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)
