"""Raw little-endian bytes of a tensor and back: the one conversion that
pickling (kiln.Tensor.__reduce_ex__) and checkpoints (kiln.save/kiln.load) share.

NumPy has no bfloat16, so bfloat16 travels as the high half of float32 bits:
widening bfloat16 to float32 is exact, and so is narrowing those values back.
"""

import numpy as np

from kiln import _C

# kiln dtype name -> (safetensors dtype code, little-endian NumPy dtype of the raw bytes)
DTYPES = {
    "float16": ("F16", "<f2"),
    "bfloat16": ("BF16", "<u2"),
    "float32": ("F32", "<f4"),
    "float64": ("F64", "<f8"),
    "int8": ("I8", "i1"),
    "uint8": ("U8", "u1"),
    "int16": ("I16", "<i2"),
    "int32": ("I32", "<i4"),
    "int64": ("I64", "<i8"),
    "bool": ("BOOL", "?"),
}
BY_CODE = {code: name for name, (code, _) in DTYPES.items()}


def dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def dtype_from_name(name):
    return getattr(_C, name)


def itemsize(name):
    return np.dtype(DTYPES[name][1]).itemsize


def to_bytes(tensor):
    """The tensor's elements in row-major order as little-endian bytes (any device, any strides)."""
    t = tensor.detach()
    if not t.is_cpu:
        t = t.cpu()
    name = dtype_name(t.dtype)
    if name == "bfloat16":
        bits = np.ascontiguousarray(t.float().numpy()).view(np.uint32) >> 16
        return bits.astype("<u2").tobytes()
    return np.ascontiguousarray(t.numpy(), dtype=DTYPES[name][1]).tobytes()


def from_bytes(buf, name, shape):
    """A new CPU tensor of dtype `name` and `shape` holding a copy of `buf`
    (whose length the caller has checked)."""
    arr = np.frombuffer(buf, dtype=DTYPES[name][1]).reshape(shape)
    if name == "bfloat16":
        widened = np.asarray(arr.astype(np.uint32) << 16).view(np.float32)  # 0-d stays an array
        return _C.from_numpy(widened).to(_C.bfloat16)
    # from_numpy shares memory, and `buf` may be read-only or reused: own a copy.
    return _C.from_numpy(arr.astype(arr.dtype.newbyteorder("="), copy=True))
