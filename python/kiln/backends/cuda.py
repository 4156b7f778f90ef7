"""kiln.backends.cuda: ``kiln.backends.cuda.matmul.allow_tf32`` (default False)."""

from kiln import _C
from kiln.backends._flag import Flag


class _MatmulFlags:
    allow_tf32 = Flag("matmul_allow_tf32")

    def __repr__(self):
        return f"kiln.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


matmul = _MatmulFlags()


def is_built():
    return _C._cuda_is_built()
