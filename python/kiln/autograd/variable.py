"""kiln.autograd.Variable: PyTorch's legacy name for Tensor, kept for the one thing code still
reaches through it, the engine's end-of-backward callbacks
(Variable._execution_engine.queue_callback)."""

from kiln import _C


class _ImperativeEngine:
    """The backward engine as PyTorch exposes it on Variable._execution_engine."""

    @staticmethod
    def queue_callback(callback):
        """Runs `callback()` after the running backward pass has run every node, before
        backward() returns; raises RuntimeError outside a backward pass."""
        _C._queue_callback(callback)


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    """isinstance(t, Variable) holds for every Tensor; Variable(t) is t.detach() with the
    given requires_grad."""

    _execution_engine = _ImperativeEngine()

    def __new__(cls, data, requires_grad=False):
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"[Variable] data must be a Tensor, got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)
