"""View-derived ops PyTorch has besides the views themselves.

- ``<view>_copy``: the view's values in a new contiguous tensor (``t_copy``, ...).
- ``<view>_scatter``: a copy of ``input`` with ``src`` written into that view of it
  (``select_scatter``, ...). Both are the view op plus ``clone`` / ``copy_``, so
  gradients come from the view's backward and the in-place-on-view rule.
- ``narrow_copy``, ``sum_to_size``, ``fill_diagonal_``, ``new_empty_strided``.
"""

from kiln import _C
from kiln._C import Tensor

# View ops whose *_copy PyTorch has; multi-output views return a list of copies.
_COPIED_VIEWS = ("alias", "as_strided", "detach", "diagonal", "expand", "narrow", "permute",
                 "select", "slice", "split", "split_with_sizes", "squeeze", "t", "transpose",
                 "unbind", "unfold", "unsqueeze", "view")


def _alias(input):
    return input.view(input.shape)


def _slice(input, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * input.dim()
    index[dim if dim >= 0 else dim + input.dim()] = slice(start, end, step)
    return input[tuple(index)]


def _view_fn(name):
    return {"alias": _alias, "slice": _slice}.get(name) or getattr(Tensor, name)


def _copy_of(name):
    view = _view_fn(name)

    def function(input, *args, **kwargs):
        result = view(input, *args, **kwargs)
        if isinstance(result, (tuple, list)):
            return [r.clone(memory_format=_C.contiguous_format) for r in result]
        return result.clone(memory_format=_C.contiguous_format)

    function.__name__ = name + "_copy"
    function.__doc__ = f"The values of ``input.{name}(...)`` in a new contiguous tensor."
    return function


def _scatter_into(input, src, view, op):
    if not isinstance(src, Tensor):
        raise TypeError(f"[{op}] argument 'src' must be Tensor, not {type(src).__name__}")
    out = input.clone()
    target = view(out)
    if tuple(target.shape) != tuple(src.shape):
        raise RuntimeError(f"[{op}] expected src to have a size equal to the slice of self. "
                           f"src size = {list(src.shape)}, slice size = {list(target.shape)}")
    target.copy_(src)
    return out


def select_scatter(input, src, dim, index):
    """input with input.select(dim, index) replaced by src."""
    return _scatter_into(input, src, lambda t: t.select(dim, index), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step of dim replaced by src."""
    return _scatter_into(input, src, lambda t: _slice(t, dim, start, end, step),
                         "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with input.diagonal(offset, dim1, dim2) replaced by src."""
    return _scatter_into(input, src, lambda t: t.diagonal(offset, dim1, dim2),
                         "diagonal_scatter")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with input.as_strided(size, stride, storage_offset) replaced by src."""
    return _scatter_into(input, src,
                         lambda t: t.as_strided(size, stride, storage_offset),
                         "as_strided_scatter")


def narrow_copy(input, dim, start, length):
    return input.narrow(dim, start, length).clone(memory_format=_C.contiguous_format)


def _sum_to_size(self, *size):
    """Sums self down to size (which self must be expandable from, PyTorch's rule)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):  # kiln.Size is a tuple
        size = size[0]
    size = tuple(size)
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != d for s, d in zip(size, shape[lead:])):
        raise RuntimeError(f"[sum_to_size] size {list(size)} is not expandable to size "
                           f"{list(shape)}.")
    result = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, s in enumerate(size) if s == 1 and result.shape[i] != 1)
    return result.sum(dims, keepdim=True) if dims else result


def _fill_diagonal_(self, fill_value, wrap=False):
    """Fills the main diagonal (all dims equal, or a tall 2-D matrix; wrap=True restarts
    the diagonal every ncols + 1 rows there), in place, as PyTorch."""
    if self.dim() < 2:
        raise RuntimeError("[fill_diagonal_] dimensions must larger than 1")
    n = self.shape[0]
    if self.dim() > 2 and any(s != n for s in self.shape):
        raise RuntimeError("[fill_diagonal_] all dimensions of input must be of equal length")
    if self.dim() == 2 and wrap and self.shape[0] > self.shape[1] + 1:
        # Every position k * (ncols + 1) of the flattened matrix, below the first block too.
        cols = self.shape[1]
        flat = _C.arange(0, self.shape[0] * cols, cols + 1, device=self.device)
        index = (flat // cols, flat % cols)
    else:
        positions = _C.arange(min(self.shape), device=self.device)
        index = tuple(positions for _ in range(self.dim()))
    return self.index_put_(index, _C.tensor(fill_value, dtype=self.dtype, device=self.device))


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       layout=None, pin_memory=False):
    return _C.empty_strided(size, stride, dtype=dtype or self.dtype,
                            device=device or self.device, requires_grad=requires_grad)


def _broadcast_to(self, size):
    return self.expand(size)


__all__ = [name + "_copy" for name in _COPIED_VIEWS] + [
    "select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter", "narrow_copy",
    "split_with_sizes", "unsafe_split_with_sizes"]


def split_with_sizes(input, split_sizes, dim=0):
    return input.split_with_sizes(split_sizes, dim)


unsafe_split_with_sizes = split_with_sizes  # kiln's splits are views either way

for _name in _COPIED_VIEWS:
    globals()[_name + "_copy"] = _copy_of(_name)


def install():
    for name in ("select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter",
                 "narrow_copy"):
        setattr(Tensor, name, globals()[name])
    Tensor.unsafe_split_with_sizes = split_with_sizes
    Tensor.sum_to_size = _sum_to_size
    Tensor.fill_diagonal_ = _fill_diagonal_
    Tensor.new_empty_strided = _new_empty_strided
    if not hasattr(Tensor, "broadcast_to"):
        Tensor.broadcast_to = _broadcast_to
