"""The rest of torch.Tensor's and torch's small API, off the per-op path: legacy and
predicate methods, Python-callable maps, resizing, and the methods PyTorch
removed but still names (they raise PyTorch's error, pointing to the replacement).
"""

import builtins as _builtins
import math
import warnings

from kiln import _C
from kiln._C import Tensor




def _removed(name, hint):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now "
                           f"removed. {hint}")

    method.__name__ = name
    return method


_REMOVED = {
    "eig": "`torch.linalg.eig` returns complex tensors; use it (or torch.linalg.eigh for "
           "symmetric matrices) instead.",
    "lstsq": "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`, which has "
             "reversed arguments and does not return the QR decomposition.",
    "solve": "`torch.solve` is deprecated in favor of `torch.linalg.solve`, which has its "
             "arguments reversed and does not return the LU factorization.",
    "symeig": "Use `torch.linalg.eigh` (or `torch.linalg.eigvalsh`); it uses the lower "
              "triangle by default.",
}


def _reinforce(self, reward):
    raise RuntimeError("reinforce() was removed.\nUse kiln.distributions instead.")


def _volatile(self):
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


def _cpu_values(self, op):
    if self.device.type != "cpu":
        raise TypeError(f"[{op}] {op} is only implemented on CPU tensors")
    return self.reshape(-1).tolist()


def _write_values(self, values):
    return self.copy_(_C.tensor(values, dtype=self.dtype).reshape(self.shape))


def _apply_(self, callable):
    """Applies a Python function to each element in place (CPU only, slow, as PyTorch)."""
    return _write_values(self, [callable(v) for v in _cpu_values(self, "apply_")])


def _map_(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]) with tensor broadcast to self (CPU only)."""
    other = _cpu_values(tensor.expand(self.shape), "map_")
    return _write_values(self, [callable(a, b) for a, b in zip(_cpu_values(self, "map_"),
                                                                other)])


def _map2_(self, x, y, callable):
    xs = _cpu_values(x.expand(self.shape), "map2_")
    ys = _cpu_values(y.expand(self.shape), "map2_")
    return _write_values(self, [callable(a, b, c) for a, b, c in
                                zip(_cpu_values(self, "map2_"), xs, ys)])


def _new(self, *args, **kwargs):
    """The legacy constructor: self.new(sizes...) is uninitialised with self's dtype and
    device, self.new(data) copies data, self.new() is empty."""
    dtype, device = kwargs.pop("dtype", self.dtype), kwargs.pop("device", self.device)
    if kwargs:
        raise TypeError(f"[Tensor.new] unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].to(dtype=dtype, device=device)
    if len(args) == 1 and not isinstance(args[0], int):
        if isinstance(args[0], (tuple, list)) and all(isinstance(a, int) for a in args[0]) \
                and type(args[0]).__name__ == "Size":
            return _C.empty(tuple(args[0]), dtype=dtype, device=device)
        return _C.tensor(args[0], dtype=dtype, device=device)
    return _C.empty(args if args else (0,), dtype=dtype, device=device)


def _is_nonzero(self):
    if self.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if self.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item() != 0)


def _is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def _is_set_to(self, tensor):
    """Whether both tensors are the same view of the same memory."""
    return (self.data_ptr() == tensor.data_ptr() and self.dtype == tensor.dtype
            and tuple(self.shape) == tuple(tensor.shape)
            and tuple(self.stride()) == tuple(tensor.stride()) and self.device == tensor.device)


def _dim_order(self, *, ambiguity_check=False):
    """Dims from outermost to innermost in memory (by stride, ties in dim order)."""
    strides = self.stride()
    order = sorted(_builtins.range(self.dim()), key=lambda d: -strides[d])
    if ambiguity_check and len(set(strides)) != len(strides):
        raise RuntimeError("[dim_order] The tensor does not have unique dim order, or cannot "
                           "map to a single dim order")
    return tuple(order)


def _resize_(self, *sizes, memory_format=None):
    """Resizes self in place to sizes (contiguous strides), keeping the leading elements;
    new elements are uninitialised. Refused for tensors that require grad, as PyTorch."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if self.requires_grad:
        raise RuntimeError("[resize_] cannot resize variables that require grad")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"[resize_] Trying to create tensor with negative dimension: "
                           f"{list(sizes)}")
    new = _C.empty(sizes, dtype=self.dtype, device=self.device)
    keep = min(new.numel(), self.numel())
    if keep:
        new.reshape(-1)[:keep].copy_(self.reshape(-1)[:keep])
    self.data = new
    return self


def _resize_as_(self, other, memory_format=None):
    return _resize_(self, tuple(other.shape))


def _resize(self, *sizes):
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resize_(self.detach().clone(), *sizes)


def _resize_as(self, other):
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resize_(self.detach().clone(), tuple(other.shape))


def _set_(self, source=None, storage_offset=0, size=None, stride=None):
    """self becomes a view of source's memory (set_(tensor)), or of source with the given
    offset, size and stride; set_() makes self empty."""
    if source is None:
        self.data = _C.empty(0, dtype=self.dtype, device=self.device)
        return self
    if not isinstance(source, Tensor):
        raise TypeError(f"[set_] source must be a Tensor, not {type(source).__name__}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"[set_] Expected the source to have dtype {self.dtype}, got "
                           f"{source.dtype}")
    if size is not None:
        stride = stride if stride is not None else _contiguous_strides(size)
        source = source.as_strided(size, stride, storage_offset)
    if _C.is_grad_enabled() and self.requires_grad:
        raise RuntimeError("[set_] a tensor that requires grad can't be set to new memory "
                           "in place; use .detach() or set_ under kiln.no_grad()")
    self.data = source
    return self


