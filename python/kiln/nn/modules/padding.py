"""Padding modules: constant, zero, reflection, replication and circular."""

from kiln.nn import functional as F
from kiln.nn.modules.module import Module


class _PadNd(Module):
    _n = 1
    _mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = (padding,) * (2 * self._n) if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != 2 * self._n:
            raise ValueError(f"[{type(self).__name__}] padding must be an int or a tuple of "
                             f"{2 * self._n} ints, got {padding}")
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        if self._mode == "constant":
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


class ConstantPad1d(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    _n = 2

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad1d(_PadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad2d(_PadNd):
    _n = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_PadNd):
    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    _n = 2
    _mode = "reflect"


class ReplicationPad1d(_PadNd):
    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    _n = 2
    _mode = "replicate"


class CircularPad1d(_PadNd):
    _mode = "circular"


class CircularPad2d(_PadNd):
    _n = 2
    _mode = "circular"


class ConstantPad3d(_PadNd):
    _n = 3

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad3d(_PadNd):
    _n = 3

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad3d(_PadNd):
    _n = 3
    _mode = "reflect"


class ReplicationPad3d(_PadNd):
    _n = 3
    _mode = "replicate"


class CircularPad3d(_PadNd):
    _n = 3
    _mode = "circular"
