"""kiln.backends.cudnn: ``enabled`` (default True), ``allow_tf32`` (default True),
``benchmark``, ``deterministic``, ``is_available()``, ``version()`` and the ``flags``
context manager.

Module attributes that write through to C++, as in PyTorch
(``kiln.backends.cudnn.benchmark = True``). ``enabled = False`` makes CUDA
convolutions use the GEMM composition every device runs.
"""

import contextlib
import sys
import types

from kiln import _C
from kiln.backends._flag import Flag


def is_available():
    """Whether this build of kiln has cuDNN (CUDA convolutions then use it)."""
    return _C._cudnn_version() is not None


def version():
    """cuDNN's version as one number (major * 10000 + minor * 100 + patch), or None."""
    return _C._cudnn_version()


_NAMES = ("enabled", "benchmark", "deterministic", "allow_tf32")


@contextlib.contextmanager
def flags(enabled=None, benchmark=None, deterministic=None, allow_tf32=None):
    """Sets the given flags for a ``with`` block and restores all of them after it."""
    module = sys.modules[__name__]
    saved = {name: getattr(module, name) for name in _NAMES}
    given = dict(enabled=enabled, benchmark=benchmark, deterministic=deterministic,
                 allow_tf32=allow_tf32)
    try:
        for name, value in given.items():
            if value is not None:
                setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


class _CudnnModule(types.ModuleType):
    enabled = Flag("cudnn_enabled")
    allow_tf32 = Flag("cudnn_allow_tf32")
    benchmark = Flag("cudnn_benchmark")
    deterministic = Flag("cudnn_deterministic")


sys.modules[__name__].__class__ = _CudnnModule
