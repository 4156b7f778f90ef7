"""Tensor.untyped_storage() / Tensor.storage(): read-only handles on a tensor's memory.

Programs use them to ask whether two tensors share memory
(``a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()``), how big the
allocation under a view is (``nbytes()``), or which device holds it. kiln's storage
is not a Python object of its own, so the handle keeps the tensor alive and reads
the storage through it; building tensors on storages (legacy TypedStorage) is left
out (scripts/api_coverage.py).
"""

import warnings

from kiln._C import Tensor


class UntypedStorage:
    """The bytes under a tensor and all its views."""

    def __init__(self, tensor):
        self._tensor = tensor

    def data_ptr(self):
        return self._tensor._storage_ptr()

    def nbytes(self):
        return self._tensor._storage_nbytes()

    def size(self):
        return self.nbytes()

    def __len__(self):
        return self.nbytes()

    def element_size(self):
        return 1

    @property
    def device(self):
        return self._tensor.device

    @property
    def is_cuda(self):
        return self._tensor.is_cuda

    def is_pinned(self):
        return self._tensor.is_pinned()

    def __eq__(self, other):
        return isinstance(other, UntypedStorage) and self.data_ptr() == other.data_ptr()

    def __hash__(self):
        return hash(self.data_ptr())

    def __repr__(self):
        return f"kiln.UntypedStorage(nbytes={self.nbytes()}, device={self.device})"


class _TypedStorageView(UntypedStorage):
    """Tensor.storage(): the same memory counted in elements of the tensor's dtype."""

    @property
    def dtype(self):
        return self._tensor.dtype

    def element_size(self):
        return self._tensor.element_size()

    def size(self):
        return self.nbytes() // self.element_size()

    def __len__(self):
        return self.size()

    def untyped(self):
        return UntypedStorage(self._tensor)


def _untyped_storage(self):
    return UntypedStorage(self)


def _storage(self):
    warnings.warn("TypedStorage is deprecated. It will be removed in the future and "
                  "UntypedStorage will be the only storage class. Use tensor.untyped_storage() "
                  "instead of tensor.storage()", UserWarning, stacklevel=2)
    return _TypedStorageView(self)


__all__ = ["UntypedStorage"]


def install():
    Tensor.untyped_storage = _untyped_storage
    Tensor.storage = _storage
