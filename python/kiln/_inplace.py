"""In-place variants PyTorch offers that kiln builds from their out-of-place ops.

Three tables, no op written out by hand:

- ``_TOP_LEVEL``: ``kiln.sin_(x)`` and friends, which PyTorch also has at the top
  level; each calls the Tensor method, so it is the same op with the same checks.
- ``_ASSIGNED``: in-place forms of out-of-place ops (``cumsum_``, ``renorm_``,
  ``gcd_``, ...). They go through ``_C._assign_inplace`` (python/bind_inplace.cpp),
  the C++ in-place protocol: one version bump, PyTorch's leaf error, and under
  autograd the op runs on a clone and self takes over its history.
- ``_VIEWS``: in-place views (``t_``, ``transpose_``, ...), which change only
  self's sizes and strides (Note [In-place views] in python/bind_inplace.cpp).
"""

from kiln import _C
from kiln._C import Tensor

# Tensor in-place methods PyTorch also exposes as torch.<name>(input, ...).
_TOP_LEVEL = (
    "abs_", "acos_", "acosh_", "addmv_", "asin_", "asinh_", "atan_", "atanh_", "ceil_",
    "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_",
    "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "i0_",
    "index_put_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_",
    "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_",
    "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
    "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "gcd_", "lcm_",
    "as_strided_", "resize_as_", "conj_physical_",
)

# Out-of-place Tensor method -> its in-place form, written through _C._assign_inplace.
_ASSIGNED = (
    "cumsum", "cumprod", "nan_to_num", "renorm", "gcd", "lcm", "igamma", "igammac",
    "mvlgamma", "bitwise_left_shift", "bitwise_right_shift",
)

# View methods whose in-place form re-shapes self (Note [In-place views]).
_VIEWS = {"t": "t_", "transpose": "transpose_", "swapaxes": "swapaxes_",
          "swapdims": "swapdims_", "squeeze": "squeeze_", "unsqueeze": "unsqueeze_",
          "as_strided": "as_strided_"}


def _assigned(name):
    inplace = name + "_"

    def method(self, *args, **kwargs):
        # Tensor operands are passed along so autograd sees them as inputs of the op.
        others = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        return _C._assign_inplace(self, others, inplace,
                                  lambda s: getattr(Tensor, name)(s, *args, **kwargs))

    method.__name__ = inplace
    method.__doc__ = f"In-place version of :meth:`Tensor.{name}`."
    return method


def _view(name, inplace):
    def method(self, *args, **kwargs):
        return _C._set_view_metadata(self, getattr(Tensor, name)(self, *args, **kwargs), inplace)

    method.__name__ = inplace
    method.__doc__ = f"In-place version of :meth:`Tensor.{name}`: changes self's shape."
    return method


def _top_level(name):
    def function(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError(f"[{name}] argument 'input' must be Tensor, not "
                            f"{type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = name
    function.__doc__ = f"``kiln.{name}(input, ...)`` is ``input.{name}(...)``."
    return function


def fill(input, value):
    """A new tensor shaped like input, filled with value (torch.fill)."""
    return input.clone().fill_(value)


def install():
    """Adds the in-place methods to Tensor; returns the top-level functions for kiln."""
    for name in _ASSIGNED:
        setattr(Tensor, name + "_", _assigned(name))
    for name, inplace in _VIEWS.items():
        setattr(Tensor, inplace, _view(name, inplace))
    functions = {name: _top_level(name) for name in _TOP_LEVEL}
    functions["fill"] = fill
    return functions
