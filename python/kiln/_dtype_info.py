"""kiln.finfo and kiln.iinfo: the numeric limits of kiln's dtypes, as torch.finfo/iinfo."""

from kiln import _C

# NumPy has no bfloat16; it keeps float32's 8 exponent bits with 8 significand bits.
_BFLOAT16 = {
    "bits": 16,
    "eps": 2.0 ** -7,
    "max": (2.0 - 2.0 ** -7) * 2.0 ** 127,
    "tiny": 2.0 ** -126,
    "resolution": 0.01,
}

def _check_dtype(op, dtype):
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"[{op}] expected a kiln.dtype, got {type(dtype).__name__}")


class finfo:
    """Machine limits of a floating dtype; finfo() describes the default dtype."""

    def __init__(self, dtype=None):
        if dtype is None:
            dtype = _C.get_default_dtype()
        _check_dtype("finfo", dtype)
        if not dtype.is_floating_point:
            raise TypeError(f"[finfo] kiln.finfo() requires a floating point input type, got "
                            f"{dtype}. Use kiln.iinfo to handle integer types")
        name = repr(dtype)[len("kiln."):]
        if name == "bfloat16":
            info = _BFLOAT16
        else:
            import numpy as np  # lazily (Note [Lazy submodules])

            np_info = np.finfo(getattr(np, name))
            # PyTorch's resolution is the exact decimal 10**-digits, not its rounding to the dtype.
            info = {
                "bits": np_info.bits,
                "eps": float(np_info.eps),
                "max": float(np_info.max),
                "tiny": float(np_info.tiny),
                "resolution": 10.0 ** -np_info.precision,
            }
        self.bits = int(info["bits"])
        self.eps = info["eps"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = info["tiny"]
        self.smallest_normal = info["tiny"]
        self.resolution = info["resolution"]
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, dtype):
        _check_dtype("iinfo", dtype)
        if dtype.is_floating_point:
            raise TypeError(f"[iinfo] kiln.iinfo() requires an integer input type, got {dtype}. "
                            "Use kiln.finfo to handle floating point types")
        name = repr(dtype)[len("kiln."):]
        if name == "bool":
            raise TypeError("[iinfo] kiln.bool is not supported by kiln.iinfo")
        import numpy as np

        np_info = np.iinfo(getattr(np, name))
        self.bits = int(np_info.bits)
        self.max = int(np_info.max)
        self.min = int(np_info.min)
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
