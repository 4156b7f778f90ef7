"""kiln.multiprocessing: Python's multiprocessing plus PyTorch's ``spawn`` / ``start_processes``
for one-process-per-device jobs (``kiln.multiprocessing.spawn(train, args=(...), nprocs=2)``).

Tensors sent through its queues travel by pickling (dtype, shape and bytes; see
``kiln/_tensor.py``), not through shared memory as in PyTorch.
"""

from multiprocessing import *  # noqa: F401,F403 (PyTorch's module re-exports it too)
from multiprocessing import get_context, get_start_method, set_start_method  # noqa: F401

from kiln.multiprocessing.spawn import (  # noqa: F401
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)
