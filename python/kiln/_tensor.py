"""Tensor methods written in Python: only ones off the per-op hot path."""

from kiln._C import Tensor
from kiln._tensor_str import tensor_repr


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter([self[i] for i in range(self.shape[0])])


def _contains(self, element):
    return bool((self == element).any())


def _format(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec)


Tensor.__repr__ = tensor_repr
Tensor.__str__ = tensor_repr
Tensor.__iter__ = _iter
Tensor.__contains__ = _contains
Tensor.__format__ = _format
Tensor.__module__ = "kiln"
