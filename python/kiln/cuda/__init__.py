"""kiln.cuda: device queries (the CUDA backend fills in the rest)."""

from kiln import _C

OutOfMemoryError = _C.OutOfMemoryError


def is_available():
    """True when a GPU is visible and kiln's CUDA kernels are built in."""
    return _C._cuda_is_available()


def device_count():
    return _C._cuda_device_count()
