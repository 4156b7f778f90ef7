"""CUDA graphs: capture the kernels of a region once, replay them with one launch.

PyTorch's ``torch.cuda`` graph API: :class:`CUDAGraph`, the :class:`graph` context manager,
:func:`graph_pool_handle` and :func:`make_graphed_callables`. What capture takes from kiln's
allocator, random generators and sync points is in Note [CUDA graphs] (cuda/graph.cpp).

A replay runs the captured kernels on the captured memory: feed a graph by copying new data
into the tensors it read at capture (its "static inputs") and read results from the tensors
it wrote (its "static outputs"), which the next replay overwrites.
"""

import gc

import kiln
from kiln import _C
from kiln.cuda.streams import Stream

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
           "make_graphed_callables"]


def _require_cuda(op):
    if not hasattr(_C, "_CUDAGraph"):
        raise RuntimeError(f"[{op}] kiln was built without CUDA: CUDA graphs are unavailable")
    if not kiln.cuda.is_available():
        raise RuntimeError(f"[{op}] CUDA graphs need a CUDA device, and none is available "
                           "(kiln.cuda.is_available() is False)")


def _check_pool(pool, op):
    if pool is None:
        return None
    if (not isinstance(pool, tuple) or len(pool) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pool)):
        raise TypeError(f"[{op}] pool must be None or a pool handle (graph_pool_handle() or "
                        f"another graph's pool()), got {pool!r}")
    return pool


def graph_pool_handle():
    """An id for a memory pool that several graphs' captures can share (pass it as ``pool``)."""
    _require_cuda("cuda.graph_pool_handle")
    return tuple(_C._cuda_graph_pool_handle())


def is_current_stream_capturing():
    """True while the current stream of the current device is being captured."""
    if not hasattr(_C, "_cuda_is_current_stream_capturing") or not kiln.cuda.is_available():
        return False
    return _C._cuda_is_current_stream_capturing()


class CUDAGraph:
    """A CUDA graph: ``capture_begin()`` ... ``capture_end()`` records the kernels kiln launches
    on the current (non-default) stream, ``replay()`` runs them again.

    Prefer the :class:`graph` context manager, which picks a side stream for the capture.
    """

    def __init__(self, keep_graph=False):
        _require_cuda("cuda.CUDAGraph")
        self._graph = _C._CUDAGraph()
        # keep_graph (PyTorch's flag to keep the un-instantiated graph) is implied by debug mode.
        self._keep_graph = bool(keep_graph)
        if self._keep_graph:
            self._graph.enable_debug_mode()

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Starts capturing the current stream.

        Args:
            pool: share the memory pool of another graph (``other.pool()``) or of a
                :func:`graph_pool_handle`; None gives the graph a pool of its own.
            capture_error_mode (str): "global", "thread_local" or "relaxed", the
                ``cudaStreamCaptureMode``: which threads may not make calls that are unsafe
                during a capture.
        """
        pool = _check_pool(pool, "CUDAGraph.capture_begin")
        if not isinstance(capture_error_mode, str):
            raise TypeError("[CUDAGraph.capture_begin] capture_error_mode must be a str, got "
                            f"{type(capture_error_mode).__name__}")
        self._graph.capture_begin(pool, capture_error_mode)

    def capture_end(self):
        """Ends the capture and instantiates the graph."""
        self._graph.capture_end()

    def replay(self):
        """Runs the captured work on the current stream."""
        self._graph.replay()

    def reset(self):
        """Drops the captured graph and its hold on the memory pool."""
        self._graph.reset()

    def pool(self):
        """The id of the graph's memory pool, to share it with another capture."""
        return tuple(self._graph.pool())

    def register_generator_state(self, generator):
        """Lets random ops in the capture draw from ``generator`` (a CUDA kiln.Generator); the
        device's default generator is always registered."""
        self._graph.register_generator_state(generator)

    def enable_debug_mode(self):
        """Keeps the captured graph so :meth:`debug_dump` can write it."""
        self._graph.enable_debug_mode()

    def debug_dump(self, debug_path):
        """Writes the graph as Graphviz DOT to ``debug_path`` (needs :meth:`enable_debug_mode`
        before the capture)."""
        self._graph.debug_dump(str(debug_path))


