"""kiln.backends.mkldnn: ``enabled`` (default True), ``is_available()`` and the ``flags``
context manager, as in torch.backends.mkldnn.

``enabled = False`` makes CPU convolutions use the GEMM composition every device runs instead
of oneDNN (Note [oneDNN convolutions] in ops/cpu/conv_dnnl.cpp).
"""

import contextlib
import sys
import types

from kiln import _C
from kiln.backends._flag import Flag


def is_available():
    """Whether this build of kiln has oneDNN (CPU convolutions then use it)."""
    return _C._mkldnn_version() is not None


@contextlib.contextmanager
def flags(enabled=None):
    """Sets ``enabled`` for a ``with`` block and restores it after."""
    module = sys.modules[__name__]
    saved = module.enabled
    try:
        if enabled is not None:
            module.enabled = enabled
        yield
    finally:
        module.enabled = saved


class _MkldnnModule(types.ModuleType):
    enabled = Flag("mkldnn_enabled")


sys.modules[__name__].__class__ = _MkldnnModule
