"""kiln.accelerator: torch.accelerator's device-agnostic API.

kiln has one accelerator type, CUDA; these functions forward to kiln.cuda. As in
PyTorch, a build with CUDA names cuda as its accelerator (current_accelerator())
even on a machine without a GPU, where is_available() is False, device_count() is
0 and the functions that need a device raise RuntimeError; a build without CUDA has
no accelerator (None).
"""

from kiln import _C
from kiln import cuda as _cuda


def current_accelerator(check_available=False):
    """kiln.device('cuda') in a build with CUDA, else None; with check_available=True
    also None when no GPU is usable."""
    if not _C._cuda_is_built() or (check_available and not is_available()):
        return None
    return _C.device("cuda")


def is_available():
    return _cuda.is_available()


def device_count():
    return _C._cuda_device_count()


def _device_present():
    return _C._cuda_is_built() and _C._cuda_device_count() > 0


def _require(what):
    if not _device_present():
        raise RuntimeError(f"[accelerator.{what}] Cannot access accelerator device when none is "
                           "available (kiln.accelerator.is_available() is False)")


def _index(device, what, optional=False):
    """An int index from an int, str or kiln.device of the accelerator's type; None is the
    current device (or -1 with optional=True)."""
    if isinstance(device, str):
        try:
            device = _C.device(device)
        except Exception as e:
            raise RuntimeError(f"[accelerator.{what}] invalid device string {device!r}: {e}") \
                from None
    if isinstance(device, _C.device):
        if device.type != "cuda":
            raise ValueError(f"[accelerator.{what}] {device.type} doesn't match the current "
                             "accelerator cuda")
        device = device.index
    if device is None:
        return -1 if optional else current_device_index()
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"[accelerator.{what}] expected an int, str or kiln.device, got "
                        f"{type(device).__name__}")
    return device


def current_device_index():
    _require("current_device_index")
    return _cuda.current_device()


def set_device_index(device, /):
    _require("set_device_index")
    index = _index(device, "set_device_index", optional=True)
    if index >= 0:
        _cuda.set_device(index)


# The names PyTorch 2.6 used, kept there as deprecated aliases.
current_device_idx = current_device_index
set_device_idx = set_device_index


def current_stream(device=None, /):
    _require("current_stream")
    return _cuda.current_stream(_index(device, "current_stream"))


def set_stream(stream):
    _require("set_stream")
    _cuda.set_stream(stream)


def synchronize(device=None, /):
    """Waits for the work queued on `device` (default: the current device)."""
    _require("synchronize")
    _cuda.synchronize(_index(device, "synchronize"))


class device_index:
    """Context manager making device index `device` current for its body; None changes
    nothing (and needs no accelerator)."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            self.prev_idx = current_device_index()
            set_device_index(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx is not None:
            set_device_index(self.prev_idx)
        return False


def empty_cache():
    if _device_present():
        _cuda.empty_cache()


def get_device_capability(device=None, /):
    """{'supported_dtypes': set of kiln dtypes tensors on the device can have}."""
    _require("get_device_capability")
    _index(device, "get_device_capability", optional=True)
    names = ("float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32",
             "int64", "bool")
    return {"supported_dtypes": {getattr(_C, n) for n in names}}


def get_memory_info(device_index=None, /):
    """(free, total) bytes of the device."""
    _require("get_memory_info")
    return _cuda.mem_get_info(_index(device_index, "get_memory_info"))


def memory_stats(device_index=None, /):
    _require("memory_stats")
    return _cuda.memory_stats(device_index)


def memory_allocated(device_index=None, /):
    _require("memory_allocated")
    return _cuda.memory_allocated(device_index)


def max_memory_allocated(device_index=None, /):
    _require("max_memory_allocated")
    return _cuda.max_memory_allocated(device_index)


def memory_reserved(device_index=None, /):
    _require("memory_reserved")
    return _cuda.memory_reserved(device_index)


def max_memory_reserved(device_index=None, /):
    _require("max_memory_reserved")
    return _cuda.max_memory_reserved(device_index)


def reset_peak_memory_stats(device_index=None, /):
    _require("reset_peak_memory_stats")
    _cuda.reset_peak_memory_stats(device_index)


def reset_accumulated_memory_stats(device_index=None, /):
    """Resets the peaks; kiln's allocator keeps no other accumulated counters."""
    reset_peak_memory_stats(device_index)
