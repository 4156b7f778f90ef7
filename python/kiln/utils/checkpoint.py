"""Activation checkpointing: run a block without keeping its activations and
recompute them during backward, trading compute for memory.

Both use_reentrant modes are built on one autograd.Function: its forward runs
the block under no_grad, its backward re-runs it with grad enabled (with the
RNG state of the forward, so dropout draws the same mask) and backpropagates
through the recomputed graph. use_reentrant=False additionally gives the node
a dummy input that requires grad, so the output is differentiable even when
only the block's parameters require grad.
"""

import warnings

import kiln
from kiln import _C
from kiln.autograd.function import Function
from kiln.autograd.grad_mode import enable_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


def _get_rng_state(devices):
    """The generator states a forward may draw from: CPU and each CUDA device used."""
    return kiln.get_rng_state(), {d: kiln.cuda.get_rng_state(d) for d in devices}


def _set_rng_state(state):
    cpu, cuda = state
    kiln.set_rng_state(cpu)
    for d, s in cuda.items():
        kiln.cuda.set_rng_state(s, d)


def _cuda_devices(args):
    return sorted({a.device.index or 0 for a in args
                   if isinstance(a, _C.Tensor) and a.device.type == "cuda"})


def _use_reentrant_default(use_reentrant, fn_name):
    if use_reentrant is None:
        warnings.warn(
            f"kiln.utils.checkpoint: the use_reentrant parameter should be passed explicitly "
            f"to {fn_name}. use_reentrant=False is recommended; pass use_reentrant=True to keep "
            f"the current default behavior. The two variants differ in which inputs may be "
            f"non-differentiable; see the docs.", stacklevel=3)
        return True
    return use_reentrant


class _CheckpointFunction(Function):

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, *args):
        ctx.run_function = run_function
        ctx.kwargs = kwargs
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.devices = _cuda_devices(args)
            ctx.fwd_rng_state = _get_rng_state(ctx.devices)
        # Tensors go through save_for_backward (version-checked); the rest stays on ctx.
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        ctx.inputs = [None if isinstance(a, _C.Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_indices])
        return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            # A leaf copy of each input collects the gradient of the recomputed block.
            inputs[i] = t.detach().requires_grad_(t.requires_grad)
        if ctx.preserve_rng_state:
            current = _get_rng_state(ctx.devices)
            _set_rng_state(ctx.fwd_rng_state)
        try:
            with enable_grad():
                outputs = ctx.run_function(*inputs, **ctx.kwargs)
        finally:
            if ctx.preserve_rng_state:
                _set_rng_state(current)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
                 if isinstance(o, _C.Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("[checkpoint] none of the outputs of the checkpointed function "
                               "requires grad, so there is nothing to backpropagate")
        kiln.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = tuple(t.grad if isinstance(t, _C.Tensor) else None for t in inputs)
        return (None, None, None) + grads


class _NonReentrantCheckpoint(_CheckpointFunction):

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, dummy, *args):
        return _CheckpointFunction.forward(ctx, run_function, preserve_rng_state, kwargs, *args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = _CheckpointFunction.backward(ctx, *grad_outputs)
        return grads[:3] + (None,) + grads[3:]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), storing only its inputs; the intermediate
    activations are recomputed when backward reaches this block.

    Gradients of tensors the block uses but does not take as arguments (its
    parameters) are accumulated into their .grad during that recomputation, so
    checkpointed blocks support backward(), not autograd.grad() with respect to
    their parameters.
    """
    if context_fn is not None:
        raise NotImplementedError("[checkpoint] context_fn is not supported by kiln")
    use_reentrant = _use_reentrant_default(use_reentrant, "checkpoint")
    if use_reentrant:
        if kwargs:
            raise ValueError("[checkpoint] Unexpected keyword arguments: " + ",".join(kwargs))
        if _C.is_grad_enabled() and not any(
                isinstance(a, _C.Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=2)
        return _CheckpointFunction.apply(function, preserve_rng_state, {}, *args)
    dummy = _C.empty((0,)).requires_grad_(True)
    return _NonReentrantCheckpoint.apply(function, preserve_rng_state, kwargs, dummy, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs a sequence of modules/functions split into `segments` checkpointed
    chunks; the last chunk runs normally (its activations are needed first)."""
    use_reentrant = _use_reentrant_default(use_reentrant, "checkpoint_sequential")
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("[checkpoint_sequential] Unexpected keyword arguments: "
                         + ",".join(kwargs))
    if isinstance(functions, kiln.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if segments < 1 or segments > len(functions):
        raise ValueError(f"[checkpoint_sequential] segments must be between 1 and the number of "
                         f"functions ({len(functions)}), got {segments}")

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
