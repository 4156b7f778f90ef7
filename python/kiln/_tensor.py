"""Tensor methods written in Python: only ones off the per-op hot path."""

import warnings

from kiln import _C
from kiln._C import Tensor
from kiln._tensor_str import tensor_repr


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter([self[i] for i in range(self.shape[0])])


def _contains(self, element):
    return bool((self == element).any())


def _format(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec)


def _deepcopy(self, memo):
    # Like PyTorch: only leaves can be copied; the copy keeps requires_grad and a copy of .grad.
    if id(self) in memo:
        return memo[id(self)]
    if not self.is_leaf:
        raise RuntimeError("[Tensor.__deepcopy__] Only Tensors created explicitly by the user "
                           "(graph leaves) support the deepcopy protocol at the moment")
    result = self.detach().clone()
    if self.requires_grad:
        result.requires_grad_(True)
    if self.grad is not None:
        result.grad = self.grad.detach().clone()
    memo[id(self)] = result
    return result


# The legacy tensor type names, by dtype name: kiln.FloatTensor is torch.FloatTensor.
_TYPE_NAMES = {
    "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor",
    "int32": "IntTensor", "int64": "LongTensor", "float16": "HalfTensor",
    "bfloat16": "BFloat16Tensor", "float32": "FloatTensor", "float64": "DoubleTensor",
}
_TYPE_DTYPES = {name: dtype for dtype, name in _TYPE_NAMES.items()}


def _type_name(t):
    prefix = "kiln.cuda." if t.device.type == "cuda" else "kiln."
    return prefix + _TYPE_NAMES[repr(t.dtype)[len("kiln."):]]


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """No argument: the type's name ('kiln.FloatTensor'). A dtype or such a name
    (kiln.* or torch.*, .cuda. for the GPU): self converted to it, or self itself
    when it already is."""
    if dtype is None:
        return _type_name(self)
    if isinstance(dtype, type) and hasattr(dtype, "_device_type"):  # kiln.FloatTensor, ...
        dtype = f"{dtype.__module__}.{dtype.__name__}"
    if isinstance(dtype, str):
        parts = dtype.split(".")
        cuda = len(parts) == 3 and parts[1] == "cuda"
        if (len(parts) not in (2, 3) or parts[0] not in ("kiln", "torch")
                or (len(parts) == 3 and not cuda) or parts[-1] not in _TYPE_DTYPES):
            raise ValueError(f"[Tensor.type] invalid type: {dtype!r}")
        target = getattr(_C, _TYPE_DTYPES[parts[-1]])
        device = "cuda" if cuda else "cpu"
        if self.dtype == target and self.device.type == device:
            return self
        return self.to(device=device, dtype=target, non_blocking=non_blocking)
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"[Tensor.type] dtype must be a kiln.dtype or a type name string, "
                        f"got {type(dtype).__name__}")
    if self.dtype == dtype:
        return self
    return self.to(dtype=dtype, non_blocking=non_blocking)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A new tensor copied from data, with self's dtype and device unless given."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() rather than tensor.new_tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
    return _C.tensor(data, dtype=self.dtype if dtype is None else dtype,
                     device=self.device if device is None else device,
                     requires_grad=requires_grad)


def _share_memory_(self):
    from kiln._tensor_sharing import share_memory_  # NumPy: not at import kiln

    return share_memory_(self)


def _is_shared(self):
    if self.is_cuda:
        return True
    from kiln._tensor_sharing import is_shared

    return is_shared(self)


Tensor.__deepcopy__ = _deepcopy
Tensor.share_memory_ = _share_memory_
Tensor.is_shared = _is_shared
Tensor.type = _type
Tensor.new_tensor = _new_tensor
Tensor.__repr__ = tensor_repr
Tensor.__str__ = tensor_repr
Tensor.__iter__ = _iter
Tensor.__contains__ = _contains
Tensor.__format__ = _format
Tensor.__module__ = "kiln"


def _rebuild_tensor(dtype, shape, data, device, requires_grad):
    """Unpickles a tensor written by Tensor.__reduce_ex__."""
    from kiln import _tensor_bytes

    t = _tensor_bytes.from_bytes(data, dtype, tuple(shape))
    if device != "cpu":
        t = t.to(device)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _reduce_ex(self, protocol):
    # Plain (dtype name, shape, bytes): no storage sharing, so a worker's batch
    # arrives as an independent tensor and the format never runs kiln code on load
    # beyond this rebuild function.
    from kiln import _tensor_bytes

    return (
        _rebuild_tensor,
        (
            _tensor_bytes.dtype_name(self.dtype),
            tuple(self.shape),
            _tensor_bytes.to_bytes(self),
            str(self.device),
            self.requires_grad,
        ),
    )


Tensor.__reduce_ex__ = _reduce_ex
