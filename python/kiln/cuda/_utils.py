"""Device-argument parsing shared by kiln.cuda's modules."""

from kiln import _C


def _runtime(name):
    """The _C function `name`, or a stand-in raising RuntimeError in builds without CUDA."""
    fn = getattr(_C, name, None)
    if fn is None:
        def missing(*args, **kwargs):
            raise RuntimeError(f"[kiln.cuda] kiln was built without CUDA ({name} is unavailable)")
        return missing
    return fn


def _device_index(device, optional=False):
    """An int device index from None/int/str/kiln.device; None means the current device
    (or -1 with optional=True)."""
    if isinstance(device, str):
        device = _C.device(device)
    if isinstance(device, _C.device):
        if device.type != "cuda":
            raise ValueError(f"[kiln.cuda] expected a cuda device, got {device}")
        device = device.index
    if device is None:
        return -1 if optional else _runtime("_cuda_current_device")()
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError(f"[kiln.cuda] expected a device index, str or kiln.device, got {device!r}")
    if device < 0:
        return -1 if optional else _runtime("_cuda_current_device")()
    return device
