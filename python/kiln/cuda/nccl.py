"""kiln.cuda.nccl: the NCCL library kiln's multi-GPU collectives run on (torch.cuda.nccl's
queries)."""

from kiln import _C


def version():
    """NCCL's version as (major, minor, patch); a RuntimeError when kiln was built without it."""
    code = _C._nccl_version()
    if code == 0:
        raise RuntimeError("[nccl.version] kiln was built without NCCL: install NCCL 2 and rebuild "
                           "kiln with CUDA to get it")
    # NCCL up to 2.8 encodes major*1000 + minor*100 + patch; later releases major*10000 + ...
    if code < 10000:
        return (code // 1000, code % 1000 // 100, code % 100)
    return (code // 10000, code // 100 % 100, code % 100)


def is_available(tensors):
    """Whether NCCL can take `tensors`: dense CUDA tensors, one per device."""
    if _C._nccl_version() == 0:
        return False
    devices = set()
    for t in tensors:
        if not t.is_cuda or not t.is_contiguous() or t.get_device() in devices:
            return False
        devices.add(t.get_device())
    return True
