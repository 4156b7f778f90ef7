"""Reading files that torch.save wrote, without running code from them.

Note [Reading PyTorch checkpoints]
torch.save writes a pickle. Since PyTorch 1.6 it is a zip archive holding
`<root>/data.pkl` and one raw little-endian record `<root>/data/<key>` per storage;
before that ("legacy") one file held five pickles in a row (magic number, protocol
version, system info, the object, the list of storage keys) followed by each
storage as an int64 element count and its bytes. In both, the object pickle names
storages by persistent id ('storage', storage type, key, location, numel) and
tensors are rebuilt by calling torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, hooks).

kiln unpickles with a pickle.Unpickler whose find_class returns kiln stand-ins for
the globals PyTorch's own weights-only unpickler allows (the tensor and parameter
rebuild functions, storage types, dtypes, torch.Size, torch.device,
collections.OrderedDict, set/frozenset/bytearray, _codecs.encode for protocol-2
bytes) plus what the user allowlisted with kiln.serialization.add_safe_globals;
any other global raises pickle.UnpicklingError naming it before anything is
called, so a pickle whose __reduce__ names os.system never runs. Each storage
becomes one 1-d kiln tensor and each tensor an as_strided view of it, so tensors
that shared a storage in PyTorch (tied weights, views) share it in kiln too. The
legacy format is read in two passes: the first unpickles the object with
placeholder storages only to find where the storage data begins, the second
unpickles it again with the storages read.
"""

import collections
import io
import os
import pickle
import struct
import zipfile

from kiln import _C, _tensor_bytes

# torch dtype names (and their aliases) -> kiln dtype names.
_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "uint8": "uint8",
    "int8": "int8", "int16": "int16", "short": "int16", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "bool": "bool",
}
# Dtypes PyTorch has and kiln does not: recognised so the error names them.
_FOREIGN_DTYPES = (
    "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint16", "uint32",
    "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "qint8",
    "quint8", "qint32", "quint4x2",
)
# Legacy typed storage classes -> kiln dtype names.
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "ByteStorage": "uint8", "CharStorage": "int8",
    "ShortStorage": "int16", "IntStorage": "int32", "LongStorage": "int64",
    "BoolStorage": "bool", "UntypedStorage": "uint8",
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


class _StorageType:
    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


class _DType:
    """A torch dtype as the pickle names it; `kiln` is None for one kiln lacks."""

    def __init__(self, name):
        self.name, self.kiln = name, _DTYPES.get(name)


class _Storage:
    """A storage's bytes as a 1-d kiln tensor (None during the legacy format's first pass)."""

    def __init__(self, tensor, dtype, location, key):
        self.tensor, self.dtype, self.location, self.key = tensor, dtype, location, key


class _TorchTensorType:
    """torch.Tensor / torch.nn.Parameter as _rebuild_from_type_v2's `new_type`."""

    def __init__(self, parameter):
        self.parameter = parameter


def _error(name, message):
    return pickle.UnpicklingError(f"[kiln.load] {name}: {message}")


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, reader, **kwargs):
        super().__init__(file, **kwargs)
        self.reader = reader

    def find_class(self, module, name):
        found = self.reader.find_global(module, name)
        if found is None:
            raise _error(self.reader.name, self.reader.refusal(f"{module}.{name}"))
        return found

    def persistent_load(self, pid):
        return self.reader.storage(pid)


