"""kiln.backends.cudnn: ``allow_tf32`` (default True), ``benchmark``, ``deterministic``.

Module attributes that write through to C++, as in PyTorch
(``kiln.backends.cudnn.benchmark = True``).
"""

import sys
import types

from kiln.backends._flag import Flag


class _CudnnModule(types.ModuleType):
    allow_tf32 = Flag("cudnn_allow_tf32")
    benchmark = Flag("cudnn_benchmark")
    deterministic = Flag("cudnn_deterministic")
    enabled = True


sys.modules[__name__].__class__ = _CudnnModule
