"""kiln.save and kiln.load: checkpoints as safetensors files.

Note [Checkpoint format]
A checkpoint is a plain safetensors file: an 8-byte little-endian header length,
a JSON header (padded with spaces to a multiple of 8 bytes) naming each tensor's
dtype, shape and byte range, then the tensor bytes. Any safetensors reader can
load the tensors. What the saved object looked like around the tensors (dicts,
lists, tuples, numbers, strings, devices) is a JSON tree stored as the string
value of __metadata__["kiln.structure"]; its leaves name tensors by key. Loading
parses JSON and copies bytes, nothing else: no pickle, so a checkpoint cannot
run code, and every field is checked before it is used.

Note [Saving objects]
Other objects are data too. A NumPy array is a tensor entry whose node says
"ndarray"; a set, frozenset or bytes has its own node kind; an object of a class
(a whole nn.Module, a dataclass) is {"kind": "object", "class": "module:qualname",
"id": n, "state": ...}, its state being obj.__getstate__() (the instance __dict__
unless the class says otherwise) saved by the same rules, and a function or class
used as a value is {"kind": "global", "name": ...}. A tensor or object met again
is saved once and referred to by {"kind": "ref"}, so tied weights and a module
used twice stay shared. Loading resolves a class name only if it is on the
allowlist: kiln's own classes (module kiln or kiln.*, checked to be what the
name says, so `kiln.serialization.os` cannot reach `os`) and what
add_safe_globals / safe_globals registered, matched by name without importing
anything; with weights_only=False, as PyTorch's "I trust this file", any class
importable by that name. The object is then made with cls.__new__ and given its
state through __setstate__ or its __dict__; nothing the file names is called.
"""

import collections
import importlib
import io
import json
import math
import os
import pickle
import secrets
import struct

from kiln import _C, _tensor_bytes, _torch_format
from kiln._safe_globals import (  # noqa: F401  (kiln.serialization.* as in torch.serialization)
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    qualified_name,
    safe_globals,
    safe_globals_by_name,
)

STRUCTURE_KEY = "kiln.structure"
_METADATA = "__metadata__"
_INT64_MAX = 2**63 - 1
# The safetensors format's own cap on the JSON header (the reference reader's), so a hostile
# length cannot make a loader read and parse gigabytes; runtime/safetensors.cpp has the same.
MAX_HEADER_BYTES = 100_000_000


# ---------------------------------------------------------------------------------------------
# save


