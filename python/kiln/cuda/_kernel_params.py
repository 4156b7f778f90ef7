"""What ElementwiseKernel and ReductionKernel share: CuPy's parameter lists (``"T x, raw
float32 y"``), the type of each parameter for a call, scalars as kernel arguments, and the
strided indexing the generated kernels use.

A parameter's type is a dtype name (``float32``, ``int64``, ... and NumPy's aliases
``float``, ``double``, ``half``, ``single``, ``int``) or a type placeholder: any other
identifier, conventionally ``T``. Placeholders are bound per call, first from the output
tensors given, then from the input tensors and NumPy scalars, then from Python numbers
(bool, int -> int64, float -> float64, as NumPy does); one placeholder bound to two dtypes is
a TypeError. Input tensors of a typed parameter are cast to its dtype, as a C call converts
its arguments; an output tensor must already have its parameter's dtype.
"""

import math
import re

import kiln

# dtype name -> CUDA C++ type (half types from cuda_fp16.h / cuda_bf16.h).
C_TYPES = {
    "bool": "bool",
    "uint8": "unsigned char",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "float32": "float",
    "float64": "double",
}
ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
            "bfloat16": 2, "float32": 4, "float64": 8}
_ALIASES = {"float": "float64", "double": "float64", "single": "float32", "half": "float16",
            "int": "int64", "long": "int64", "short": "int16", "byte": "int8", "ubyte": "uint8",
            "bool_": "bool"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Names the generated code defines around the user's code (CuPy reserves the same).
RESERVED = {"i", "n"}
# Limit on broadcast dims after merging: one long long per dim and operand rides in the
# kernel's arguments.
MAX_DIMS = 16

def dtype_name(dtype):
    """The name of a kiln dtype ("float32") from the dtype object."""
    return str(dtype).rsplit(".", 1)[-1]

def kiln_dtype(name):
    return getattr(kiln, name)

class ParamInfo:
    """One parameter: ``[raw] type name``."""

    __slots__ = ("name", "type", "raw", "is_const")

    def __init__(self, name, type_, raw, is_const):
        self.name, self.type, self.raw, self.is_const = name, type_, raw, is_const

    @property
    def is_typed(self):
        return self.type in C_TYPES

    def __repr__(self):
        return f"ParamInfo({'raw ' if self.raw else ''}{self.type} {self.name})"

def parse_params(text, is_const, what):
    """The ParamInfo of each comma-separated parameter of ``text``; ValueError for bad ones."""
    if not isinstance(text, str):
        raise TypeError(f"[{what}] parameter lists are str, got {type(text).__name__}")
    params = []
    for part in text.split(","):
        tokens = part.split()
        if not tokens and not params and not text.strip():
            break
        raw = len(tokens) == 3 and tokens[0] == "raw"
        if len(tokens) != (3 if raw else 2):
            raise ValueError(f"[{what}] cannot parse parameter {part.strip()!r}: write "
                             "'[raw] type name', as in 'float32 x' or 'raw T y'")
        type_, name = tokens[-2], tokens[-1]
        type_ = _ALIASES.get(type_, type_)
        for ident, role in ((type_, "type"), (name, "name")):
            if not _IDENT.match(ident):
                raise ValueError(f"[{what}] parameter {part.strip()!r}: {ident!r} is not a valid "
                                 f"{role}")
        if name in RESERVED or name.startswith("_"):
            raise ValueError(f"[{what}] parameter name {name!r} is reserved (i, n and names "
                             "starting with _ are kiln's)")
        params.append(ParamInfo(name, type_, raw, is_const))
    names = [p.name for p in params]
    for p in params:
        if names.count(p.name) > 1:
            raise ValueError(f"[{what}] parameter name {p.name!r} appears twice")
    return tuple(params)

def check_unique(in_params, out_params, what):
    names = [p.name for p in in_params + out_params]
    for n in names:
        if names.count(n) > 1:
            raise ValueError(f"[{what}] parameter name {n!r} is both an input and an output")
    placeholders = {p.type for p in in_params + out_params if not p.is_typed}
    clash = placeholders & set(names)
    if clash:
        raise ValueError(f"[{what}] {sorted(clash)[0]!r} is both a type placeholder and a "
                         "parameter name")

def is_tensor(x):
    return isinstance(x, kiln.Tensor)

def _scalar_dtype(x, strong):
    """The dtype name a scalar binds a placeholder to; None when it does not bind now.

    NumPy scalars bind with their own type (strong), Python numbers only when nothing else
    bound the placeholder (weak).
    """
    import numpy as np
    if isinstance(x, np.generic):  # before Python numbers: numpy.float64 subclasses float
        return str(x.dtype) if strong else None
    if strong:
        return None
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int64"
    if isinstance(x, float):
        return "float64"
    return None

def check_scalar(x, p, what):
    import numpy as np
    if isinstance(x, np.generic) and str(x.dtype) in C_TYPES:
        return
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return
    raise TypeError(f"[{what}] argument {p.name!r} must be a kiln CUDA tensor or a number "
                    f"(bool, int, float, NumPy scalar of a kiln dtype), got {type(x).__name__}")

def resolve_types(in_params, out_params, in_args, out_args, what):
    """{placeholder: dtype name} for this call (module docstring); TypeError on conflicts."""
    bound = {}

    def bind(p, name, source):
        if p.is_typed or name is None:
            return
        if name not in C_TYPES:
            raise TypeError(f"[{what}] {p.type} {p.name}: dtype {name} is not supported by "
                            f"custom kernels (supported: {', '.join(C_TYPES)})")
        old = bound.setdefault(p.type, name)
        if old != name:
            raise TypeError(f"[{what}] type placeholder {p.type} is {old} but argument "
                            f"{p.name!r} ({source}) is {name}")

    for p, x in zip(out_params, out_args):
        if x is not None:
            bind(p, dtype_name(x.dtype), "output tensor")
    for p, x in zip(in_params, in_args):
        if is_tensor(x):
            bind(p, dtype_name(x.dtype), "tensor")
        else:
            bind(p, _scalar_dtype(x, strong=True), "NumPy scalar")
    for p, x in zip(in_params, in_args):
        if not is_tensor(x) and p.type not in bound:
            bind(p, _scalar_dtype(x, strong=False), "Python number")
    for p in in_params + out_params:
        if not p.is_typed and p.type not in bound:
            raise TypeError(f"[{what}] cannot tell the type {p.type} of {p.name!r} from the "
                            "arguments: pass an output tensor or a typed argument")
    return bound

def param_dtype(p, bound):
    return p.type if p.is_typed else bound[p.type]

def scalar_arg(value, dtype, what, name):
    """A kernel argument holding ``value`` as the parameter's C type. Half types travel as a
    float32 and are converted in the kernel (NumPy has no bfloat16)."""
    import numpy as np
    if dtype in ("float16", "bfloat16"):
        dtype = "float32"
    # The common exact cases, without the overflow checks below (a repeated call's cost).
    kind = type(value)
    if (kind is float and dtype == "float64") or (kind is np.dtype(dtype).type):
        return np.dtype(dtype).type(value)
    try:
        with np.errstate(over="raise", invalid="raise"):
            if isinstance(value, int) and not isinstance(value, bool) and dtype != "bool":
                info = np.iinfo(dtype) if dtype not in ("float32", "float64") else None
                if info is not None and not info.min <= value <= info.max:
                    raise OverflowError
            return np.dtype(dtype).type(value)
    except (OverflowError, FloatingPointError, ValueError, TypeError):
        raise TypeError(f"[{what}] argument {name!r} = {value!r} does not fit in {dtype}") \
            from None

def scalar_ctype(dtype):
    """The C type a scalar of ``dtype`` is passed as (scalar_arg)."""
    return "float" if dtype in ("float16", "bfloat16") else C_TYPES[dtype]

def headers(dtypes):
    out = ""
    if "float16" in dtypes:
        out += "#include <cuda_fp16.h>\n"
    if "bfloat16" in dtypes:
        out += "#include <cuda_bf16.h>\n"
    return out

def collapse(shape, strides_list):
    """(sizes, [strides per operand]) of ``shape`` with size-1 dims dropped and neighbouring
    dims merged where every operand steps through them as one (a contiguous run stays one
    dim); strides are in elements, 0 where an operand is broadcast."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    sizes = []
    strides = [[] for _ in strides_list]
    for d in dims:
        if sizes and all(s[-1] == st[d] * shape[d] for s, st in zip(strides, strides_list)):
            sizes[-1] *= shape[d]
            for s, st in zip(strides, strides_list):
                s[-1] = st[d]
            continue
        sizes.append(shape[d])
        for s, st in zip(strides, strides_list):
            s.append(st[d])
    return sizes, strides

def broadcast_strides(t, shape):
    """Strides of tensor ``t`` broadcast to ``shape`` (0 along broadcast dims)."""
    lead = len(shape) - t.dim()
    out = [0] * lead
    for size, stride, target in zip(t.shape, t.stride(), shape[lead:]):
        out.append(stride if size == target else 0)
    return out

def check_device(args, what):
    """The CUDA device every tensor of ``args`` is on; errors for CPU tensors or a mix."""
    device = None
    for name, x in args:
        if not is_tensor(x):
            continue
        if not x.is_cuda:
            raise ValueError(f"[{what}] argument {name!r} is a CPU tensor: custom kernels take "
                             "CUDA tensors")
        if device is None:
            device = x.device
        elif x.device != device:
            raise ValueError(f"[{what}] argument {name!r} is on {x.device} but other arguments "
                             f"are on {device}")
    return device

def grid_for(n, block):
    """Blocks for a grid-stride loop over n elements (capped: each thread loops)."""
    return max(1, min(math.ceil(n / block), 65535 * 32))
