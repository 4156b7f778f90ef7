"""Compiled custom kernels, cached in memory and on disk.

Note [Kernel cache]: an NVRTC image is keyed by a SHA-256 of everything that changes it: the
source, the options, the name expressions, the target architecture and NVRTC's version (the
program name too, since -lineinfo embeds it). The key names a file under
``KILN_KERNEL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/kiln/kernels``, i.e.
``~/.cache/kiln/kernels``), so a second run of a script, or a second process, compiles
nothing. A file is a header line of JSON (format version, the key, a SHA-256 of the image,
the lowered names) followed by the image; it is written to a temporary file in the same
directory and renamed into place, so a reader sees a whole file or none, and concurrent
writers of the same key are harmless. A file whose header or checksum does not match is
ignored and rewritten. A directory that cannot be written only costs the disk cache (one
warning); compiling still works.
"""

import hashlib
import json
import os
import tempfile
import threading
import warnings

from kiln import _C

_FORMAT = 1
_lock = threading.Lock()
_memory = {}
_warned_dirs = set()
# How the cache answered, for tests and for users asking why a run compiled.
stats = {"compiles": 0, "disk_hits": 0, "memory_hits": 0}


class CompileException(RuntimeError):
    """NVRTC rejected a kernel's source; ``log`` holds NVRTC's messages with line numbers."""

    def __init__(self, msg, source, name, options, log):
        super().__init__(msg)
        self.source, self.name, self.options, self.log = source, name, tuple(options), log

    def get_message(self):
        return str(self)

    def dump(self, f):
        """Writes the message and the numbered source to the file object ``f``."""
        f.write(str(self) + "\n")
        for n, line in enumerate(self.source.splitlines(), 1):
            f.write(f"{n:4d} {line}\n")


def _require_nvrtc(what):
    if not hasattr(_C, "_nvrtc_compile"):
        raise RuntimeError(f"[{what}] kiln was built without CUDA: custom kernels need the "
                           "CUDA backend (build kiln with nvcc on the PATH)")


def nvrtc_version():
    _require_nvrtc("nvrtc")
    return _C._nvrtc_version()


def cache_dir():
    """The disk cache's directory (``KILN_KERNEL_CACHE_DIR``, else under the user cache dir)."""
    d = os.environ.get("KILN_KERNEL_CACHE_DIR")
    if d:
        return os.path.expanduser(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln", "kernels")


def cache_key(source, options, arch, nvrtc_version, name_expressions=(), program_name=""):
    """The SHA-256 hex digest naming a compiled image (Note [Kernel cache])."""
    parts = [_FORMAT, source, list(options), int(arch), list(nvrtc_version),
             list(name_expressions), program_name]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def _error_message(what, program_name, source, log):
    """The exception text: NVRTC's log, then each source line an error points at."""
    lines = source.splitlines()
    shown = []
    prefix = f"{program_name}("
    for entry in log.splitlines():
        if entry.startswith(prefix) and "): error" in entry:
            num = entry[len(prefix):entry.index(")", len(prefix))]
            if num.isdigit() and 1 <= int(num) <= len(lines) and num not in shown:
                shown.append(num)
    context = "".join(f"\n  line {n}: {lines[int(n) - 1].strip()}" for n in shown)
    return f"[{what}] NVRTC could not compile the kernel source:\n{log}" + (
        f"\nat:{context}" if context else "")


def _read(path, key):
    try:
        with open(path, "rb") as f:
            header = json.loads(f.readline().decode("utf-8"))
            image = f.read()
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if (not isinstance(header, dict) or header.get("format") != _FORMAT
            or header.get("key") != key
            or header.get("sha256") != hashlib.sha256(image).hexdigest()):
        return None
    return image, bool(header.get("is_ptx")), list(header.get("lowered_names", []))


def _write(directory, path, key, image, is_ptx, lowered):
    header = {"format": _FORMAT, "key": key, "sha256": hashlib.sha256(image).hexdigest(),
              "is_ptx": is_ptx, "lowered_names": lowered}
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".kiln")
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(header).encode("utf-8") + b"\n")
            f.write(image)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if directory not in _warned_dirs:
            _warned_dirs.add(directory)
            warnings.warn(f"[kiln.cuda] cannot write the kernel cache in {directory} ({e}); "
                          "kernels will be compiled again by the next process "
                          "(set KILN_KERNEL_CACHE_DIR to a writable directory)")


def compile_with_cache(source, options, arch, name_expressions=(), program_name="kernel.cu",
                       what="RawKernel"):
    """(image, is_ptx, {name expression: lowered name}) for ``source`` compiled for ``arch``.

    Looks in memory, then on disk, then compiles with NVRTC and stores the result in both.
    Raises CompileException with NVRTC's log when the source does not compile.
    """
    _require_nvrtc(what)
    options = tuple(options)
    name_expressions = tuple(name_expressions)
    key = cache_key(source, options, arch, _C._nvrtc_version(), name_expressions, program_name)
    with _lock:
        hit = _memory.get(key)
        if hit is not None:
            stats["memory_hits"] += 1
            return hit
    directory = cache_dir()
    path = os.path.join(directory, key + ".kiln")
    found = _read(path, key)
    if found is not None and len(found[2]) == len(name_expressions):
        stats["disk_hits"] += 1
        image, is_ptx, lowered = found
    else:
        ok, image, is_ptx, log, lowered = _C._nvrtc_compile(
            source, program_name, list(options), int(arch), list(name_expressions))
        if not ok:
            raise CompileException(_error_message(what, program_name, source, log), source,
                                   program_name, options, log)
        stats["compiles"] += 1
        _write(directory, path, key, image, is_ptx, lowered)
    result = (image, is_ptx, dict(zip(name_expressions, lowered)))
    with _lock:
        _memory[key] = result
    return result


def clear_memory_cache():
    """Forgets the in-memory entries (the disk cache stays), so the next lookup reads disk."""
    with _lock:
        _memory.clear()
