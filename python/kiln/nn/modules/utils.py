"""torch.nn.modules.utils' tuple helpers, which layer code written for PyTorch imports:
_pair(3) == (3, 3), _pair((1, 2)) == (1, 2)."""

import collections.abc
import itertools


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(itertools.repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """Reverses `t` and repeats each element n times: the padding order F.pad takes from a
    per-dim tuple ((1, 2) -> (2, 2, 1, 1) for n=2)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def factory_kwargs(kwargs):
    """PyTorch's torch.nn.factory_kwargs: the device/dtype/memory_format keywords of a module
    constructor as one dict, merging a nested "factory_kwargs" dict (a key given both ways is
    a TypeError, as is any other key)."""
    if kwargs is None:
        return {}
    simple = {"device", "dtype", "memory_format"}
    unexpected = set(kwargs) - simple - {"factory_kwargs"}
    if unexpected:
        raise TypeError(f"[factory_kwargs] unexpected kwargs {unexpected}")
    result = dict(kwargs.get("factory_kwargs", {}))
    for key in simple:
        if key in kwargs:
            if key in result:
                raise TypeError(f"[factory_kwargs] {key} specified twice, in **kwargs and in "
                                f"factory_kwargs")
            result[key] = kwargs[key]
    return result
