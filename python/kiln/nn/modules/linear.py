"""Identity, Linear and Bilinear layers."""

import math

from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module, _register_empty_parameter


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _register_empty_parameter(self, "weight", (out_features, in_features), True, device, dtype)
        _register_empty_parameter(self, "bias", (out_features,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        # kaiming_uniform_ with a=sqrt(5) makes the bound 1/sqrt(fan_in), like the bias's.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """y_k = x1^T A_k x2 + b_k, A of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _register_empty_parameter(self, "weight", (out_features, in1_features, in2_features), True,
                                  device, dtype)
        _register_empty_parameter(self, "bias", (out_features,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(Linear):
    """Linear whose in_features comes from the first input's last dimension. Until then the
    weight is an empty (out_features, 0) placeholder; the first forward replaces it with a real
    parameter, initialises it and turns the module into a plain Linear (as PyTorch does), so
    build optimizers after a first (dry) run."""

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        _register_empty_parameter(self, "weight", (out_features, 0), True, device, dtype)
        _register_empty_parameter(self, "bias", (out_features,), bias, device, dtype)

    def has_uninitialized_params(self):
        return self.in_features == 0

    def reset_parameters(self):
        if not self.has_uninitialized_params():
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        if input.dim() == 0:
            raise RuntimeError("[LazyLinear] cannot infer in_features from a 0-d input")
        self._materialize(input.shape[-1])

    def _materialize(self, in_features):
        self.in_features = in_features
        old = self.weight
        _register_empty_parameter(self, "weight", (self.out_features, in_features), True,
                                  old.device, old.dtype)
        self.reset_parameters()
        self.__class__ = Linear

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # A checkpoint's weight fixes in_features before the copy (its shape is checked there).
        weight = state_dict.get(prefix + "weight")
        if self.has_uninitialized_params() and weight is not None and weight.dim() == 2:
            self._materialize(weight.shape[1])
        # Not super(): the module may have just become a plain Linear.
        Linear._load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                     missing_keys, unexpected_keys, error_msgs)

    def forward(self, input):
        self.initialize_parameters(input)
        return F.linear(input, self.weight, self.bias)


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a Linear under the class name PyTorch prints and saves."""
