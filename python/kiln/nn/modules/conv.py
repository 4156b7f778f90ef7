"""Conv1d/2d/3d, ConvTranspose1d/2d/3d: PyTorch's parameters, initialisation, state_dict keys."""

import math

import kiln
from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module
from kiln.nn.parameter import Parameter


def _ntuple(v, n, name, cls):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    if len(v) == 1:
        return v * n
    if len(v) != n or not all(isinstance(e, int) for e in v):
        raise ValueError(f"[{cls}] {name} must be an int or a tuple of {n} ints, got {v}")
    return v


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None,
                 dtype=None):
        super().__init__()
        cls, n = type(self).__name__, self._n
        if groups <= 0:
            raise ValueError(f"[{cls}] groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"[{cls}] in_channels must be divisible by groups, got "
                             f"in_channels={in_channels}, groups={groups}")
        if out_channels % groups != 0:
            raise ValueError(f"[{cls}] out_channels must be divisible by groups, got "
                             f"out_channels={out_channels}, groups={groups}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"[{cls}] padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size", cls)
        self.stride = _ntuple(stride, n, "stride", cls)
        self.dilation = _ntuple(dilation, n, "dilation", cls)
        self.output_padding = _ntuple(output_padding, n, "output_padding", cls)
        self.transposed = self._transposed
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"[{cls}] Invalid padding string '{padding}', should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"[{cls}] padding='same' is not supported for strided "
                                 f"convolutions, got stride={self.stride}")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, n, "padding", cls)
        # F.pad's (left, right) pairs, last dim first, for the non-zero padding modes.
        pads = []
        for d, k, i in zip(self.dilation, self.kernel_size, range(n)):
            if self.padding == "valid":
                lo = hi = 0
            elif self.padding == "same":
                total = d * (k - 1)
                lo, hi = total // 2, total - total // 2
            else:
                lo = hi = self.padding[i]
            pads = [lo, hi] + pads
        self._reversed_padding_repeated_twice = pads
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(kiln.empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(kiln.empty((out_channels,), device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # a=sqrt(5) gives bound 1/sqrt(fan_in) for the weight, the same bound as the bias.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding if isinstance(self.padding, str) else self.padding!r}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, 0, device, dtype)

    def _conv_forward(self, input, weight, bias):
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._n - 1]
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over [N, C_in, L] (or [C_in, L])."""

    _n = 1


class Conv2d(_Conv):
    """2-D convolution over [N, C_in, H, W] (or [C_in, H, W])."""

    _n = 2


class Conv3d(_Conv):
    """3-D convolution over [N, C_in, D, H, W] (or [C_in, D, H, W])."""

    _n = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        cls = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f'[{cls}] Only "zeros" padding mode is supported for {cls}')
        if isinstance(padding, str):
            raise ValueError(f"[{cls}] padding must be an int or a tuple of ints, got '{padding}'")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        cls, n = type(self).__name__, self._n
        output_size = list(output_size)[-n:]
        if len(output_size) != n:
            raise ValueError(f"[{cls}] output_size must have {n} or {n + 2} elements, got "
                             f"{output_size}")
        result = []
        for i in range(n):
            size = input.shape[input.dim() - n + i]
            low = ((size - 1) * self.stride[i] - 2 * self.padding[i]
                   + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            high = low + max(self.stride[i], self.dilation[i]) - 1
            if not low <= output_size[i] <= high:
                raise ValueError(f"[{cls}] requested an output size of {output_size}, but valid "
                                 f"sizes range from {low} to {high} (for an input of "
                                 f"{list(input.shape)[-n:]})")
            result.append(output_size[i] - low)
        return tuple(result)

    def forward(self, input, output_size=None):
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._n - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding,
                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution (the gradient of Conv1d with respect to its input)."""

    _n = 1


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution (the gradient of Conv2d with respect to its input)."""

    _n = 2


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution (the gradient of Conv3d with respect to its input)."""

    _n = 3
