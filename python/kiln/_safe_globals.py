"""The user's allowlist of classes and functions kiln.load may rebuild by name
(torch.serialization.add_safe_globals and friends); see Note [Saving objects]."""

_safe = []  # objects, or (object, "module.qualname") pairs, in the order added


def qualified_name(obj):
    """'module.qualname' of a class or function, the name files refer to it by."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise TypeError(f"[serialization] {obj!r:.60} has no __module__ and __qualname__; pass "
                        "(obj, 'module.name') to name it")
    return f"{module}.{qualname}"


def _check(entry):
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError("[serialization.add_safe_globals] a tuple entry must be "
                            f"(obj, 'module.name'), got {entry!r:.80}")
        return
    if not callable(entry):
        raise TypeError("[serialization.add_safe_globals] expected classes, functions or "
                        f"(obj, 'module.name') tuples, got {type(entry).__name__}")
    qualified_name(entry)


def add_safe_globals(safe_globals):
    """Marks classes and functions (or (obj, 'module.name') pairs) as safe for kiln.load to
    rebuild with weights_only=True, in kiln checkpoints and in PyTorch's."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError("[serialization.add_safe_globals] expected a list, got "
                        f"{type(safe_globals).__name__}")
    for entry in safe_globals:
        _check(entry)
    _safe.extend(safe_globals)


def get_safe_globals():
    return list(_safe)


def clear_safe_globals():
    _safe.clear()


class safe_globals:
    """Context manager: add_safe_globals(globals) for the body, then the previous list."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals
        self._saved = None

    def __enter__(self):
        self._saved = list(_safe)
        add_safe_globals(self.safe_globals)
        return self

    def __exit__(self, *exc):
        _safe[:] = self._saved
        return False


def safe_globals_by_name():
    """'module.qualname' -> object for every allowlisted entry."""
    out = {}
    for entry in _safe:
        if isinstance(entry, tuple):
            out[entry[1]] = entry[0]
        else:
            out[qualified_name(entry)] = entry
    return out
