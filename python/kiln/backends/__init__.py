"""kiln.backends: numerics switches of the CUDA libraries, named as in PyTorch."""

from kiln.backends import cuda, cudnn  # noqa: F401