class _Flattener:
    """Walks a saved object: collects its tensors under unique dotted keys and
    returns the JSON tree of everything else (see Note [Checkpoint format] and
    Note [Saving objects])."""

    def __init__(self):
        self.tensors = {}  # key -> tensor, in visiting order
        self._on_path = set()  # ids of the containers being visited, to catch cycles
        self._seen = {}  # id -> (object, its reference node): tensors and objects met so far
        from kiln.nn.parameter import Parameter

        self._parameter = Parameter

    def _key(self, path):
        base = ".".join(path) if path else "tensor"
        key, n = base, 0
        while key in self.tensors or key == _METADATA:
            n += 1
            key = f"{base}#{n}"
        return key

    def node(self, obj, path):
        where = ".".join(path) or "<root>"
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if id(obj) in self._seen:
            return dict(self._seen[id(obj)][1])
        if isinstance(obj, _C.Tensor):
            key = self._key(path)
            self.tensors[key] = obj
            self._seen[id(obj)] = (obj, {"kind": "ref", "key": key})
            node = {"kind": "tensor", "key": key, "device": str(obj.device),
                    "requires_grad": bool(obj.requires_grad)}
            if isinstance(obj, self._parameter):
                node["parameter"] = True
            return node
        if isinstance(obj, _C.dtype):
            return {"kind": "dtype", "name": _tensor_bytes.dtype_name(obj)}
        if isinstance(obj, _C.device):
            return {"kind": "device", "name": str(obj)}
        if isinstance(obj, (bytes, bytearray)):
            return {"kind": type(obj).__name__, "hex": obj.hex()}
        if _is_ndarray(obj):
            return self._ndarray(obj, path, where)
        if isinstance(obj, (type, _FUNCTION_TYPES)):
            return {"kind": "global", **_name_parts(obj, where)}
        if not isinstance(obj, (dict, list, tuple, set, frozenset)):
            return self._object(obj, path, where)
        if id(obj) in self._on_path:
            raise ValueError(f"[kiln.save] the object contains a reference cycle at '{where}'")
        self._on_path.add(id(obj))
        try:
            if isinstance(obj, dict):
                items = []
                for k, v in obj.items():
                    if isinstance(k, bool) or not isinstance(k, (str, int)):
                        raise TypeError(
                            f"[kiln.save] dict keys must be str or int; got {k!r} of type "
                            f"{type(k).__name__} at '{where}'"
                        )
                    items.append([k, self.node(v, path + [str(k)])])
                return {"kind": "dict", "items": items,
                        "ordered": isinstance(obj, collections.OrderedDict)}
            kind = next(k for k in (tuple, list, frozenset, set) if isinstance(obj, k)).__name__
            return {"kind": kind,
                    "items": [self.node(v, path + [str(i)]) for i, v in enumerate(obj)]}
        finally:
            self._on_path.discard(id(obj))

    def _ndarray(self, arr, path, where):
        import numpy as np

        name = _NUMPY_DTYPES.get(arr.dtype.str.lstrip("<>=|"))
        if name is None:
            raise TypeError(f"[kiln.save] cannot save a NumPy array of dtype {arr.dtype} at "
                            f"'{where}': kiln saves arrays of "
                            f"{sorted(set(_NUMPY_DTYPES.values()))}")
        key = self._key(path)
        scalar = isinstance(arr, np.generic)
        # A native-order C-contiguous copy, 0-d for a scalar (ascontiguousarray would be 1-d).
        self.tensors[key] = _C.from_numpy(np.array(arr, dtype=arr.dtype.newbyteorder("="),
                                                   order="C", copy=True))
        if not scalar:
            self._seen[id(arr)] = (arr, {"kind": "ref", "key": key})
        return {"kind": "ndarray", "key": key, "scalar": scalar}

    def _object(self, obj, path, where):
        cls = type(obj)
        try:
            getstate = getattr(obj, "__getstate__", None)  # Python < 3.11: only if defined
            state = getstate() if getstate is not None else obj.__dict__
        except (TypeError, AttributeError):  # e.g. object.__getstate__ of an extension type
            state = None
        if state is None and not hasattr(obj, "__dict__"):
            raise TypeError(
                f"[kiln.save] cannot save an object of type {cls.__name__} at '{where}': it has "
                "no __dict__ or __getstate__ to store as data; checkpoints hold tensors, "
                "containers, numbers, strings, NumPy arrays and objects whose state is such data"
            )
        ident = len(self._seen)
        self._seen[id(obj)] = (obj, {"kind": "ref", "id": ident})
        return {"kind": "object", **_name_parts(cls, where), "id": ident,
                "state": self.node(state, path)}


_FUNCTION_TYPES = (type(len), type(lambda: None))
# NumPy dtype codes (byte order stripped) -> kiln dtype names (Note [Saving objects]).
_NUMPY_DTYPES = {"f2": "float16", "f4": "float32", "f8": "float64", "i1": "int8", "u1": "uint8",
                 "i2": "int16", "i4": "int32", "i8": "int64", "b1": "bool"}


def _is_ndarray(obj):
    np = _sys_modules_numpy()
    return np is not None and isinstance(obj, (np.ndarray, np.generic)) and not isinstance(
        obj, (bool, int, float))


def _sys_modules_numpy():
    import sys

    return sys.modules.get("numpy")  # an array can only exist once NumPy is imported


