"""kiln.autograd.Function: custom differentiable operations written in Python.

The forward runs under no_grad; its tensor outputs are then wired to a C++
node (_C._record_function) whose backward calls the class's backward. The
engine stays in C++: Python runs only for the custom node itself.
"""

import functools
import traceback
import warnings

from kiln import _C
from kiln.autograd.grad_mode import no_grad


class FunctionCtx:
    """The `ctx` passed to forward/setup_context and backward."""

    def __init__(self):
        self.to_save = ()
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._dirty = ()
        self._non_differentiable = ()
        self._node = None  # set only while backward runs

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _C.Tensor):
                raise TypeError(f"[save_for_backward] save_for_backward can only save tensors, "
                                f"but got {type(t).__name__}")
        self.to_save = tensors

    @property
    def saved_tensors(self):
        if self._node is None:
            return tuple(self.to_save)
        return tuple(self._node._saved_tensors())

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionMeta(type):
    """Gives each Function subclass the name its grad_fn reports."""

    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = name + "Backward"


class Function(metaclass=_FunctionMeta):
    """Base class of custom autograd functions; use `MyFn.apply(*args)`.

    Subclasses define `forward(ctx, *args)` (or `forward(*args)` plus
    `setup_context(ctx, inputs, output)`) and `backward(ctx, *grad_outputs)`,
    both static methods; backward returns one gradient per forward input.
    """

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self).__name__} should not be instantiated. Methods on autograd "
                      "functions are static; call them on the class (MyFunction.apply(...))",
                      DeprecationWarning, stacklevel=2)

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        tensor_inputs = [a for a in args if isinstance(a, _C.Tensor)]
        grad_on = _C.is_grad_enabled()
        ctx.needs_input_grad = tuple(
            grad_on and isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        separate_setup = cls.setup_context is not Function.setup_context
        with no_grad():
            if separate_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not any(ctx.needs_input_grad):
            return output

        is_tuple = isinstance(output, tuple)
        outputs = output if is_tuple else (output,)
        positions = [i for i, o in enumerate(outputs) if isinstance(o, _C.Tensor)]
        tensor_outputs = [outputs[i] for i in positions]
        non_diff = [any(o is t for t in ctx._non_differentiable) for o in tensor_outputs]
        if _C._is_anomaly_enabled():
            ctx._forward_trace = "".join(traceback.format_stack()[:-1])
        # Only what backward's checks need: holding the inputs would keep them alive.
        output_info = (positions, len(outputs))
        input_info = [(tuple(a.shape), a.requires_grad) if isinstance(a, _C.Tensor) else None
                      for a in args]
        backward = functools.partial(_run_backward, cls, ctx, input_info, output_info)
        wired, _ = _C._record_function(cls._backward_name, tensor_inputs, tensor_outputs,
                                       list(ctx.to_save), non_diff, list(ctx._dirty),
                                       ctx.materialize_grads, backward)
        # The node now owns the saved tensors (see _C._FunctionNode).
        ctx.to_save = ()
        result = list(outputs)
        for i, t in zip(positions, wired):
            result[i] = t
        return tuple(result) if is_tuple else result[0]


def _check_grad_shape(cls, index, grad, target):
    """The engine sums a gradient that broadcasts to the input down to its shape;
    anything else is the user's bug, reported with both shapes."""
    shape = tuple(grad.shape)
    ok = len(shape) >= len(target) and all(
        t == s or t == 1 for s, t in zip(shape[len(shape) - len(target):], target))
    if not ok:
        raise RuntimeError(f"[{cls.__name__}.backward] Function {cls._backward_name} returned an "
                           f"invalid gradient at index {index} - got {list(shape)} but expected "
                           f"shape compatible with {list(target)}")


def _run_backward(cls, ctx, args, output_info, node, grads):
    """Called by the C++ node with the gradients of the tensor outputs: runs
    cls.backward (None for non-tensor outputs) and maps its result onto the
    tensor inputs, checking count and shapes."""
    positions, n_outputs = output_info
    all_grads = [None] * n_outputs
    for i, g in zip(positions, grads):
        all_grads[i] = g
    ctx._node = node
    try:
        # `vjp` is PyTorch's other name for backward; a subclass may define either.
        backward = cls.backward if cls.backward is not Function.backward else cls.vjp
        result = backward(ctx, *all_grads)
    except Exception as e:
        if _C._is_anomaly_enabled():
            _report_anomaly(cls, ctx, e)
        raise
    finally:
        ctx._node = None
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) > len(args) and all(r is None for r in result[len(args):]):
        result = result[:len(args)]  # PyTorch tolerates extra trailing Nones
    if len(result) != len(args):
        raise RuntimeError(f"[{cls.__name__}.backward] function {cls._backward_name} returned an "
                           f"incorrect number of gradients (expected {len(args)}, got "
                           f"{len(result)})")
    out = []
    for i, (g, a) in enumerate(zip(result, args)):
        if a is None:
            if g is not None:
                raise RuntimeError(f"[{cls.__name__}.backward] function {cls._backward_name} "
                                   f"returned a gradient different than None at position {i}, "
                                   f"but the corresponding forward input was not a Tensor")
            continue
        if g is not None:
            if not isinstance(g, _C.Tensor):
                raise TypeError(f"[{cls.__name__}.backward] expected a Tensor or None as gradient "
                                f"{i}, got {type(g).__name__}")
            _check_grad_shape(cls, i, g, a[0])
        out.append(g if a[1] else None)
    return out


def _report_anomaly(cls, ctx, error):
    trace = getattr(ctx, "_forward_trace", "")
    warnings.warn(f"Error detected in {cls._backward_name}. Traceback of forward call that caused "
                  f"the error:\n{trace}", RuntimeWarning, stacklevel=2)
    if "Error detected in " in str(error):
        return  # a node inside this backward (checkpoint's recomputation) named itself
    try:
        error.args = (f"[autograd] Error detected in {cls._backward_name}: {error}",) + \
            error.args[1:]
    except (AttributeError, TypeError):
        pass


class _DelayedError(Function):
    """Stands in for the backward of a once_differentiable function when its
    gradients are differentiated again: that raises instead of being silently wrong."""

    @staticmethod
    def forward(ctx, message, anchor, *grads):
        ctx.message = message
        return tuple(g.detach() if g is not None else None for g in grads)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(ctx.message)


def once_differentiable(fn):
    """Decorates a backward that is not itself differentiable: it runs under
    no_grad, and differentiating its result again raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not _C.is_grad_enabled():
            return outputs
        # Saved inputs count too: with create_graph the result depends on them
        # even when the incoming gradients are constants.
        requires_grad = any(isinstance(a, _C.Tensor) and a.requires_grad
                            for a in args + tuple(ctx.saved_tensors))
        if not requires_grad:
            return outputs
        single = not isinstance(outputs, tuple)
        seq = (outputs,) if single else outputs
        message = "trying to differentiate twice a function that was marked with " \
                  "@once_differentiable"
        # The anchor requires grad, so the node is recorded even when the
        # gradients themselves were computed from constants.
        anchor = _C.empty((0,)).requires_grad_(True)
        wrapped = _DelayedError.apply(message, anchor, *[
            g if isinstance(g, _C.Tensor) else None for g in seq])
        if not isinstance(wrapped, tuple):
            wrapped = (wrapped,)
        merged = tuple(w if isinstance(g, _C.Tensor) else g for w, g in zip(wrapped, seq))
        return merged[0] if single else merged

    return wrapper
