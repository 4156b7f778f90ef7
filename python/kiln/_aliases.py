"""PyTorch's alternative spellings of ops kiln has (NumPy-style names mostly).

An alias is the very same function object as its target, so errors, autograd
and the NumPy keyword spellings are the target's.
"""

from kiln._C import Tensor

# alias -> target, for both Tensor methods and top-level functions where the target exists.
ALIASES = {
    "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh",
    "arctan": "atan", "arctanh": "atanh", "arctan2": "atan2",
    "arccos_": "acos_", "arccosh_": "acosh_", "arcsin_": "asin_", "arcsinh_": "asinh_",
    "arctan_": "atan_", "arctanh_": "atanh_", "arctan2_": "atan2_",
    "absolute_": "abs_", "divide_": "div_", "multiply_": "mul_", "subtract_": "sub_",
    "greater_": "gt_", "greater_equal_": "ge_", "less_": "lt_", "less_equal_": "le_",
    "not_equal_": "ne_", "negative_": "neg_",
}


def _true_divide_(self, other):
    """In-place true division: div_ without a rounding mode."""
    return self.div_(other)


def install(namespace):
    """Binds the aliases on Tensor and, where the target is top-level, in namespace."""
    for alias, target in ALIASES.items():
        if not hasattr(Tensor, alias) and hasattr(Tensor, target):
            setattr(Tensor, alias, getattr(Tensor, target))
        if alias not in namespace and target in namespace:
            namespace[alias] = namespace[target]
    if not hasattr(Tensor, "true_divide_"):
        Tensor.true_divide_ = _true_divide_
