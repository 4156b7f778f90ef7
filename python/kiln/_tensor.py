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


def _rebuild_tensor(dtype, shape, data, device, requires_grad):
    """Unpickles a tensor written by Tensor.__reduce_ex__."""
    from kiln import _tensor_bytes

    t = _tensor_bytes.from_bytes(data, dtype, tuple(shape))
    if device != "cpu":
        t = t.to(device)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _reduce_ex(self, protocol):
    # Plain (dtype name, shape, bytes): no storage sharing, so a worker's batch
    # arrives as an independent tensor and the format never runs kiln code on load
    # beyond this rebuild function.
    from kiln import _tensor_bytes

    return (
        _rebuild_tensor,
        (
            _tensor_bytes.dtype_name(self.dtype),
            tuple(self.shape),
            _tensor_bytes.to_bytes(self),
            str(self.device),
            self.requires_grad,
        ),
    )


Tensor.__reduce_ex__ = _reduce_ex