def _contiguous_strides(size):
    strides, step = [], 1
    for s in reversed(size):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


def _index(self, indices):
    """self[indices], with None entries meaning a whole dim (ATen's index.Tensor)."""
    return self[tuple(slice(None) if i is None else i for i in indices)]


def _as_subclass(self, cls):
    """A cls instance over self's memory (cls must subclass kiln.Tensor). The new object
    is a fresh leaf, so a tensor in the autograd graph is refused rather than cut off."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"[as_subclass] cls must be a subclass of kiln.Tensor, got {cls!r}")
    if self.requires_grad and _C.is_grad_enabled():
        raise NotImplementedError("[as_subclass] kiln cannot move a tensor that requires grad "
                                  "to a subclass while keeping its graph; call it on "
                                  "tensor.detach() (or under kiln.no_grad()) instead")
    result = Tensor.__new__(cls)
    Tensor.__init__(result, self)
    return result


def _module_load(self, other, assign=False):
    """What load_state_dict copies into self: other itself (PyTorch's default)."""
    return other


# Methods attached to Tensor under these names.
_METHODS = {
    "reinforce": _reinforce, "apply_": _apply_, "map_": _map_, "map2_": _map2_, "new": _new,
    "is_nonzero": _is_nonzero, "is_same_size": _is_same_size, "is_set_to": _is_set_to,
    "dim_order": _dim_order, "resize_": _resize_, "resize_as_": _resize_as_,
    "resize": _resize, "resize_as": _resize_as, "set_": _set_, "index": _index,
    "module_load": _module_load, "as_subclass": _as_subclass,
    "is_distributed": lambda self: False,
    "const_data_ptr": lambda self: self.data_ptr(),
    "hardshrink": lambda self, lambd=0.5: _F().hardshrink(self, lambd),
    "prelu": lambda self, weight: _F().prelu(self, weight),
}

# Read-only attributes.
_PROPERTIES = {
    "volatile": _volatile, "name": lambda self: None,
    "grad_dtype": lambda self: self.dtype,
}


def _F():
    from kiln.nn import functional

    return functional


# Top-level functions.
def is_nonzero(input):
    return _is_nonzero(input)


def is_same_size(input, other):
    return _is_same_size(input, other)


def is_distributed(input):
    return False


def is_storage(obj):
    """Whether obj is a storage handle (Tensor.untyped_storage() / storage())."""
    from kiln._storage import UntypedStorage

    return isinstance(obj, UntypedStorage)


def get_device(input):
    return input.get_device()


def typename(obj):
    """The type's name: 'kiln.FloatTensor' for tensors, the class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "") or ""
    name = type(obj).__qualname__
    return name if module in ("builtins", "__builtin__", "") else f"{module}.{name}"


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    scaled = input if alpha == 1 else input * alpha
    return other - scaled if isinstance(other, Tensor) else scaled.__rsub__(other)


def range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None,
          requires_grad=False, out=None):
    """Deprecated in PyTorch: like arange, but including end."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("[range] step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("[range] upper bound and larger bound inconsistent with step sign")
    count = int(math.floor((end - start) / step)) + 1
    dtype = dtype or _C.get_default_dtype()
    result = (start + step * _C.arange(count, dtype=_C.float64, device=device)).to(dtype)
    if requires_grad:
        result.requires_grad_(True)
    return out.copy_(result) if out is not None else result


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor, sharing memory with a tensor (or a NumPy array on the CPU) when no
    copy is needed and copy is not True."""
    if isinstance(obj, Tensor):
        result = obj.to(dtype=dtype or obj.dtype, device=device or obj.device)
        if copy and result is obj:
            result = obj.clone()
    else:
        if copy is False and not hasattr(obj, "__array_interface__"):
            raise ValueError("[asarray] can't alias a Python sequence: pass copy=None or True")
        if hasattr(obj, "__array_interface__") and not copy and hasattr(_C, "from_numpy") \
                and dtype is None and (device is None or str(device) == "cpu"):
            result = _C.from_numpy(obj)
        else:
            result = _C.tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        result.requires_grad_(True)
    return result


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over an object implementing the buffer protocol, sharing its memory."""
    import numpy as np

    from kiln import _tensor_bytes

    np_dtype = np.dtype(_tensor_bytes.dtype_name(dtype)) \
        if hasattr(_tensor_bytes, "dtype_name") else None
    array = np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset)
    result = _C.from_numpy(array)
    if requires_grad:
        result.requires_grad_(True)
    return result


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised tensor of `size` whose dims lie in memory in physical_layout's
    order (outermost first)."""
    if sorted(physical_layout) != list(_builtins.range(len(size))):
        raise RuntimeError(f"[empty_permuted] physical_layout must be a permutation of "
                           f"0..{len(size) - 1}, got {list(physical_layout)}")
    physical = [size[d] for d in physical_layout]
    inverse = [0] * len(size)
    for i, d in enumerate(physical_layout):
        inverse[d] = i
    result = _C.empty(physical, dtype=dtype, device=device).permute(inverse)
    return result.requires_grad_(True) if requires_grad else result


__all__ = ["is_nonzero", "is_same_size", "is_distributed", "is_storage",
           "get_device", "typename", "rsub", "range", "asarray", "frombuffer",
           "empty_permuted"]


def install():
    for name, fn in _METHODS.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name, hint in _REMOVED.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, _removed(name, hint))
    for name, getter in _PROPERTIES.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(getter))
