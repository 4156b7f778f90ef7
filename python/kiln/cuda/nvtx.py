"""kiln.cuda.nvtx: the torch.cuda.nvtx API as no-ops.

kiln does not link NVTX, so ranges and marks do not reach Nsight; these keep
profiling-annotated scripts running. range_push/range_pop still track the
nesting depth per thread and return it, as PyTorch's do (range_pop returns -1
when no range is open).
"""

import contextlib
import threading

_local = threading.local()


def _depth():
    return getattr(_local, "depth", 0)


def range_push(msg):
    """Opens a (not recorded) range; returns the depth it opens at, starting at 0."""
    depth = _depth()
    _local.depth = depth + 1
    return depth


def range_pop():
    """Closes the innermost open range; returns its depth, or -1 when none is open."""
    depth = _depth()
    if depth == 0:
        return -1
    _local.depth = depth - 1
    return depth - 1


def range_start(msg):
    """A range that may end on another thread; returns an id for range_end."""
    return 0


def range_end(range_id):
    pass


def mark(msg):
    pass


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """with nvtx.range("step {}", i): ... (also a decorator); msg is formatted as PyTorch does."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
