"""torch.return_types-like named tuples for the ops written in Python (mode,
frexp, ...): one class per op name, made on first use, with the module name the C++
bindings give theirs."""

import collections

_TYPES = {}


def named(name, fields, values):
    """values as an instance of the named tuple `name` with `fields`."""
    cls = _TYPES.get(name)
    if cls is None:
        cls = collections.namedtuple(name, fields)
        cls.__module__ = "kiln.return_types"
        _TYPES[name] = cls
    return cls(*values)