def _name_parts(obj, where):
    """The (module, qualified name) that finds `obj` again, checked now rather than at load.
    Extension functions (kiln._C.relu) are found by __name__: their __qualname__ names the
    capsule they hang from."""
    module = getattr(obj, "__module__", None)
    for name in (getattr(obj, "__qualname__", None), getattr(obj, "__name__", None)):
        if isinstance(module, str) and isinstance(name, str) and _lookup(module, name) is obj:
            return {"module": module, "qualname": name}
    raise TypeError(f"[kiln.save] cannot save {obj!r:.60} at '{where}': only classes and "
                    "functions defined at the top level of a module (or in a class) can be "
                    "saved, by name")


def _lookup(module, qualname):
    """The object `module`.`qualname` names, or None."""
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return found


def _header(tensors, structure):
    entries, offset = {}, 0
    for key, t in tensors.items():
        name = _tensor_bytes.dtype_name(t.dtype)
        nbytes = t.numel() * _tensor_bytes.itemsize(name)
        entries[key] = {"dtype": _tensor_bytes.DTYPES[name][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    entries[_METADATA] = {STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))}
    header = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header, entries


def _write(f, tensors, structure):
    prefix, entries = _header(tensors, structure)
    f.write(prefix)
    for key, t in tensors.items():
        data = _tensor_bytes.to_bytes(t)
        begin, end = entries[key]["data_offsets"]
        if len(data) != end - begin:
            raise RuntimeError(f"[kiln.save] tensor '{key}' produced {len(data)} bytes, "
                               f"expected {end - begin}")
        f.write(data)


# Note [Checkpoint temporary files]
# kiln.save(obj, path) writes `.{name}.kiln-tmp-{host}-{pid}-{random}` next to the target,
# fsyncs it, os.replace()s it over the target and fsyncs the directory, so the target is
# always either the old checkpoint or the new one, never a torn one. On an exception
# (KeyboardInterrupt and a full disk included) save removes its temporary file; only a
# process killed outright (SIGKILL, OOM killer, power loss) leaves one behind. The name says
# who wrote it, so the next save to or load from that directory removes the temporary
# files of the same target whose writer is gone: written on this host by a pid that no
# longer exists. A live writer's file, or one from another host sharing the directory (where
# our pids mean nothing), is left alone. The cost is one listdir of the directory.

_TEMP_MARK = ".kiln-tmp-"


def _temp_prefix(base):
    return f".{base}{_TEMP_MARK}"