class graph:
    """Context manager capturing its body into ``cuda_graph``.

    Args:
        cuda_graph (CUDAGraph): the graph to capture into.
        pool: a pool to share (see :meth:`CUDAGraph.capture_begin`).
        stream (kiln.cuda.Stream): the capture stream; by default one side stream shared by
            every capture of this process.
        capture_error_mode (str): see :meth:`CUDAGraph.capture_begin`.

    On entry the device is synchronized and the cache emptied, so the capture starts from
    settled memory; the body runs with the capture stream current.
    """

    default_capture_stream = None

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError("[cuda.graph] cuda_graph must be a kiln.cuda.CUDAGraph, got "
                            f"{type(cuda_graph).__name__}")
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = Stream()
            stream = graph.default_capture_stream
        self.cuda_graph = cuda_graph
        self.pool = _check_pool(pool, "cuda.graph")
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._prev_stream = None

    def __enter__(self):
        kiln.cuda.synchronize()
        gc.collect()
        kiln.cuda.empty_cache()
        self._prev_stream = kiln.cuda.current_stream(self.capture_stream.device_index)
        kiln.cuda.set_stream(self.capture_stream)
        try:
            self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            kiln.cuda.set_stream(self._prev_stream)
            raise
        return self.cuda_graph

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            self.cuda_graph.capture_end()
        finally:
            kiln.cuda.set_stream(self._prev_stream)
        return False


# --- make_graphed_callables ------------------------------------------------------------------

def _flatten(value, op):
    """(flat tensors, structure) of a tensor or nested tuples/lists of tensors."""
    if isinstance(value, _C.Tensor):
        return [value], None
    if isinstance(value, (tuple, list)):
        flat, parts = [], []
        for v in value:
            f, s = _flatten(v, op)
            flat.extend(f)
            parts.append((len(f), s))
        return flat, (type(value), parts)
    raise TypeError(f"[{op}] callables must return tensors or (nested) tuples/lists of "
                    f"tensors, got {type(value).__name__}")


def _unflatten(flat, structure):
    if structure is None:
        return flat[0]
    kind, parts = structure
    out, i = [], 0
    for n, s in parts:
        out.append(_unflatten(flat[i:i + n], s))
        i += n
    return kind(out)


