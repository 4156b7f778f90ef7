"""Integer ops composed from kiln's elementwise kernels: gcd, lcm and the bit shifts.

PyTorch defines them for integer dtypes only (bool too for the shifts' promotion,
but not floats); the results follow its type promotion and its conventions at
the edges: gcd(0, 0) = 0, lcm(0, x) = 0, and a shift by a negative amount or by
at least the bit width gives 0 (or -1 for a negative value shifted right).
"""

from kiln import _C
from kiln._C import Tensor
from kiln.functional import broadcast_tensors

__all__ = ["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift"]

_BITS = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64}


def _integer_operands(op, input, other):
    if not isinstance(input, Tensor):
        raise TypeError(f"[{op}] argument 'input' must be Tensor, not {type(input).__name__}")
    other = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    dtype = _C.result_type(input, other)
    name = str(dtype).split(".")[-1]
    if name not in _BITS:
        raise NotImplementedError(f"[{op}] not implemented for '{name}': expected integer "
                                  "tensors")
    a, b = broadcast_tensors(input.to(dtype), other.to(dtype))
    return a, b, _BITS[name]


def gcd(input, other):
    """The greatest common divisor, elementwise (Euclid's algorithm, vectorized)."""
    a, b, _ = _integer_operands("gcd", input, other)
    a, b = a.abs(), b.abs()
    # Each pass replaces (a, b) by (b, a mod b) where b != 0; at most ~1.44 log2(max) passes.
    while bool((b != 0).any()):
        nonzero = b != 0
        safe_b = _C.where(nonzero, b, _C.ones_like(b))
        a, b = _C.where(nonzero, b, a), _C.where(nonzero, a % safe_b, b)
    return a


def lcm(input, other):
    """The least common multiple, elementwise; 0 when either operand is 0."""
    a, b, _ = _integer_operands("lcm", input, other)
    g = gcd(a, b)
    safe_g = _C.where(g == 0, _C.ones_like(g), g)
    return (a // safe_g * b).abs()


def _pow2(shift, dtype):
    # 2**shift computed in int64 and wrapped to the dtype (1 << 7 is -128 in int8).
    return _C.pow(_C.full_like(shift, 2, dtype=_C.int64), shift.to(_C.int64)).to(dtype)


def bitwise_left_shift(input, other):
    """input << other; a shift outside [0, bits) gives 0, as PyTorch."""
    a, b, bits = _integer_operands("bitwise_left_shift", input, other)
    valid = (b >= 0) & (b < bits)
    shift = _C.where(valid, b, _C.zeros_like(b))
    return _C.where(valid, a * _pow2(shift, a.dtype), _C.zeros_like(a))


def bitwise_right_shift(input, other):
    """input >> other (arithmetic for signed types: floor division by 2**other); a shift
    outside [0, bits) gives 0 for non-negative values and -1 for negative ones."""
    a, b, bits = _integer_operands("bitwise_right_shift", input, other)
    # For signed types 2**(bits - 1) does not fit; shifting by it saturates like beyond it.
    limit = bits if a.dtype == _C.uint8 else bits - 1
    valid = (b >= 0) & (b < limit)
    shift = _C.where(valid, b, _C.zeros_like(b))
    shifted = _C.floor_divide(a, _pow2(shift, _C.int64)).to(a.dtype)
    saturated = _C.where(a < 0, _C.full_like(a, -1), _C.zeros_like(a))
    return _C.where(valid, shifted, saturated)


def install():
    for name in __all__:
        setattr(Tensor, name, globals()[name])
    Tensor.__lshift__ = bitwise_left_shift
    Tensor.__rshift__ = bitwise_right_shift
    Tensor.__rlshift__ = lambda self, other: bitwise_left_shift(
        _C.tensor(other, dtype=self.dtype, device=self.device), self)
    Tensor.__rrshift__ = lambda self, other: bitwise_right_shift(
        _C.tensor(other, dtype=self.dtype, device=self.device), self)
