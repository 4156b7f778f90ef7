"""Writes files in torch.save's formats without PyTorch, for tests of kiln.load.

The pickles are made by Python's own pickler against stand-in `torch` modules put in
sys.modules only while pickling, so they hold exactly the opcodes and global names
torch.save writes: torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, OrderedDict()), storages as persistent ids ('storage', torch.FloatStorage,
key, location, numel), and, for the legacy format, the magic number, protocol version
and system information pickles before the object and the storage records after it.
"""

import collections
import contextlib
import io
import pickle
import struct
import sys
import types
import zipfile

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
STORAGE_TYPES = {"float32": "FloatStorage", "float64": "DoubleStorage", "int64": "LongStorage",
                 "int32": "IntStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
                 "float16": "HalfStorage", "int8": "CharStorage", "int16": "ShortStorage"}


def _global(module, name):
    def stand_in(*args):
        raise AssertionError("stand-ins are only pickled, never called")

    stand_in.__module__, stand_in.__qualname__, stand_in.__name__ = module, name, name
    return stand_in


@contextlib.contextmanager
def _stand_in_torch():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    param = types.ModuleType("torch.nn.parameter")
    for name in STORAGE_TYPES.values():
        setattr(torch, name, _global("torch", name))
    for name in ("_rebuild_tensor_v2", "_rebuild_parameter"):
        setattr(utils, name, _global("torch._utils", name))
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils", "torch.nn.parameter")}
    sys.modules.update({"torch": torch, "torch._utils": utils, "torch.nn.parameter": param})
    try:
        yield torch, utils
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class Storage:
    def __init__(self, array, key, location="cpu"):
        self.array, self.key, self.location = np.ascontiguousarray(array).ravel(), key, location


class Tensor:
    """A tensor to pickle: a view (offset, size, stride in elements) of a Storage."""

    def __init__(self, storage, offset, size, stride, requires_grad=False, parameter=False):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad, self.parameter = requires_grad, parameter

    def __reduce_ex__(self, protocol):
        utils = sys.modules["torch._utils"]
        tensor = (utils._rebuild_tensor_v2, (self.storage, self.offset, tuple(self.size),
                                             tuple(self.stride), self.requires_grad,
                                             collections.OrderedDict()))
        if not self.parameter:
            return tensor
        return (utils._rebuild_parameter, (_Rebuilt(tensor), self.requires_grad,
                                           collections.OrderedDict()))


class _Rebuilt:
    def __init__(self, reduced):
        self.reduced = reduced

    def __reduce_ex__(self, protocol):
        return self.reduced


def tensor(array, key, requires_grad=False, location="cpu"):
    array = np.asarray(array)
    strides = [int(np.prod(array.shape[i + 1:])) for i in range(array.ndim)]  # C order
    return Tensor(Storage(array, key, location), 0, array.shape, strides, requires_grad)


def _pickler(buf, storages, legacy=False):
    torch = sys.modules["torch"]
    pickler = pickle.Pickler(buf, protocol=2)

    def persistent_id(obj):
        if not isinstance(obj, Storage):
            return None
        storages[obj.key] = obj
        kind = getattr(torch, STORAGE_TYPES[obj.array.dtype.name])
        pid = ("storage", kind, obj.key, obj.location, obj.array.size)
        return pid + (None,) if legacy else pid  # the legacy format adds view metadata

    pickler.persistent_id = persistent_id
    return pickler


def zip_file(obj, root="archive"):
    """The bytes of torch.save(obj) in the zip format (PyTorch 1.6 and later)."""
    with _stand_in_torch():
        storages = {}
        buf = io.BytesIO()
        _pickler(buf, storages).dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", buf.getvalue())
        z.writestr(f"{root}/byteorder", "little")
        for key, storage in storages.items():
            z.writestr(f"{root}/data/{key}", storage.array.astype(
                storage.array.dtype.newbyteorder("<")).tobytes())
        z.writestr(f"{root}/version", "3\n")
    return out.getvalue()


def legacy_file(obj):
    """The bytes of torch.save(obj, _use_new_zipfile_serialization=False)."""
    out = io.BytesIO()
    for small in (LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True,
                                       "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        pickle.dump(small, out, protocol=2)
    with _stand_in_torch():
        storages = {}
        _pickler(out, storages, legacy=True).dump(obj)
    keys = sorted(storages)
    pickle.dump(keys, out, protocol=2)
    for key in keys:
        arr = storages[key].array
        out.write(struct.pack("<q", arr.size))
        out.write(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
    return out.getvalue()


def zip_with_pickle(pickle_bytes, root="archive"):
    """A torch-style zip archive whose data.pkl is `pickle_bytes` (for malicious pickles)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(f"{root}/data.pkl", pickle_bytes)
        z.writestr(f"{root}/version", "3\n")
    return out.getvalue()


def legacy_with_pickle(pickle_bytes):
    out = io.BytesIO()
    for small in (LEGACY_MAGIC, 1001, {"little_endian": True}):
        pickle.dump(small, out, protocol=2)
    out.write(pickle_bytes)
    pickle.dump([], out, protocol=2)
    return out.getvalue()
