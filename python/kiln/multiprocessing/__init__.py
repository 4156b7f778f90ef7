"""kiln.multiprocessing: Python's multiprocessing plus PyTorch's ``spawn`` / ``start_processes``
for one-process-per-device jobs (``kiln.multiprocessing.spawn(train, args=(...), nprocs=2)``).

As in PyTorch, importing it makes CPU tensors sent through multiprocessing's queues and
pipes travel by shared memory: the sender's tensor moves there and the receiver maps the
same block (Note [Shared-memory tensors] in ``kiln/_tensor_sharing.py``; strategies
'file_descriptor' and 'file_system'). CUDA tensors travel as copies of their bytes.
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
from kiln.multiprocessing.reductions import init_reductions  # noqa: E402
from kiln._tensor_sharing import (  # noqa: E402,F401
    get_all_sharing_strategies,
    get_sharing_strategy,
    set_sharing_strategy,
)

init_reductions()
