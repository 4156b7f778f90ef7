"""Turning a list of samples into a batch (default_collate) and converting one
sample's NumPy arrays and numbers into tensors (default_convert)."""

import collections.abc

import numpy as np

import kiln

_NOT_NUMERIC = "SaUO"  # NumPy dtype kinds for strings and objects


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _same_type(obj, items):
    """A container of obj's type holding `items` (a dict or list), or the plain one."""
    try:
        return type(obj)(items)
    except TypeError:
        return items


def default_convert(data):
    """NumPy arrays and scalars become tensors, recursively inside dicts,
    (named)tuples and lists; everything else is returned unchanged."""
    if isinstance(data, kiln.Tensor):
        return data
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        if data.dtype.kind in _NOT_NUMERIC:
            return data
        return kiln.from_numpy(np.array(data))
    if isinstance(data, collections.abc.Mapping):
        return _same_type(data, {k: default_convert(v) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_type(data, [default_convert(d) for d in data])
    return data


def default_collate(batch):
    """Stacks a list of samples into a batch, keeping the samples' structure.

    Tensors are stacked along a new dim 0; NumPy arrays and scalars become stacked
    tensors; Python floats, ints and bools become float64, int64 and bool tensors;
    strings are returned as a list; dicts are collated per key, sequences and
    namedtuples per position.
    """
    elem = batch[0]
    if isinstance(elem, kiln.Tensor):
        return kiln.stack(list(batch), 0)
    if isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_)):
        if elem.dtype.kind in _NOT_NUMERIC:
            raise TypeError(
                "[default_collate] NumPy arrays of strings or objects cannot become tensors; "
                f"got dtype {elem.dtype}"
            )
        return kiln.from_numpy(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, bool):
        return kiln.tensor(list(batch), dtype=kiln.bool)
    if isinstance(elem, int):
        return kiln.tensor(list(batch), dtype=kiln.int64)
    if isinstance(elem, float):
        return kiln.tensor(list(batch), dtype=kiln.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return _same_type(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            sizes = [len(b) for b in batch]
            raise RuntimeError(
                f"[default_collate] each element in list of batch should be of equal size; "
                f"got sizes {sizes}"
            )
        columns = [default_collate(list(s)) for s in zip(*batch)]
        return columns if isinstance(elem, tuple) else _same_type(elem, columns)
    raise TypeError(
        "[default_collate] batch must contain tensors, NumPy arrays, numbers, dicts or lists; "
        f"found {type(elem)}"
    )