class TorchReader:
    """Rebuilds the object in one PyTorch file; see Note [Reading PyTorch checkpoints]."""

    def __init__(self, name, place, safe_globals, pickle_kwargs):
        self.name = name
        self.place = place  # (cpu tensor, saved device name, key) -> placed tensor
        self.safe_globals = safe_globals  # "module.qualname" -> object
        self.pickle_kwargs = pickle_kwargs  # `encoding` for Python 2 pickles
        self.storages = {}
        self.load_bytes = None  # key, dtype, numel -> bytes (set per format)

    # ---- globals ----------------------------------------------------------------------------

    def refusal(self, qualified):
        return (f"Weights only load failed: Unsupported global: GLOBAL {qualified}. kiln reads "
                "tensors, storages, primitive types and standard containers from PyTorch files "
                "(PyTorch's weights-only rules) and never runs code from them. If the file holds "
                "a whole model or another object, save its state_dict() with torch.save and "
                "load that; if you trust the file and the class is plain data, allow it with "
                f"kiln.serialization.add_safe_globals([{qualified.rsplit('.', 1)[-1]}]) or the "
                "kiln.serialization.safe_globals([...]) context manager")

    def find_global(self, module, name):
        if module == "__builtin__":  # legacy files written by Python 2
            module = "builtins"
        qualified = f"{module}.{name}"
        if qualified in self.safe_globals:
            return self.safe_globals[qualified]
        if module in ("torch", "torch.storage") and name in _STORAGES:
            return _StorageType(name, _STORAGES[name])
        if module == "torch" and (name in _DTYPES or name in _FOREIGN_DTYPES):
            return _DType(name)
        if module == "torch._utils":
            return {
                "_rebuild_tensor": self._rebuild_tensor,
                "_rebuild_tensor_v2": self._rebuild_tensor_v2,
                "_rebuild_tensor_v3": self._rebuild_tensor_v3,
                "_rebuild_parameter": self._rebuild_parameter,
                "_rebuild_parameter_with_state": self._rebuild_parameter_with_state,
            }.get(name)
        if qualified == "torch._tensor._rebuild_from_type_v2":
            return self._rebuild_from_type_v2
        if qualified in ("torch.Tensor", "torch._tensor.Tensor"):
            return _TorchTensorType(parameter=False)
        if qualified in ("torch.nn.parameter.Parameter", "torch.nn.Parameter"):
            return _TorchTensorType(parameter=True)
        if qualified in ("torch.Size", "torch.size.Size"):
            return _size
        if qualified == "torch.device":
            return _device
        return {
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,
            "builtins.set": set,
            "builtins.frozenset": frozenset,
            "builtins.bytearray": bytearray,
            "builtins.slice": slice,
            "builtins.complex": complex,
            "_codecs.encode": _latin1_encode,
        }.get(qualified)

    # ---- storages and tensors ----------------------------------------------------------------

    def storage(self, pid):
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise _error(self.name, f"unsupported persistent id {pid!r:.80}; expected "
                         "('storage', type, key, location, numel)")
        storage_type, key, location, numel = pid[1:5]
        if isinstance(storage_type, _DType):  # not used by torch.save, but be explicit
            raise _error(self.name, f"unsupported storage type {storage_type.name}")
        if not isinstance(storage_type, _StorageType):
            raise _error(self.name, f"persistent id names {storage_type!r:.60} as storage type")
        if not (isinstance(key, str) and isinstance(location, str) and isinstance(numel, int)
                and numel >= 0):
            raise _error(self.name, f"malformed storage persistent id {pid!r:.80}")
        view = pid[5] if len(pid) == 6 else None
        if key not in self.storages:
            self.storages[key] = self._read_storage(key, storage_type.dtype, location, numel)
        root = self.storages[key]
        if view is None:
            return root
        # Pre-0.4 storage views: (view key, offset, size) into the root storage.
        view_key, offset, size = view
        if root.tensor is None:
            return _Storage(None, root.dtype, location, view_key)
        if not (0 <= offset and offset + size <= root.tensor.numel()):
            raise _error(self.name, f"storage view {view_key} [{offset}, {offset + size}) runs "
                         f"past storage {key} of {root.tensor.numel()} elements")
        return _Storage(root.tensor[offset:offset + size], root.dtype, location, view_key)

    def _read_storage(self, key, dtype, location, numel):
        if self.load_bytes is None:  # first legacy pass
            return _Storage(None, dtype, location, key)
        data = self.load_bytes(key, dtype, numel)
        width = _tensor_bytes.itemsize(dtype)
        if len(data) % width:
            raise _error(self.name, f"storage {key} holds {len(data)} bytes, not a whole "
                         f"number of {dtype} elements")
        t = _tensor_bytes.from_bytes(data, dtype, (len(data) // width,))
        return _Storage(self.place(t, _normalise_location(location), key), dtype, location, key)

    def _tensor(self, storage, offset, size, stride, dtype=None):
        if not isinstance(storage, _Storage):
            raise _error(self.name, f"a tensor's storage is {type(storage).__name__}, not a "
                         "storage")
        if dtype is not None:
            if not isinstance(dtype, _DType):
                raise _error(self.name, f"a tensor's dtype is {dtype!r:.40}")
            if dtype.kiln is None:
                raise _error(self.name, f"storage {storage.key} holds a {dtype.name} tensor; "
                             "kiln has no such dtype (convert it in PyTorch first)")
        if storage.tensor is None:  # first legacy pass: only the layout of the file matters
            return None
        if not (_int_tuple(size) and _int_tuple(stride) and len(size) == len(stride)
                and isinstance(offset, int) and offset >= 0):
            raise _error(self.name, f"malformed tensor of size {size!r:.60}, stride "
                         f"{stride!r:.60}, offset {offset!r:.20}")
        base = storage.tensor
        if dtype is not None and dtype.kiln != storage.dtype:
            base = _retype(base, storage.dtype, dtype.kiln)
        numel = base.numel()
        extent = offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1
        if any(s == 0 for s in size):
            extent = 0
        if min(stride, default=0) < 0 or (extent > 0 and extent > numel) or offset > numel:
            raise _error(self.name, f"tensor of size {list(size)}, stride {list(stride)}, "
                         f"offset {offset} runs past storage {storage.key} of {numel} elements")
        return base.as_strided(tuple(size), tuple(stride), offset)

    def _rebuild_tensor(self, storage, offset, size, stride):
        return self._tensor(storage, offset, size, stride)

    def _rebuild_tensor_v2(self, storage, offset, size, stride, requires_grad, hooks,
                           metadata=None):
        return self._finish(self._tensor(storage, offset, size, stride), requires_grad)

    def _rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype,
                           metadata=None):
        return self._finish(self._tensor(storage, offset, size, stride, dtype), requires_grad)

    def _finish(self, t, requires_grad):
        if t is None or not requires_grad:
            return t
        if not t.is_floating_point():
            raise _error(self.name, f"a {t.dtype} tensor is marked as requiring grad")
        return t.detach().requires_grad_(True)

    def _rebuild_parameter(self, data, requires_grad, hooks, state=None):
        if data is None:
            return None
        from kiln.nn.parameter import Parameter

        if not isinstance(data, _C.Tensor):
            raise _error(self.name, f"a Parameter's data is {type(data).__name__}")
        return Parameter(data.detach(), requires_grad=bool(requires_grad))

    def _rebuild_parameter_with_state(self, data, requires_grad, hooks, state):
        return self._rebuild_parameter(data, requires_grad, hooks)

    def _rebuild_from_type_v2(self, func, new_type, args, state):
        if not callable(func) or not isinstance(args, tuple):
            raise _error(self.name, "malformed _rebuild_from_type_v2 call")
        t = func(*args)
        if isinstance(new_type, _TorchTensorType) and new_type.parameter:
            return self._rebuild_parameter(t, t.requires_grad if t is not None else False, None)
        if not isinstance(new_type, _TorchTensorType):
            raise _error(self.name, "a tensor subclass other than Parameter cannot be rebuilt")
        return t

    # ---- formats -------------------------------------------------------------------------------

    def read(self, f, form):
        """The object in `f`, a 'zip' or 'legacy' file (see sniff). A file that breaks the
        format's rules raises pickle.UnpicklingError naming the file and the problem."""
        try:
            return self.read_zip(f) if form == "zip" else self.read_legacy(f)
        except pickle.UnpicklingError:
            raise
        except (AttributeError, TypeError, KeyError, IndexError, ValueError, EOFError,
                OverflowError, RecursionError, struct.error, zipfile.BadZipFile) as e:
            raise _error(self.name, f"malformed PyTorch checkpoint ({type(e).__name__}: "
                         f"{str(e)[:200]})") from None

    def read_zip(self, f):
        try:
            archive = zipfile.ZipFile(f)
        except zipfile.BadZipFile as e:
            raise _error(self.name, f"looks like a zip archive but cannot be read ({e})") \
                from None
        with archive:
            names = archive.namelist()
            pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if not pkl:
                if any(n.endswith("/constants.pkl") for n in names):
                    raise _error(self.name, "this is a TorchScript archive (torch.jit.save); "
                                 "kiln cannot run TorchScript. Save the model's state_dict() "
                                 "with torch.save and load that")
                raise _error(self.name, "zip archive without a <root>/data.pkl record: not a "
                             "torch.save file")
            prefix = pkl[0][: -len("data.pkl")]
            big = (prefix + "byteorder" in names
                   and archive.read(prefix + "byteorder").strip() == b"big")

            def load_bytes(key, dtype, numel):
                record = f"{prefix}data/{key}"
                if record not in names:
                    raise _error(self.name, f"storage record {record} is missing")
                data = archive.read(record)
                return _byteswap(data, dtype) if big else data

            self.load_bytes = load_bytes
            return self._unpickle(io.BytesIO(archive.read(pkl[0])))

    def _unpickle(self, f):
        return _Unpickler(f, self, **self.pickle_kwargs).load()

    def read_legacy(self, f):
        def small(what):
            try:
                return self._unpickle(f)
            except EOFError:
                raise _error(self.name, f"file ends before the {what}") from None

        if small("magic number") != _LEGACY_MAGIC:
            raise _error(self.name, "a pickle, but not one torch.save wrote (no PyTorch magic "
                         "number); kiln only reads pickles in PyTorch's checkpoint format")
        version = small("protocol version")
        if version != _LEGACY_PROTOCOL:
            raise _error(self.name, f"unsupported PyTorch legacy protocol version {version!r:.20}")
        info = small("system information")
        if isinstance(info, dict) and info.get("little_endian") is False:
            raise _error(self.name, "written on a big-endian machine; kiln reads little-endian "
                         "legacy files only")
        start = f.tell()
        small("object")  # first pass: placeholders only (Note [Reading PyTorch checkpoints])
        keys = small("list of storage keys")
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise _error(self.name, "malformed list of storage keys")
        types = {key: s.dtype for key, s in self.storages.items()}
        data = {}
        for key in keys:
            if key not in types:
                raise _error(self.name, f"storage {key} is listed but no tensor uses it")
            header = f.read(8)
            if len(header) != 8:
                raise _error(self.name, f"file ends before storage {key}")
            (count,) = struct.unpack("<q", header)
            nbytes = count * _tensor_bytes.itemsize(types[key])
            blob = f.read(nbytes) if 0 <= count else b""
            if count < 0 or len(blob) != nbytes:
                raise _error(self.name, f"storage {key} of {count} elements runs past the end "
                             "of the file")
            data[key] = blob
        self.storages = {}

        def load_bytes(key, dtype, numel):
            if key not in data:
                raise _error(self.name, f"storage {key} has no data in the file")
            return data[key]

        self.load_bytes = load_bytes
        f.seek(start)
        return self._unpickle(f)


def _int_tuple(x):
    return isinstance(x, (tuple, list)) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in x)


