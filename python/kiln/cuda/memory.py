"""Statistics and control of the CUDA caching allocator
(Note [CUDA caching allocator] in cuda/allocator.cpp)."""

from kiln.cuda._utils import _device_index, _runtime


def memory_stats(device=None):
    """A dict of the allocator's counters for `device` (PyTorch's key names where they exist)."""
    return dict(_runtime("_cuda_memory_stats")(_device_index(device)))


def memory_allocated(device=None):
    """Bytes held by live tensors on `device` (sizes rounded by the allocator)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes kiln obtained from the driver on `device`, in use or cached."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _runtime("_cuda_reset_peak_memory_stats")(_device_index(device))


def empty_cache():
    """Returns cached memory that no tensor uses to the driver (all devices)."""
    _runtime("_cuda_empty_cache")()


def mem_get_info(device=None):
    """(free, total) bytes of `device` as the driver sees them (other processes included)."""
    return tuple(_runtime("_cuda_mem_get_info")(_device_index(device)))


def memory_summary(device=None, abbreviated=False):
    s = memory_stats(device)
    mib = 1024 * 1024
    lines = [
        f"kiln CUDA memory summary, device {_device_index(device)}",
        f"  allocated: {s['allocated_bytes.all.current'] / mib:.2f} MiB "
        f"(peak {s['allocated_bytes.all.peak'] / mib:.2f} MiB) in {s['active.all.current']} blocks",
        f"  reserved:  {s['reserved_bytes.all.current'] / mib:.2f} MiB "
        f"(peak {s['reserved_bytes.all.peak'] / mib:.2f} MiB) "
        f"in {s['segment.all.current']} segments",
        f"  cudaMalloc calls: {s['num_device_alloc']}, cudaFree calls: {s['num_device_free']}, "
        f"retries: {s['num_alloc_retries']}, OOMs: {s['num_ooms']}",
    ]
    return "\n".join(lines)