def _create_temp(directory, base):
    """A new file next to the target (see Note [Checkpoint temporary files]). Unlike
    tempfile.mkstemp (mode 0600) it gets the permissions any new file gets under the
    umask, which the checkpoint then keeps."""
    prefix = f"{_temp_prefix(base)}{os.uname().nodename}-{os.getpid()}-"
    while True:
        tmp = os.path.join(directory, prefix + secrets.token_hex(6))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def _writer_is_gone(pid):
    """Whether no process `pid` exists on this host (signal 0 only checks)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: it exists under another user
        pass
    return False


def _remove_stale_temps(path):
    """Removes the temporary files that killed saves to `path` left behind (see
    Note [Checkpoint temporary files]). Best effort: a directory we cannot list or
    write is left as it is."""
    directory = os.path.dirname(os.path.abspath(path))
    prefix = _temp_prefix(os.path.basename(path))
    host = os.uname().nodename
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        parts = name[len(prefix):].rsplit("-", 2)  # host names may contain '-'
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue
        if _writer_is_gone(int(parts[1])):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:  # already removed by a concurrent save, or read-only
                pass


def save(obj, f):
    """Saves a tensor or a structure holding tensors (a state dict, nested dicts,
    lists, tuples, numbers, strings) to `f`, a path or a writable binary file.

    The file is a safetensors file (see Note [Checkpoint format]). Tensors are
    saved contiguously, each on its own even when they share storage. Saving to a
    path is atomic: the data goes to a temporary file in the same directory, which
    replaces `f` only once it is complete and on disk; an interrupted save leaves the
    old `f` as it was (see Note [Checkpoint temporary files]).
    """
    flattener = _Flattener()
    structure = flattener.node(obj, [])
    if not isinstance(f, (str, os.PathLike)):
        _write(f, flattener.tensors, structure)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    _remove_stale_temps(path)  # first, so their space is free for this save
    fd, tmp = _create_temp(directory, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, flattener.tensors, structure)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # makes the rename itself durable
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------------------------------------
# load


class _Reader:
    """Validated access to one safetensors file; every error names the file."""

    def __init__(self, f, name):
        self.f = f
        self.name = name
        self.start = f.tell()
        self.size = f.seek(0, os.SEEK_END) - self.start
        f.seek(self.start)

    def error(self, what, key=None):
        where = f"{self.name}: " + (f"tensor '{key}': " if key is not None else "")
        return ValueError(f"[kiln.load] {where}{what}")

    def read_header(self, head):
        """`head`: the file's first bytes, to say what an unreadable file looks like."""
        if self.size < 8:
            raise self.error(f"file is {self.size} bytes, too short for the 8-byte header length; "
                             + _torch_format.describe_unknown(head))
        (n,) = struct.unpack("<Q", self.f.read(8))
        if n > MAX_HEADER_BYTES:
            raise self.error(f"header length {n} exceeds the safetensors limit of "
                             f"{MAX_HEADER_BYTES} bytes: " + _torch_format.describe_unknown(head))
        if n > self.size - 8:
            raise self.error(f"header length {n} runs past the end of the file "
                             f"({self.size - 8} bytes follow the length): "
                             + _torch_format.describe_unknown(head))
        raw = self.f.read(n)
        try:
            header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
        except (ValueError, RecursionError) as e:
            raise self.error(f"header is not valid JSON ({e})") from None
        if not isinstance(header, dict):
            raise self.error(f"header must be a JSON object; got {type(header).__name__}")
        self.data_start = 8 + n
        self.data_size = self.size - self.data_start
        metadata = header.pop(_METADATA, {})
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise self.error("__metadata__ must be a JSON object of strings to strings")
        entries = {key: self._check_entry(key, entry) for key, entry in header.items()}
        return entries, metadata

    def _check_entry(self, key, entry):
        if not isinstance(entry, dict):
            raise self.error(f"entry must be a JSON object; got {entry!r:.80}", key)
        missing = {"dtype", "shape", "data_offsets"} - entry.keys()
        if missing:
            raise self.error(f"entry lacks {sorted(missing)}", key)
        code = entry["dtype"]
        if not isinstance(code, str) or code not in _tensor_bytes.BY_CODE:
            raise self.error(f"unknown or unsupported dtype {code!r:.40}; kiln reads "
                             f"{sorted(_tensor_bytes.BY_CODE)}", key)
        dtype = _tensor_bytes.BY_CODE[code]
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(
                _is_int(d) and 0 <= d <= _INT64_MAX for d in shape):
            raise self.error(f"shape must be a list of non-negative integers; got {shape!r:.80}",
                             key)
        offsets = entry["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))
                and 0 <= offsets[0] <= offsets[1]):
            raise self.error("data_offsets must be [begin, end] integers with 0 <= begin <= end; "
                             f"got {offsets!r:.80}", key)
        begin, end = offsets
        nbytes = math.prod(shape) * _tensor_bytes.itemsize(dtype)
        # The sizes a tensor may have (Note [Checked shape arithmetic] in core/shape.h).
        if math.prod(max(d, 1) for d in shape) > _INT64_MAX or nbytes > _INT64_MAX:
            raise self.error(f"shape {shape} of dtype {code} is too large: Storage size "
                             "calculation overflowed", key)
        if end - begin != nbytes:
            raise self.error(f"data_offsets {offsets} span {end - begin} bytes but dtype {code} "
                             f"and shape {shape} need {nbytes}", key)
        if end > self.data_size:
            raise self.error(f"data_offsets {offsets} run past the data region of "
                             f"{self.data_size} bytes", key)
        return dtype, tuple(shape), begin, end

    def tensor(self, key, entry):
        dtype, shape, begin, end = entry
        self.f.seek(self.start + self.data_start + begin)
        buf = self.f.read(end - begin)
        if len(buf) != end - begin:
            raise self.error(f"read {len(buf)} of {end - begin} bytes; the file changed while "
                             "loading", key)
        try:
            return _tensor_bytes.from_bytes(buf, dtype, shape)
        except Exception as e:  # e.g. a shape NumPy or kiln cannot represent
            raise self.error(f"cannot build a {dtype} tensor of shape {list(shape)} ({e})",
                             key) from None


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys {sorted({k for k in keys if keys.count(k) > 1})}")
    return dict(pairs)