def _retype(base, from_dtype, to_dtype):
    """An untyped (uint8) storage seen as `to_dtype` elements (_rebuild_tensor_v3)."""
    raw = _tensor_bytes.to_bytes(base)
    width = _tensor_bytes.itemsize(to_dtype)
    usable = len(raw) - len(raw) % width
    return _tensor_bytes.from_bytes(raw[:usable], to_dtype, (usable // width,)).to(base.device)


def _byteswap(data, dtype):
    import numpy as np

    width = _tensor_bytes.itemsize(dtype)
    if width == 1:
        return data
    return np.frombuffer(data, dtype=f">u{width}").astype(f"<u{width}").tobytes()


def _normalise_location(location):
    """'cuda' -> 'cuda:0' as kiln names devices; other names pass through."""
    try:
        return str(_C.device(location))
    except Exception:
        return location


def _size(*args):
    from kiln._size import Size

    return Size(*args)


def _device(*args):
    return _C.device(*args)


def _latin1_encode(obj, encoding="utf-8"):
    # Protocol-2 pickles store bytes as _codecs.encode(str, 'latin1'); nothing else is needed.
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("[kiln.load] _codecs.encode is only allowed as "
                                     "encode(str, 'latin1')")
    return obj.encode("latin1")


# How the legacy format's first pickle (protocol 2 or later) spells the magic number.
_LEGACY_MAGIC_BYTES = b"\x8a\x0a" + _LEGACY_MAGIC.to_bytes(10, "little")


def sniff(head):
    """What a file starting with `head` (its first 512 bytes, or fewer) is: 'zip' (PyTorch
    since 1.6), 'legacy' (a pickle starting with PyTorch's magic number), 'tar' (PyTorch
    before 0.4) or None for anything else."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:1] == b"\x80" and _LEGACY_MAGIC_BYTES in head[:32]:
        return "legacy"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


_OTHER_FORMATS = (
    (b"\x93NUMPY", "a NumPy .npy file; load it with numpy.load and convert with "
                   "kiln.from_numpy"),
    (b"\x89HDF", "an HDF5 file (Keras/h5py); kiln cannot read it"),
    (b"\x1f\x8b", "gzip-compressed; decompress it first"),
    (b"GGUF", "a GGUF file (llama.cpp); kiln cannot read it"),
    (b"\x80", "a Python pickle that torch.save did not write; kiln does not load arbitrary "
              "pickles, which can run code: save the tensors with kiln.save or torch.save"),
)


def describe_unknown(head):
    """A sentence saying what an unreadable file looks like and what to do about it."""
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            return f"the file looks like {what}"
    if head[8:10] in (b'{"', b"{}"):
        return ("the file looks like a kiln/safetensors checkpoint that was cut short or "
                "overwritten; save it again")
    if head[:1] in (b"{", b"[") or (head and all(32 <= c < 127 or c in (9, 10, 13)
                                                 for c in head[:64])):
        return "the file looks like text, not a checkpoint"
    return ("the file is neither a kiln/safetensors checkpoint nor a PyTorch checkpoint "
            "(zip or legacy pickle); was it truncated or written by another program?")


def open_head(f):
    head = f.read(512)
    f.seek(-len(head), os.SEEK_CUR)
    return head
