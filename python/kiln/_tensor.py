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


def _deepcopy(self, memo):
    # Like PyTorch: only leaves can be copied; the copy keeps requires_grad and a copy of .grad.
    if id(self) in memo:
        return memo[id(self)]
    if not self.is_leaf:
        raise RuntimeError("[Tensor.__deepcopy__] Only Tensors created explicitly by the user "
                           "(graph leaves) support the deepcopy protocol at the moment")
    result = self.detach().clone()
    if self.requires_grad:
        result.requires_grad_(True)
    if self.grad is not None:
        result.grad = self.grad.detach().clone()
    memo[id(self)] = result
    return result


Tensor.__deepcopy__ = _deepcopy
Tensor.__repr__ = tensor_repr
Tensor.__str__ = tensor_repr
Tensor.__iter__ = _iter
Tensor.__contains__ = _contains
Tensor.__format__ = _format
Tensor.__module__ = "kiln"
