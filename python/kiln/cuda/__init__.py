"""kiln.cuda: devices, streams, events and the caching allocator's statistics.

Nothing here talks to the driver at import time; functions that need a GPU
raise a RuntimeError naming the problem when there is none.
"""

import contextlib

from kiln import _C, _legacy_types
from kiln.cuda.memory import (  # noqa: F401
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_peak_memory_stats,
)
from kiln.cuda.streams import Event, Stream  # noqa: F401
from kiln.cuda._utils import _device_index, _runtime
from kiln.cuda import amp  # noqa: F401  (torch.cuda.amp spelling)
from kiln.cuda import nvtx  # noqa: F401
from kiln.cuda import nccl  # noqa: F401
from kiln.cuda._arch import get_arch_list, get_gencode_flags  # noqa: F401
# CUDA graphs and custom kernels load on first use (Note [Lazy submodules] in kiln/__init__.py):
# their modules, hashlib and the kernel-source generators cost `import kiln` ~35 ms.
_LAZY_NAMES = {
    "CUDAGraph": "kiln.cuda.graphs",
    "graph": "kiln.cuda.graphs",
    "graph_pool_handle": "kiln.cuda.graphs",
    "is_current_stream_capturing": "kiln.cuda.graphs",
    "make_graphed_callables": "kiln.cuda.graphs",
    "CompileException": "kiln.cuda._raw_kernel",
    "RawKernel": "kiln.cuda._raw_kernel",
    "RawModule": "kiln.cuda._raw_kernel",
    "ElementwiseKernel": "kiln.cuda._elementwise_kernel",
    "ReductionKernel": "kiln.cuda._reduction_kernel",
}
from kiln.cuda.random import (  # noqa: F401
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

OutOfMemoryError = _C.OutOfMemoryError

globals().update(_legacy_types.CUDA)  # kiln.cuda.FloatTensor, ... (Note [Legacy tensor types])


def is_available():
    """True when a GPU is visible and kiln's CUDA kernels are built in."""
    return _C._cuda_is_available()


def is_built():
    return _C._cuda_is_built()


def device_count():
    return _C._cuda_device_count()


def current_device():
    return _runtime("_cuda_current_device")()


def set_device(device):
    index = _device_index(device, optional=True)
    if index >= 0:
        _runtime("_cuda_set_device")(index)


class device:
    """Context manager that makes `device` current for its body (None: no change)."""

    def __init__(self, device):
        self.idx = _device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """device(tensor.device) for a CUDA tensor; no change for a CPU tensor."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else None)


def get_device_properties(device=None):
    return _runtime("_cuda_get_device_properties")(_device_index(device))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation=True):
    """Whether the current device runs bfloat16 natively (compute capability 8.0+).

    kiln's CUDA kernels are built for sm_90 only, so there is no emulated path;
    without a GPU the answer is False.
    """
    return is_available() and get_device_capability()[0] >= 8


def synchronize(device=None):
    """Waits for all work on `device` (default: the current device) to finish.

    Raises IndexError for an out-of-range index a kernel on the device found since the last
    synchronization (kiln checks indices on the GPU without waiting for it).
    """
    _runtime("_cuda_synchronize")(_device_index(device))


# Without the CUDA runtime in the build nothing can synchronize, but the mode is still kept.
_sync_debug_mode = 0
_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """Makes calls that make the host wait for the GPU warn or raise.

    Args:
        debug_mode (str or int): "default" or 0 lets them pass, "warn" or 1 warns
            (UserWarning), "error" or 2 raises RuntimeError "called a synchronizing CUDA
            operation".

    Flagged: copies to the host (``.item()``, ``.tolist()``, ``.cpu()``, printing, and ops
    whose result size is read from the GPU, like ``nonzero``), copies between GPUs,
    ``Stream.synchronize()``, and copies from pageable host memory over 16 MiB. As in
    PyTorch, ``kiln.cuda.synchronize()`` and ``Event.synchronize()`` are not. Index bounds
    checks on the GPU never synchronize: a bad index raises IndexError at the next
    synchronization instead. While a CUDA graph captures, every one of these (and
    ``kiln.cuda.synchronize()``) raises RuntimeError whatever the mode.
    """
    global _sync_debug_mode
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(
                "[cuda.set_sync_debug_mode] invalid value of debug_mode, expected one of "
                f"`default`, `warn`, `error`, got {debug_mode!r}")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise RuntimeError(
            "[cuda.set_sync_debug_mode] invalid argument to set_sync_debug_mode: expected a str "
            f"or an int, got {type(debug_mode).__name__}")
    elif not 0 <= debug_mode <= 2:
        raise RuntimeError(
            "[cuda.set_sync_debug_mode] invalid value of debug_mode, expected one of 0,1,2, "
            f"got {debug_mode}")
    if hasattr(_C, "_cuda_set_sync_debug_mode"):
        _C._cuda_set_sync_debug_mode(debug_mode)
    _sync_debug_mode = debug_mode


def get_sync_debug_mode():
    """The current sync debug mode as an int: 0 (default), 1 (warn) or 2 (error)."""
    if hasattr(_C, "_cuda_get_sync_debug_mode"):
        return _C._cuda_get_sync_debug_mode()
    return _sync_debug_mode


def current_stream(device=None):
    index = _device_index(device)
    return Stream._from_handle(_runtime("_cuda_current_stream")(index), index)


def default_stream(device=None):
    return Stream._from_handle(0, _device_index(device))


def set_stream(stream):
    if stream is not None:
        _runtime("_cuda_set_stream")(stream.device_index, stream.cuda_stream)


@contextlib.contextmanager
def stream(stream):
    """Makes `stream` current on its device for the body (None: no change)."""
    if stream is None:
        yield
        return
    prev = current_stream(stream.device_index)
    set_stream(stream)
    try:
        yield stream
    finally:
        set_stream(prev)


class StreamContext:
    def __init__(self, stream):
        self.stream = stream
        self._cm = None

    def __enter__(self):
        self._cm = stream(self.stream)
        return self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def __getattr__(name):
    # torch.cuda.default_generators: one per visible device, read when asked for since the
    # device count is not known at import time.
    if name == "default_generators":
        return tuple(_C._default_generator(f"cuda:{i}") for i in range(device_count()))
    if name in _LAZY_NAMES:
        import importlib

        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kiln.cuda' has no attribute {name!r}")
