"""PyTorch's legacy tensor types: kiln.FloatTensor, kiln.LongTensor, ..., and
kiln.cuda.FloatTensor, ....

Note [Legacy tensor types]
In PyTorch these are types: calling one builds a tensor of its dtype and device
(FloatTensor(2, 3) uninitialised by sizes, FloatTensor(data) copied from a list or
array, FloatTensor(t) aliasing a tensor of the same dtype), and isinstance(t,
kiln.FloatTensor) asks for exactly that dtype and device. kiln makes each a class
whose metaclass answers isinstance and whose __new__ returns a plain kiln.Tensor:
there is one tensor class, as in PyTorch, where these types are views of it.
"""

from kiln import _C
from kiln._tensor import _TYPE_NAMES


class _LegacyTensorType(type):
    def __instancecheck__(cls, obj):
        return (isinstance(obj, _C.Tensor) and obj.dtype == cls.dtype
                and obj.device.type == cls._device_type)

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _is_size(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _new(cls, *args, device=None):
    name = f"{cls.__module__}.{cls.__name__}"
    if device is not None and _C.device(device).type != cls._device_type:
        raise RuntimeError(f"[{name}] legacy constructor expects device type: "
                           f"{cls._device_type} but device type: {_C.device(device).type} was "
                           "passed")
    place = device if device is not None else cls._device_type
    if all(_is_size(a) for a in args):  # FloatTensor() and FloatTensor(2, 3): sizes
        return _C.empty(*args, dtype=cls.dtype, device=place) if args else _C.empty(
            0, dtype=cls.dtype, device=place)
    if len(args) != 1:
        raise TypeError(f"[{name}] expected data (a list, tuple, array or tensor) or integer "
                        f"sizes, got {len(args)} arguments that are not all integers")
    data = args[0]
    if isinstance(data, _C.Tensor):
        if data.dtype != cls.dtype or data.device.type != cls._device_type:
            raise TypeError(f"[{name}] expected {name} (got {data.type()}); convert with "
                            f"tensor.to({cls.dtype})")
        return data.detach()
    return _C.tensor(data, dtype=cls.dtype, device=place)


def _make(dtype_name, type_name, device_type, module):
    return _LegacyTensorType(type_name, (), {
        "__new__": _new, "__module__": module, "dtype": getattr(_C, dtype_name),
        "is_cuda": device_type == "cuda", "_device_type": device_type,
        "__doc__": f"Legacy constructor of {dtype_name} tensors on {device_type} "
                   "(Note [Legacy tensor types]).",
    })


CPU = {name: _make(dtype, name, "cpu", "kiln") for dtype, name in _TYPE_NAMES.items()}
CUDA = {name: _make(dtype, name, "cuda", "kiln.cuda") for dtype, name in _TYPE_NAMES.items()}