def _place(t, saved, map_location, name, key):
    """Moves a loaded CPU tensor where map_location says (see load)."""
    loc = map_location
    if callable(loc) and not isinstance(loc, (str, _C.device)):
        placed = loc(t, saved)
        if placed is not None:
            return placed
        target = saved
    elif loc is None:
        target = saved
    elif isinstance(loc, (str, _C.device)):
        target = str(loc)
    elif isinstance(loc, dict):
        mapping = {str(k): str(v) for k, v in loc.items()}
        target = mapping.get(saved, saved)
    else:
        raise TypeError("[kiln.load] map_location must be None, a str, a kiln.device, a "
                        f"dict or a callable; got {type(loc).__name__}")
    if target == "cpu":
        return t
    try:
        device = _C.device(target)
    except Exception:
        raise RuntimeError(f"[kiln.load] {name}: tensor '{key}' was saved on {target!r:.40}, "
                           "which kiln does not know; pass map_location='cpu' to load it on the "
                           "CPU") from None
    if device.type == "cuda" and not _C._cuda_is_available():
        raise RuntimeError(
            f"[kiln.load] {name}: tensor '{key}' was saved on {saved} and maps "
            f"to {target}, but CUDA is not available; pass map_location='cpu' to load it "
            "on the CPU"
        )
    return t.to(target)


