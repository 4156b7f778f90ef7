"""Tensor.share_memory_() / is_shared(): CPU tensors in memory other processes can map.

Note [Shared-memory tensors]
share_memory_() copies the elements the tensor can reach into a new block of shared
memory and makes the tensor a view of it (the `.data` swap optimizers use), so the
tensor object, its Parameter type and its autograd state stay. The block is a
memfd (strategy 'file_descriptor', PyTorch's default on Linux) or a named POSIX
shared-memory object under /dev/shm ('file_system'); NumPy wraps the mapping and
kiln.from_numpy shares it, so the block lives exactly as long as some tensor uses
it, and a finalizer on the NumPy array then closes the descriptor or unlinks the
name. A block sent to another process must outlive the sender's tensor until the
receiver maps it: a sent descriptor is duplicated when pickled (multiprocessing's
DupFd), and a sent name is left for the resource tracker to unlink when the
processes exit, so 'file_system' holds sent blocks until then, as PyTorch warns
that strategy leaks. PyTorch moves the storage itself, so every view of it follows; kiln moves
only the tensor it is called on (a view taken earlier keeps the old memory), which
is the same for the usual case, parameters and freshly made batches.
kiln.multiprocessing registers reduce_tensor with multiprocessing's pickler, so a
CPU tensor put on one of its queues is moved to shared memory and the receiver maps
the same block: writes on either side are seen by the other. CUDA tensors travel
as copies of their bytes (kiln has no CUDA IPC yet).
"""

import mmap
import os
import secrets
import threading
import weakref

import numpy as np

from kiln import _C, _tensor_bytes

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = "file_descriptor"
_SHM_DIR = "/dev/shm"  # where POSIX shared-memory names live on Linux
_blocks = {}  # address of a block's first byte -> _Block, for the blocks this process maps
_lock = threading.Lock()


def get_sharing_strategy():
    return _strategy


def set_sharing_strategy(new_strategy):
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"[multiprocessing.set_sharing_strategy] unknown strategy "
                         f"{new_strategy!r}; expected one of {list(_STRATEGIES)}")
    _strategy = new_strategy


def get_all_sharing_strategies():
    return set(_STRATEGIES)


class _Block:
    """A shared-memory block this process maps: how to name it to other processes. The
    registry holds these, never the mapping, so the block lives exactly as long as the NumPy
    array over it (which kiln's tensors keep alive)."""

    def __init__(self, nbytes, strategy, fd=None, name=None):
        self.nbytes, self.strategy, self.fd, self.name = nbytes, strategy, fd, name
        self.sent = False
        self.address = None


def _map_block(nbytes, strategy, fd=None, name=None):
    """A NumPy uint8 array over a new block (fd and name None) or over the block another
    process sent, registered in _blocks until the array dies."""
    size = max(nbytes, 1)  # mmap cannot map 0 bytes
    block = _Block(nbytes, strategy, fd, name)
    if strategy == "file_descriptor":
        if fd is None:
            block.fd = os.memfd_create("kiln-shared-tensor", os.MFD_CLOEXEC)
            os.ftruncate(block.fd, size)
        array = np.frombuffer(mmap.mmap(block.fd, size), dtype=np.uint8, count=size)
        cleanup = (_close_fd, block.fd)
    else:
        if name is None:
            block.name = f"kiln_{os.getpid()}_{secrets.token_hex(8)}"
        path = os.path.join(_SHM_DIR, block.name)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if name is None else 0), 0o600)
        try:
            if name is None:
                os.ftruncate(fd, size)
            array = np.frombuffer(mmap.mmap(fd, size), dtype=np.uint8, count=size)
        finally:
            os.close(fd)  # the mapping keeps the memory; the name finds it again
        cleanup = (_release_name, (path, block, name is None))
    block.address = array.ctypes.data
    with _lock:
        _blocks[block.address] = block
    weakref.finalize(array, _forget, block.address, *cleanup)
    return block, array


def _forget(address, release, handle):
    with _lock:
        _blocks.pop(address, None)
    try:
        release(handle)
    except (OSError, BufferError):  # already gone, or still exported: the OS reclaims it at exit
        pass


def _close_fd(fd):
    os.close(fd)


