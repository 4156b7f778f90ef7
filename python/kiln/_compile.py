"""kiln.compile: PyTorch's torch.compile entry point, so scripts with a compile switch run.

kiln has no graph compiler: its per-op dispatch is C++ already, and the fused kernels
(attention, norms, cross entropy, optimizers) are what a compiler would generate. compile
therefore returns the callable itself (PyTorch's own behaviour with disable=True), after
checking the arguments PyTorch checks.
"""

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    if mode is not None and options is not None:
        raise RuntimeError("[compile] Either mode or options can be specified, but both can't "
                           "be specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"[compile] Unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(m for m in _MODES if m)}")
    if model is None:  # used as @kiln.compile(...)
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                  mode=mode, options=options, disable=disable)
    if not callable(model):
        raise RuntimeError(f"[compile] expected a callable (a Module or a function), got "
                           f"{type(model).__name__}")
    return model
