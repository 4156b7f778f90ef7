"""kiln.backends: numerics switches of the CUDA libraries and backend queries, named as in
PyTorch."""

from kiln.backends import cpu, cuda, cudnn, mkldnn, mps, openmp  # noqa: F401
