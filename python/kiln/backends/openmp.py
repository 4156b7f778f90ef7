"""kiln.backends.openmp: whether kiln's CPU kernels run on OpenMP threads (torch.backends.openmp)."""

from kiln import _C


def is_available():
    return _C._build_info()["openmp"] != "OFF"
