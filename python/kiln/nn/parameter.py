"""kiln.nn.Parameter: a Tensor that a Module registers as one of its parameters; Buffer, the
marker that makes an assigned tensor a buffer; and the uninitialized placeholders that lazy
modules (kiln.nn.modules.lazy) materialize on their first call."""

from kiln._C import Tensor
from kiln._C import empty as _empty
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


class _BufferMeta(type):
    # Buffer(t) returns t itself, marked, as in PyTorch: isinstance looks at the mark.
    def __instancecheck__(cls, instance):
        return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """Buffer(data, persistent=True): a tensor that, assigned to a Module attribute, is
    registered as a buffer (persistent=False keeps it out of state_dict)."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


class _Uninitialized:
    """Shared behaviour of the placeholders: no shape until materialize(shape) gives them
    storage, after which they become cls_to_become."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Gives the placeholder uninitialized storage of `shape` (on its device and dtype
        unless given) and turns it into cls_to_become."""
        device = self.data.device if device is None else device
        dtype = self.data.dtype if dtype is None else dtype
        self.data = _empty(tuple(shape), device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(f"[{type(self).__name__}] Can't access the shape of an uninitialized "
                           f"parameter or buffer. This error usually happens in `load_state_dict` "
                           f"when trying to load an uninitialized parameter into an initialized "
                           f"one. Call `forward` to initialize the parameters before accessing "
                           f"their attributes.")

    def size(self, dim=None):
        return self.shape

    def numel(self):
        return self.shape

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad, self.data.device, self.data.dtype))


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter without a shape yet: lazy modules materialize it from their first input."""

    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        Parameter.__init__(self, _empty(0, device=device, dtype=dtype), requires_grad)


class _MaterializedBuffer(Tensor):
    """What an UninitializedBuffer becomes (a Python object cannot turn into the C++ Tensor
    type itself); lazy modules re-register a plain tensor on the same storage."""


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer without a shape yet: lazy modules materialize it from their first input."""

    cls_to_become = _MaterializedBuffer

    def __init__(self, requires_grad=False, device=None, dtype=None):
        Tensor.__init__(self, _empty(0, device=device, dtype=dtype))
        if requires_grad:
            self.requires_grad_(True)
