"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (and the
deprecated Container)."""

import operator
import warnings
from collections import OrderedDict

from kiln._C import Tensor
from kiln.nn.modules.module import Module, _addindent
from kiln.nn.parameter import Parameter


def _index(idx, length, cls):
    """A non-negative position for idx in a container of `length` entries."""
    idx = operator.index(idx)
    if not -length <= idx < length:
        raise IndexError(f"[{cls}.__getitem__] index {idx} is out of range for length {length}")
    return idx % length


class _ModuleSequence(Module):
    """What Sequential and ModuleList share: modules stored under "0", "1", ..."""

    def _renumber(self, modules):
        self._forget_all()
        for i, module in enumerate(modules):
            self.register_module(str(i), module)

    def _forget_all(self):
        for name in list(self._modules):
            self._forget(name)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return list(self._modules.values())[_index(idx, len(self), type(self).__name__)]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), type(self).__name__)), module)

    def __delitem__(self, idx):
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            del modules[idx]
        else:
            del modules[_index(idx, len(self), type(self).__name__)]
        self._renumber(modules)

    def append(self, module):
        self.register_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        if not -len(modules) <= index <= len(modules):
            raise IndexError(f"[{type(self).__name__}.insert] index {index} is out of range for "
                             f"length {len(modules)}")
        modules.insert(index, module)
        self._renumber(modules)

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def pop(self, idx=-1):
        module = self[idx]
        del self[idx]
        return module

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_ModuleSequence):
    """Calls its modules in order, each on the previous one's output.
    Sequential(m0, m1, ...) or Sequential(OrderedDict(name=module, ...))."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.register_module(name, module)
        else:
            for i, module in enumerate(args):
                self.register_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                self._forget(key)
        else:
            self._forget(keys[_index(idx, len(self), "Sequential")])
        # Keys stay "0", "1", ... so indexing by position and by name agree.
        if all(k.isdigit() for k in self._modules):
            self._renumber(list(self._modules.values()))

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"[Sequential.__add__] add operator supports only objects of "
                             f"Sequential class, but {type(other).__name__} is given.")
        return Sequential(*self, *other)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules, registered so parameters(), to() and state_dict() see them."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def __repr__(self):
        # Runs of identical entries print once, as "(first-last): n x repr".
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = []
        for first, last, text in runs:
            head = f"({first}): " if first == last else \
                f"({first}-{last}): {last - first + 1} x "
            lines.append(_addindent(head + text, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules by name, registered as children."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.register_module(key, module)

    def __delitem__(self, key):
        if key not in self._modules:
            raise KeyError(key)
        self._forget(key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        for key in list(self._modules):
            self._forget(key)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for entry in items:
            key, module = entry
            self[key] = module


def _param_line(key, value):
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(s) for s in value.shape)
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    return f"  ({key}): {kind} containing: [{value.dtype} of size {size}{device}]"


def _as_parameter(value):
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters (plain tensors are wrapped in Parameter), registered as "0", "1"..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (getattr(self, str(i)) for i in range(self._size))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return getattr(self, str(_index(idx, self._size, "ParameterList")))

    def __setitem__(self, idx, value):
        setattr(self, str(_index(idx, self._size, "ParameterList")), _as_parameter(value))

    def append(self, value):
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return "\n".join(_param_line(i, p) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("[ParameterList.__call__] ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters by name (plain tensors are wrapped in Parameter)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self):
        return "\n".join(_param_line(k, v) for k, v in self.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("[ParameterDict.__call__] ParameterDict should not be called.")


class Container(Module):
    """Deprecated since PyTorch 0.4: a Module whose keyword arguments become submodules."""

    def __init__(self, **kwargs):
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented "
                      "in `nn.Module`. Subclass that instead.", FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
