"""kiln.nn.Parameter: a Tensor that a Module registers as one of its parameters."""

from kiln._C import Tensor
from kiln._tensor_str import tensor_repr


class Parameter(Tensor):
    """A leaf tensor that aliases `data`'s storage (detached from its graph).

    The C++ side hands back the same Python object for the same TensorImpl, so
    a Parameter stays a Parameter through `p.grad` accumulation, in-place ops
    and `p.data = ...` swaps (which is how Module.to keeps parameter identity).
    """

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + tensor_repr(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            result.grad = self.grad.detach().clone()
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (Parameter, (self.detach(), self.requires_grad))

    __str__ = __repr__
