"""kiln.nn.parallel: data-parallel training across processes."""

from kiln.nn.parallel.distributed import DistributedDataParallel  # noqa: F401