def _release_name(handle):
    path, block, created = handle
    if not created:
        return
    if block.sent:  # a receiver may not have mapped it yet: unlinked when the processes exit
        from multiprocessing import resource_tracker

        resource_tracker.register("/" + block.name, "shared_memory")
    else:
        os.unlink(path)


def _block_of(t):
    """The block holding t's elements, or None."""
    ptr = t.data_ptr()
    with _lock:
        for address, block in _blocks.items():
            if address <= ptr < address + max(block.nbytes, 1):
                return block
    return None


def _extent(t):
    """How many elements of its storage, from the start, the tensor reaches."""
    if t.numel() == 0:
        return t.storage_offset()
    return t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1


def _flat_view(array, dtype, offset_bytes, numel):
    """A 1-d kiln tensor of `numel` elements of `dtype` over a block's memory (no copy)."""
    name = _tensor_bytes.dtype_name(dtype)
    width = _tensor_bytes.itemsize(name)
    raw = array[offset_bytes:offset_bytes + numel * width]
    if name == "bfloat16":
        try:
            return _C.from_numpy(raw.view(np.int16)).view(_C.bfloat16)
        except NotImplementedError:
            raise NotImplementedError("[Tensor.share_memory_] bfloat16 tensors cannot be put in "
                                      "shared memory yet (it needs Tensor.view(dtype))") from None
    return _C.from_numpy(raw.view(_tensor_bytes.DTYPES[name][1]))


def share_memory_(self):
    """Moves the tensor's elements to shared memory (a no-op for CUDA tensors and for
    tensors already there); see Note [Shared-memory tensors]."""
    if not self.is_cpu or is_shared(self):
        return self
    extent = _extent(self)
    _, array = _map_block(extent * self.element_size(), _strategy)
    flat = _flat_view(array, self.dtype, 0, extent)
    if extent:
        flat.copy_(self.detach().as_strided((extent,), (1,), 0))
    self.data = flat.as_strided(tuple(self.shape), self.stride(), self.storage_offset())
    return self


def is_shared(self):
    """True for a tensor in shared memory, and for CUDA tensors (as in PyTorch)."""
    return self.is_cuda or _block_of(self) is not None


def _rebuild_shared(strategy, handle, nbytes, block_offset, dtype_name, size, stride, offset,
                    requires_grad, parameter):
    if strategy == "file_descriptor":
        _, array = _map_block(nbytes, strategy, fd=handle.detach())
    else:
        _, array = _map_block(nbytes, strategy, name=handle)
    dtype = _tensor_bytes.dtype_from_name(dtype_name)
    width = _tensor_bytes.itemsize(dtype_name)
    flat = _flat_view(array, dtype, block_offset, (nbytes - block_offset) // width)
    t = flat.as_strided(tuple(size), tuple(stride), offset)
    if parameter:
        from kiln.nn.parameter import Parameter

        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(True) if requires_grad else t


def reduce_tensor(t):
    """multiprocessing's reducer for kiln tensors (Note [Shared-memory tensors])."""
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("[kiln.multiprocessing] Cowardly refusing to serialize non-leaf tensor "
                           "which requires_grad, since autograd does not support crossing process "
                           "boundaries. If you just want to transfer the data, call detach() on "
                           "the tensor before serializing (e.g., putting it on the queue).")
    if not t.is_cpu or t.dtype == _C.bfloat16 and not _bfloat16_shareable():
        return t.__reduce_ex__(2)
    share_memory_(t)
    block = _block_of(t)
    block_offset = t.data_ptr() - block.address - t.storage_offset() * t.element_size()
    if block.strategy == "file_descriptor":
        from multiprocessing import reduction

        handle = reduction.DupFd(block.fd)  # a duplicate: the block outlives this tensor
    else:
        handle = block.name
        block.sent = True
    return (_rebuild_shared, (block.strategy, handle, block.nbytes, block_offset,
                              _tensor_bytes.dtype_name(t.dtype), tuple(t.shape), t.stride(),
                              t.storage_offset(), t.requires_grad, _is_parameter(t)))


def _is_parameter(t):
    from kiln.nn.parameter import Parameter

    return isinstance(t, Parameter)


def _bfloat16_shareable():
    try:
        _C.zeros(1, dtype=_C.int16).view(_C.bfloat16)
        return True
    except NotImplementedError:
        return False
