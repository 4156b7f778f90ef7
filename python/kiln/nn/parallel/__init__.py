"""kiln.nn.parallel: data-parallel training across processes (and the one-device
DataParallel)."""

from kiln.nn.parallel.data_parallel import DataParallel, data_parallel  # noqa: F401
from kiln.nn.parallel.distributed import DistributedDataParallel  # noqa: F401
