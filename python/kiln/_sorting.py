"""Ops built on sorting and run detection: mode, msort, unique_consecutive, plus the
index helpers unravel_index and nonzero_static.

All are compositions of kiln ops (sort, comparisons, cumsum, gather), so they run on
every device.
"""

from kiln import _C
from kiln._C import Tensor
from kiln._return_types import named

__all__ = ["mode", "msort", "unique_consecutive", "unravel_index", "nonzero_static"]


def _rows(input, dim):
    """input with dim moved last and the rest flattened: (rows, n), and the kept shape."""
    moved = input.movedim(dim, -1)
    return moved.reshape(-1, moved.shape[-1]), tuple(moved.shape[:-1])


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim. Ties go to the smallest value,
    and the index is that value's last position (PyTorch's CPU results)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"[mode] argument 'input' must be Tensor, not {type(input).__name__}")
    x = input.reshape(1) if input.dim() == 0 else input
    dim = dim % x.dim() if -x.dim() <= dim < x.dim() else None
    if dim is None:
        raise IndexError(f"[mode] Dimension out of range (expected to be in range of "
                         f"[{-x.dim()}, {x.dim() - 1}])")
    if x.shape[dim] == 0:
        raise IndexError("[mode] Expected reduction dim to have non-zero size.")
    rows, kept = _rows(x, dim)
    values, perm = rows.sort(-1, stable=True)
    n = values.shape[-1]
    position = _C.arange(n, device=x.device).expand(values.shape)
    boundary = values[:, 1:] != values[:, :-1]
    true_column = _C.ones((values.shape[0], 1), dtype=_C.bool, device=x.device)
    is_start = _C.cat([true_column, boundary], 1)
    is_end = _C.cat([boundary, true_column], 1)
    start = _C.cummax(_C.where(is_start, position, _C.zeros_like(position)), 1).values
    run_length = _C.where(is_end, position - start + 1, _C.zeros_like(position))
    winner = run_length.argmax(1, keepdim=True)  # first maximum: the smallest value
    out_values = rows.gather(1, perm.gather(1, winner)).reshape(kept)
    out_indices = perm.gather(1, winner).reshape(kept)
    if keepdim:
        out_values, out_indices = out_values.unsqueeze(dim), out_indices.unsqueeze(dim)
    if input.dim() == 0:
        out_values, out_indices = out_values.reshape(()), out_indices.reshape(())
    return named("mode", ("values", "indices"), (out_values, out_indices))


def msort(input):
    """input sorted along its first dim."""
    return input.sort(0).values


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapses runs of equal consecutive elements (of the flattened input, or of the
    slices along dim); optionally the run of each input element and each run's length."""
    if dim is None:
        flat = input.reshape(-1)
        change = flat[1:] != flat[:-1]
    else:
        slices = input.movedim(dim, 0)
        flat_slices = slices.reshape(slices.shape[0], -1)
        change = (flat_slices[1:] != flat_slices[:-1]).any(1) if flat_slices.shape[1] else \
            _C.zeros(max(slices.shape[0] - 1, 0), dtype=_C.bool, device=input.device)
    n = change.shape[0] + 1 if (input.numel() if dim is None else input.shape[dim]) else 0
    is_start = _C.cat([_C.ones(min(n, 1), dtype=_C.bool, device=input.device), change])
    starts = is_start.nonzero().reshape(-1)
    if dim is None:
        output = flat.index_select(0, starts)
    else:
        output = input.index_select(dim, starts)
    results = [output]
    if return_inverse:
        inverse = is_start.to(_C.int64).cumsum(0) - 1
        results.append(inverse.reshape(input.shape) if dim is None else inverse)
    if return_counts:
        ends = _C.cat([starts[1:], _C.tensor([n], device=input.device)])
        results.append(ends - starts)
    return results[0] if len(results) == 1 else tuple(results)


def unravel_index(indices, shape):
    """The coordinates in `shape` of each flat index, as a tuple of tensors."""
    if not isinstance(indices, Tensor):
        indices = _C.tensor(indices)
    if indices.is_floating_point() or indices.dtype == _C.bool:
        raise TypeError(f"[unravel_index] expected 'indices' to be integer dtype, but got "
                        f"{indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError("[unravel_index] 'shape' cannot have negative values, but got "
                         f"{shape}")
    total = 1
    for s in shape:
        total *= s
    if indices.numel() and (bool((indices < -total).any()) or bool((indices >= total).any())):
        raise RuntimeError(f"[unravel_index] 'indices' must be in range [{-total}, "
                           f"{total - 1}] for shape {shape}")
    flat = indices.to(_C.int64) % max(total, 1)
    coords = []
    for s in reversed(shape):
        coords.append(flat % s if s else flat)
        flat = flat // s if s else flat
    return tuple(reversed(coords))


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero(input) with exactly `size` rows: truncated, or padded with fill_value."""
    if size < 0:
        raise RuntimeError(f"[nonzero_static] 'size' must be a non-negative integer, got {size}")
    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size]
    pad = _C.full((size - found.shape[0], input.dim()), fill_value, dtype=_C.int64,
                  device=input.device)
    return _C.cat([found, pad])


def install():
    for name in ("mode", "msort", "unique_consecutive", "nonzero_static"):
        setattr(Tensor, name, globals()[name])
