"""Shape utilities over several tensors, as torch.functional: broadcast_shapes,
broadcast_tensors, meshgrid, cartesian_prod.

Each is a composition of views (expand, reshape), so results share storage with
their inputs and gradients flow through the existing view backward rules.
"""

import warnings

from kiln import _C
from kiln._size import Size

__all__ = ["broadcast_shapes", "broadcast_tensors", "cartesian_prod", "meshgrid"]


def _as_shape(shape, op):
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"[{op}] expected shapes to be tuples of ints or ints, got {shape!r}")
    for s in shape:
        if s < 0:
            raise RuntimeError(f"[{op}] Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    return tuple(shape)


def _broadcast(shapes, op):
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size == result[i] or size == 1:
                continue
            if result[i] != 1:
                raise RuntimeError(
                    f"[{op}] shape mismatch: objects cannot be broadcast to a single shape. "
                    f"Mismatch is at dim {i - ndim}: {result[i]} vs {size}, shapes "
                    f"{[list(s) for s in shapes]}")
            result[i] = size
    return Size(result)


def broadcast_shapes(*shapes):
    """The shape that tensors of the given shapes broadcast to."""
    return _broadcast([_as_shape(s, "broadcast_shapes") for s in shapes], "broadcast_shapes")


def _tensor_args(tensors, op):
    # torch accepts f(a, b) and f([a, b]) alike.
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"[{op}] expected Tensors, but argument {i} is "
                            f"{type(t).__name__}")
    return tensors


def broadcast_tensors(*tensors):
    """Expanded views of the inputs, all of their broadcast shape."""
    tensors = _tensor_args(tensors, "broadcast_tensors")
    shape = _broadcast([tuple(t.shape) for t in tensors], "broadcast_tensors")
    return tuple(t.expand(shape) for t in tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d/1-d inputs; 'ij' (matrix) or 'xy' (Cartesian) indexing."""
    tensors = _tensor_args(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("kiln.meshgrid: pass the indexing argument; it defaults to 'ij' as in "
                      "torch.meshgrid, which will require it in an upcoming release.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"[meshgrid] indexing must be one of \"xy\" or \"ij\", but received: "
                           f"{indexing}")
    if not tensors:
        raise RuntimeError("[meshgrid] expects a non-empty TensorList")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.dim() > 1:
            raise RuntimeError(f"[meshgrid] Expected 0D or 1D tensor in the tensor list but got "
                               f"tensor {i} of shape {list(t.shape)}")
        if t.dtype != first.dtype:
            raise RuntimeError(f"[meshgrid] expects all tensors to have the same dtype, got "
                               f"{first.dtype} and {t.dtype}")
        if t.device != first.device:
            raise RuntimeError(f"[meshgrid] expects all tensors to have the same device, got "
                               f"{first.device} and {t.device}")
    # 'xy' is 'ij' with the first two axes swapped, in the inputs and then the outputs.
    swap = indexing == "xy" and len(tensors) >= 2
    order = [1, 0, *range(2, len(tensors))] if swap else list(range(len(tensors)))
    ordered = [tensors[i] for i in order]
    shape = [t.numel() for t in ordered]
    grids = []
    for axis, t in enumerate(ordered):
        view_shape = [1] * len(ordered)
        view_shape[axis] = t.numel()
        grids.append(t.reshape(view_shape).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors):
    """Rows of every combination of the inputs' elements (1-d inputs, 'ij' order)."""
    tensors = _tensor_args(tensors, "cartesian_prod")
    for i, t in enumerate(tensors):
        if t.dim() != 1:
            raise RuntimeError(f"[cartesian_prod] Expect a 1D vector, but got tensor {i} of "
                               f"shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)