def _check_callables(callables, sample_args):
    op = "cuda.make_graphed_callables"
    if len(callables) != len(sample_args):
        raise ValueError(f"[{op}] got {len(callables)} callables but {len(sample_args)} "
                         "sample_args")
    for c, args in zip(callables, sample_args):
        if not callable(c):
            raise TypeError(f"[{op}] expected callables, got {type(c).__name__}")
        if not isinstance(args, (tuple, list)) or not all(isinstance(a, _C.Tensor) for a in args):
            raise TypeError(f"[{op}] sample_args for each callable must be a tuple of tensors")
        for a in args:
            if not a.is_cuda:
                raise ValueError(f"[{op}] sample_args must be CUDA tensors, got one on {a.device}")
        if isinstance(c, kiln.nn.Module):
            if c._forward_pre_hooks or c._forward_hooks:
                raise RuntimeError(f"[{op}] modules must not have forward hooks registered when "
                                   "they are graphed (the graph would skip them)")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError(f"[{op}] module buffers must not require grad")


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False,
                           pool=None):
    """Graphed versions of callables (functions or ``nn.Module``\\ s): their forward and their
    backward are each captured as a CUDA graph and replayed from an autograd Function, so they
    can be used inside an eager training loop.

    Args:
        callables: a callable or a tuple of callables, captured in order (their backward graphs
            in reverse order); with several, call them in that order, as the capture did.
        sample_args: a tuple of tensors per callable (a tuple of such tuples for a tuple of
            callables), with the shapes, dtypes and requires_grad of every later call.
        num_warmup_iters (int): eager iterations on a side stream before the capture.
        allow_unused_input (bool): allow inputs that do not affect the outputs (their gradient
            is None).
        pool: the memory pool the graphs share (a new one by default).

    A graphed module replays its graphs while its ``training`` flag is what it was at capture,
    and runs its eager forward otherwise. Outputs are the graph's static tensors: the next
    call overwrites them.
    """
    op = "cuda.make_graphed_callables"
    _require_cuda(op)
    if kiln.is_autocast_enabled("cuda") and kiln.is_autocast_cache_enabled():
        # Cast weights cached during the capture would be freed after it, under the graph.
        raise RuntimeError(f"[{op}] does not support the autocast cache: use "
                           "autocast(cache_enabled=False)")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    _check_callables(callables, sample_args)
    sample_args = tuple(tuple(a) for a in sample_args)
    params = tuple(tuple(c.parameters()) if isinstance(c, kiln.nn.Module) else ()
                   for c in callables)
    surfaces = tuple(a + p for a, p in zip(sample_args, params))
    mempool = graph_pool_handle() if pool is None else _check_pool(pool, op)

    def grads_of(outputs, surface, grad_outputs):
        outs = tuple(o for o in outputs if o.requires_grad)
        ins = tuple(i for i in surface if i.requires_grad)
        if not outs or not ins:
            return ()
        return kiln.autograd.grad(outs, ins, grad_outputs=grad_outputs, allow_unused=allow_unused_input)

    # Warm-up on a side stream: lazy initialisation (cuBLAS, cuDNN plans, device tables) must
    # not happen inside a capture.
    kiln.cuda.synchronize()
    with kiln.cuda.stream(Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs, _ = _flatten(func(*args), op)
                grads_of(outputs, surface,
                         tuple(kiln.empty_like(o) for o in outputs if o.requires_grad))
            del outputs
    kiln.cuda.synchronize()

    fwd_graphs = [CUDAGraph() for _ in callables]
    bwd_graphs = [CUDAGraph() for _ in callables]
    static_outputs, structures = [], []
    for func, args, fwd in zip(callables, sample_args, fwd_graphs):
        with graph(fwd, pool=mempool):
            out = func(*args)
        flat, structure = _flatten(out, op)
        static_outputs.append(tuple(flat))
        structures.append(structure)

    static_grad_outputs, static_grad_inputs = [None] * len(callables), [None] * len(callables)
    for i in reversed(range(len(callables))):
        outputs, surface = static_outputs[i], surfaces[i]
        grad_outs = tuple(kiln.empty_like(o) if o.requires_grad else None for o in outputs)
        with graph(bwd_graphs[i], pool=mempool):
            grads = grads_of(outputs, surface, tuple(g for g in grad_outs if g is not None))
        it = iter(grads or [None] * sum(s.requires_grad for s in surface))
        static_grad_inputs[i] = tuple(next(it) if s.requires_grad else None for s in surface)
        static_grad_outputs[i] = grad_outs

    graphed = []
    for i, func in enumerate(callables):
        fn = _graphed_autograd_function(fwd_graphs[i], bwd_graphs[i], len(sample_args[i]),
                                        sample_args[i], static_outputs[i],
                                        static_grad_outputs[i], static_grad_inputs[i])
        structure, module_params = structures[i], params[i]

        def run(*user_args, _fn=fn, _structure=structure, _params=module_params):
            return _unflatten(_fn.apply(*(tuple(user_args) + _params)), _structure)

        if isinstance(func, kiln.nn.Module):
            training, eager_forward = func.training, func.forward

            def forward(*user_args, _func=func, _training=training, _run=run,
                        _eager=eager_forward):
                if _func.training == _training:
                    return _run(*user_args)
                return _eager(*user_args)

            func.forward = forward
            graphed.append(func)
        else:
            graphed.append(run)
    return graphed[0] if just_one else tuple(graphed)


def _graphed_autograd_function(fwd_graph, bwd_graph, num_args, static_args, static_outputs,
                               static_grad_outputs, static_grad_inputs):
    class Graphed(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, given in zip(static_args, inputs[:num_args]):
                if static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            for static, given in zip(static_grad_outputs, grads):
                if static is None:
                    continue
                if given is None:
                    static.zero_()
                elif static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_inputs)

    return Graphed
