"""kiln.distributed: PyTorch's torch.distributed API (process groups, collectives, stores).

CPU tensors travel over Gloo, CUDA tensors over NCCL; see distributed_c10d.py.
"""

from kiln._C._distributed import (  # noqa: F401
    DistError,
    DistNetworkError,
    DistStoreError,
    HashStore,
    PrefixStore,
    Store,
    TCPStore,
)
from kiln.distributed.distributed_c10d import *  # noqa: F401,F403
from kiln.distributed.distributed_c10d import default_pg_timeout  # noqa: F401
from kiln.distributed.composed import *  # noqa: F401,F403