class _Loader:
    """Rebuilds the saved object from the structure tree, placing each tensor
    where map_location says and resolving classes as Note [Saving objects] says."""

    def __init__(self, reader, entries, map_location, weights_only):
        self.reader = reader
        self.entries = entries
        self.map_location = map_location
        self.weights_only = weights_only
        self.safe = safe_globals_by_name()
        self.loaded = {}  # tensor key -> tensor or array; object id -> object

    def tensor(self, key, saved_device="cpu", requires_grad=False, parameter=False):
        if key not in self.entries:
            raise self.reader.error("the kiln.structure metadata names a tensor that the file "
                                    "does not hold", key)
        t = self.reader.tensor(key, self.entries[key])
        if requires_grad and not t.is_floating_point():
            raise self.reader.error(f"kiln.structure metadata marks a {t.dtype} tensor as "
                                    "requiring grad; only floating-point tensors can", key)
        t = _place(t, saved_device, self.map_location, self.reader.name, key)
        if parameter:
            from kiln.nn.parameter import Parameter

            t = Parameter(t, requires_grad=requires_grad)
        elif requires_grad:
            t = t.requires_grad_(True)
        self.loaded[key] = t
        return t

    def node(self, node, where):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        kind = node.get("kind") if isinstance(node, dict) else None
        items = node.get("items") if isinstance(node, dict) else None
        if kind == "tensor" and isinstance(node.get("key"), str) and isinstance(
                node.get("device"), str) and isinstance(node.get("requires_grad"), bool):
            return self.tensor(node["key"], self._device_name(node["device"], where),
                               node["requires_grad"], node.get("parameter") is True)
        if kind in ("list", "tuple", "set", "frozenset") and isinstance(items, list):
            values = [self.node(v, f"{where}.{i}") for i, v in enumerate(items)]
            try:
                return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](
                    values)
            except TypeError:  # an unhashable set element
                pass
        if kind == "dict" and isinstance(items, list) and all(
                isinstance(it, list) and len(it) == 2
                and (isinstance(it[0], str) or _is_int(it[0])) for it in items):
            out = collections.OrderedDict() if node.get("ordered") is True else {}
            for k, v in items:
                out[k] = self.node(v, f"{where}.{k}")
            return out
        if kind == "dtype" and isinstance(node.get("name"), str) and (
                node["name"] in _tensor_bytes.DTYPES):
            return _tensor_bytes.dtype_from_name(node["name"])
        if kind == "device" and isinstance(node.get("name"), str):
            return _C.device(self._device_name(node["name"], where))
        if kind in ("bytes", "bytearray") and isinstance(node.get("hex"), str):
            try:
                return (bytes if kind == "bytes" else bytearray).fromhex(node["hex"])
            except ValueError:
                pass
        if kind == "ndarray" and isinstance(node.get("key"), str) and isinstance(
                node.get("scalar"), bool):
            return self._ndarray(node["key"], node["scalar"])
        ref = node.get("key", node.get("id")) if kind == "ref" else None
        if isinstance(ref, (str, int)) and ref in self.loaded:
            return self.loaded[ref]
        if kind in ("global", "object") and isinstance(node.get("module"), str) and isinstance(
                node.get("qualname"), str):
            found = self._resolve(node["module"], node["qualname"], where)
            if kind == "global":
                return found
            if isinstance(found, type) and _is_int(node.get("id")) and "state" in node:
                return self._object(found, node["id"], node["state"], where)
        raise self.reader.error(f"kiln.structure metadata is malformed at '{where}': "
                                f"{json.dumps(node)[:80]}")

    def _ndarray(self, key, scalar):
        if key not in self.entries:
            raise self.reader.error("the kiln.structure metadata names an array that the file "
                                    "does not hold", key)
        if self.entries[key][0] == "bfloat16":
            raise self.reader.error("a NumPy array cannot be bfloat16", key)
        arr = self.reader.tensor(key, self.entries[key]).numpy().copy()
        if scalar:
            return arr[()]
        self.loaded[key] = arr
        return arr

    def _resolve(self, module, qualname, where):
        """The class or function `module`.`qualname`, if the allowlist lets it through."""
        name = f"{module}.{qualname}"
        if name in self.safe:
            return self.safe[name]
        own = module == "kiln" or module.startswith("kiln.")
        if own or not self.weights_only:
            found = _lookup(module, qualname)
            if found is None:
                raise pickle.UnpicklingError(
                    f"[kiln.load] {self.reader.name}: cannot find {name} (at '{where}')")
            # Only the object the name denotes, never one reachable through an import alias
            # (kiln.serialization.os.system is os.system, whose module is not kiln's).
            if getattr(found, "__module__", None) == module and qualname in (
                    getattr(found, "__qualname__", None), getattr(found, "__name__", None)):
                return found
        short = qualname.rsplit(".", 1)[-1]
        raise pickle.UnpicklingError(
            f"[kiln.load] {self.reader.name}: Weights only load failed: Unsupported global: "
            f"GLOBAL {name} (at '{where}') is not an allowed global by default. If you trust "
            f"this class, allow it with kiln.serialization.add_safe_globals([{short}]) or "
            f"`with kiln.serialization.safe_globals([{short}]):`; if you trust the whole file, "
            "pass weights_only=False (kiln still only rebuilds objects from their data, it never "
            "runs code from the file)"
        )

    def _object(self, cls, ident, state_node, where):
        try:
            obj = cls.__new__(cls)
        except TypeError as e:
            raise self.reader.error(f"cannot create a {cls.__qualname__} at '{where}' ({e})") \
                from None
        self.loaded[ident] = obj  # before its state: the state may refer back to it
        state = self.node(state_node, where)
        if hasattr(obj, "__setstate__"):
            obj.__setstate__(state)
            return obj
        if isinstance(state, tuple) and len(state) == 2:  # object.__getstate__ with __slots__
            state, slots = state
            for k, v in (slots or {}).items():
                object.__setattr__(obj, k, v)
        if state is not None:
            if not isinstance(state, dict):
                raise self.reader.error(f"the state of a {cls.__qualname__} at '{where}' is a "
                                        f"{type(state).__name__}, not a dict")
            obj.__dict__.update(state)
        return obj

    def _device_name(self, name, where):
        try:
            return str(_C.device(name))
        except Exception:
            raise self.reader.error(f"kiln.structure metadata names an invalid device {name!r:.40} "
                                    f"at '{where}'") from None


