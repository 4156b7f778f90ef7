"""PyTorch's top-level getters and setters of process and thread state: autocast,
anomaly mode, inference mode, thread pools, warnings, default device/tensor type.

Each reads or writes the state kiln already keeps (autocast and anomaly mode are
C++ thread-locals); where kiln has no such state it says so instead of pretending.
"""

import warnings

from kiln import _C

__all__ = [
    "autocast_decrement_nesting", "autocast_increment_nesting", "clear_autocast_cache",
    "get_autocast_cpu_dtype", "get_autocast_gpu_dtype", "is_autocast_cpu_enabled",
    "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "set_autocast_cache_enabled",
    "set_autocast_cpu_dtype", "set_autocast_cpu_enabled", "set_autocast_dtype",
    "set_autocast_enabled", "set_autocast_gpu_dtype", "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled", "set_anomaly_enabled", "is_inference_mode_enabled",
    "get_num_interop_threads", "set_num_interop_threads", "init_num_threads",
    "is_warn_always_enabled", "set_warn_always", "set_flush_denormal", "get_default_device",
    "set_default_device", "set_default_tensor_type", "get_device_module",
    "is_vulkan_available", "cudnn_is_acceptable",
]


def _set_autocast(device_type, enabled=None, dtype=None, cache_enabled=None):
    state_enabled, state_dtype, _, state_cache = _C._autocast_state(device_type)
    _C._autocast_set(device_type, state_enabled if enabled is None else bool(enabled),
                     state_dtype if dtype is None else dtype,
                     state_cache if cache_enabled is None else bool(cache_enabled))


def is_autocast_cpu_enabled():
    return _C._autocast_state("cpu")[0]


def is_autocast_ipu_enabled():
    return False  # kiln has no IPU backend


def is_autocast_xla_enabled():
    return False  # kiln has no XLA backend


def set_autocast_enabled(device_type, enabled=None):
    """set_autocast_enabled(device_type, enabled), or the older set_autocast_enabled(enabled)
    for CUDA."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _set_autocast(device_type, enabled=enabled)


def set_autocast_cpu_enabled(enabled):
    _set_autocast("cpu", enabled=enabled)


def set_autocast_dtype(device_type, dtype):
    _set_autocast(device_type, dtype=dtype)


def set_autocast_cpu_dtype(dtype):
    _set_autocast("cpu", dtype=dtype)


def set_autocast_gpu_dtype(dtype):
    _set_autocast("cuda", dtype=dtype)


def get_autocast_cpu_dtype():
    return _C._autocast_state("cpu")[1]


def get_autocast_gpu_dtype():
    return _C._autocast_state("cuda")[1]


def set_autocast_cache_enabled(enabled):
    for device_type in ("cpu", "cuda"):
        _set_autocast(device_type, cache_enabled=enabled)


def autocast_increment_nesting():
    """Enters one autocast nesting level (CUDA's counter, as PyTorch); returns the depth."""
    return _C._autocast_increment_nesting("cuda")


def autocast_decrement_nesting():
    return _C._autocast_decrement_nesting("cuda")


def clear_autocast_cache():
    _C._clear_autocast_cache()


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    return _C._anomaly_check_nan_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    _C._set_anomaly_enabled(bool(enabled), bool(check_nan))


def is_inference_mode_enabled():
    from kiln.autograd.grad_mode import is_inference_mode_enabled as enabled

    return enabled()


# kiln runs inter-op work on the calling thread; the setting is kept for the getter only.
_interop_threads = [1]


def get_num_interop_threads():
    return _interop_threads[0]


def set_num_interop_threads(num):
    if not isinstance(num, int) or isinstance(num, bool) or num <= 0:
        raise RuntimeError(f"[set_num_interop_threads] Expected positive number of threads, "
                           f"got {num!r}")
    _interop_threads[0] = num


def init_num_threads():
    """Nothing to initialise: kiln's OpenMP pool starts with the process."""


def is_warn_always_enabled():
    return _warn_always[0]


_warn_always = [False]


def set_warn_always(b):
    """Every warning kiln raises goes through Python's warnings; with True, repeated
    warnings are shown each time (a warnings filter), as PyTorch's TORCH_WARN_ONCE does."""
    _warn_always[0] = bool(b)
    if b:
        warnings.simplefilter("always", UserWarning)


def set_flush_denormal(mode):
    """PyTorch returns False where flushing denormals is unsupported; kiln does not set the
    CPU's FTZ/DAZ flags, so it always is."""
    return False


def get_default_device():
    return _C.device("cpu")


def set_default_device(device):
    """kiln's factories allocate on the CPU unless given device=; only the CPU (or None,
    which restores it) can be the default."""
    if device is not None and _C.device(device).type != "cpu":
        raise NotImplementedError(
            f"[set_default_device] kiln has no default device other than the CPU; pass "
            f"device={str(device)!r} to the factories (or use tensor.to(device))")


def set_default_tensor_type(t):
    """Deprecated in PyTorch: sets the default floating dtype from a tensor type."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    name = t if isinstance(t, str) else f"{t.__module__}.{t.__name__}"
    parts = name.split(".")
    if len(parts) == 3 and parts[1] == "cuda":
        set_default_device("cuda")
    dtypes = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64,
              "HalfTensor": _C.float16, "BFloat16Tensor": _C.bfloat16}
    if parts[-1] not in dtypes:
        raise TypeError(f"[set_default_tensor_type] only floating-point types are supported "
                        f"as the default type, got {name}")
    _C.set_default_dtype(dtypes[parts[-1]])


def get_device_module(device=None):
    """The module of a device type: kiln.cuda for CUDA."""
    import kiln

    kind = "cuda" if device is None else device if isinstance(device, str) \
        else _C.device(device).type
    kind = kind.split(":")[0]
    if kind != "cuda":
        raise RuntimeError(f"[get_device_module] Device '{kind}' does not have a corresponding "
                           f"module registered as 'kiln.{kind}'.")
    return kiln.cuda


def is_vulkan_available():
    return False


def cudnn_is_acceptable(tensor):
    """Whether cuDNN would take this tensor: a float CUDA tensor with cuDNN enabled."""
    import kiln

    return bool(tensor.is_cuda and kiln.backends.cudnn.enabled
                and kiln.backends.cudnn.is_available()
                and tensor.dtype in (_C.float16, _C.bfloat16, _C.float32, _C.float64))
