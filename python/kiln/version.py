"""kiln.version: kiln's version and the CUDA version it was built with (torch.version's names)."""

from kiln import _C

_info = _C._build_info()

__version__ = _info["version"]
git_version = _info["git_version"]
# The CUDA runtime kiln was compiled against ("13.0"), None for a CPU-only build.
cuda = _info["cuda_version"] or None
debug = _info["build_type"] == "Debug"
hip = None

del _info