def _load_from(f, name, map_location, weights_only, pickle_load_args):
    head = _torch_format.open_head(f)
    form = _torch_format.sniff(head)
    if form in ("zip", "legacy"):
        reader = _torch_format.TorchReader(
            name, lambda t, saved, key: _place(t, saved, map_location, name, key),
            safe_globals_by_name(), pickle_load_args)
        return reader.read(f, form)
    if form == "tar":
        raise ValueError(f"[kiln.load] {name}: the file looks like a tar archive, PyTorch's "
                         "format before version 0.4; kiln cannot read it. Load it with an old "
                         "PyTorch and save it again with torch.save")
    reader = _Reader(f, name)
    entries, metadata = reader.read_header(head)
    loader = _Loader(reader, entries, map_location, weights_only)
    if STRUCTURE_KEY not in metadata:
        return {key: loader.tensor(key) for key in entries}
    try:
        structure = json.loads(metadata[STRUCTURE_KEY])
    except (ValueError, RecursionError) as e:
        raise reader.error(f"kiln.structure metadata is not valid JSON ({e})") from None
    try:
        return loader.node(structure, "<root>")
    except RecursionError:
        raise reader.error("kiln.structure metadata is nested too deeply") from None


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Loads an object saved by kiln.save, the tensors of any safetensors file (as a
    dict name -> tensor), or a file torch.save wrote (zip or legacy format), from
    `f`, a path or a readable binary file.

    map_location: None puts each tensor back on the device it was saved from; a
    device or str puts all of them there; a dict maps saved device names to new
    ones ({'cuda:0': 'cpu'}); a callable fn(cpu_tensor, saved_device_name) returns
    the placed tensor, or None for the default.

    Loading never runs code from the file. weights_only (None means True, as in
    PyTorch) limits objects of classes to kiln's own and those allowed with
    add_safe_globals / safe_globals; weights_only=False also rebuilds objects of
    any class importable by the saved name, from their saved data (Note [Saving
    objects]). PyTorch files go through a restricted unpickler either way (Note
    [Reading PyTorch checkpoints]); a global it refuses raises pickle.UnpicklingError
    naming it. A malformed kiln file raises ValueError naming the file, the tensor key
    and the problem. pickle_module must be None or the pickle module; mmap is accepted
    for PyTorch's sake (files are read into memory); pickle_load_args takes
    `encoding` for legacy files written by Python 2. Loading a path also removes the
    temporary files that killed saves to it left behind (see Note [Checkpoint
    temporary files]).
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError("[kiln.load] pickle_module must be None or the pickle module: kiln "
                        "unpickles PyTorch files with its own restricted unpickler")
    unknown = set(pickle_load_args) - {"encoding"}
    if unknown:
        raise TypeError(f"[kiln.load] unexpected keyword arguments {sorted(unknown)}")
    weights_only = True if weights_only is None else bool(weights_only)
    if isinstance(f, (str, os.PathLike)):
        _remove_stale_temps(os.fspath(f))
        with open(f, "rb") as fh:
            return _load_from(fh, os.fspath(f), map_location, weights_only, pickle_load_args)
    name = repr(f.name) if isinstance(getattr(f, "name", None), str) else "<file object>"
    if not (hasattr(f, "seekable") and f.seekable()):
        f = io.BytesIO(f.read())
    return _load_from(f, name, map_location, weights_only, pickle_load_args)
