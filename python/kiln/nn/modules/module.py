"""kiln.nn.Module: the base class of every layer, with PyTorch's registration,
traversal, state_dict, device/dtype moves, train/eval and forward hooks."""

from collections import OrderedDict, namedtuple

from kiln._C import Tensor
from kiln._C import device as _device
from kiln._C import empty as _empty
from kiln._C import dtype as _dtype
from kiln.autograd.grad_mode import no_grad
from kiln.nn.modules.hooks import HookDict, RemovableHandle
from kiln.nn.parameter import Buffer, Parameter

# Note [Module attribute mirror]
# PyTorch keeps parameters, buffers and submodules only in _parameters /
# _buffers / _modules and finds them through __getattr__, which Python calls
# only after the normal lookup has failed and raised internally: every
# `self.weight` in a forward pays for a failed lookup plus a Python call.
# kiln also stores each registered value in the instance __dict__, so the
# lookup succeeds at C speed. __setattr__, __delattr__, register_* and _apply
# write both places. __getattr__ stays as the fallback for values that code
# put straight into the registry dicts; code that deletes or replaces entries
# in those dicts directly must use setattr/delattr instead.

def _register_empty_parameter(module, name, shape, present=True, device=None, dtype=None):
    """Registers an uninitialised Parameter of `shape` under `name` (the layer's
    reset_parameters fills it), or None when not `present` (a layer built without it)."""
    param = Parameter(_empty(shape, device=device, dtype=dtype)) if present else None
    module.register_parameter(name, param)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


def _typename(value):
    if isinstance(value, Tensor):
        return f"{type(value).__module__}.{type(value).__name__}[{value.dtype}]"
    return type(value).__name__


def _addindent(text, spaces):
    """Indents every line of `text` but the first (nested module reprs)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _parse_to(args, kwargs):
    """Module.to's arguments -> (device, dtype, non_blocking, memory_format), as Tensor.to
    accepts them."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("copy", None)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"[Module.to] unexpected keyword arguments {sorted(kwargs)}")
    args = list(args)
    if args and isinstance(args[0], Tensor):
        ref = args.pop(0)
        device, dtype = ref.device, ref.dtype
    elif args and not isinstance(args[0], (_dtype, bool)):
        device = args.pop(0)
    if args and isinstance(args[0], _dtype):
        dtype = args.pop(0)
    if args and isinstance(args[0], bool):
        non_blocking = args.pop(0)
    if args:
        raise TypeError(f"[Module.to] could not parse arguments {tuple(args)}")
    if device is not None:
        device = _device(device)
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"[Module.to] nn.Module.to only accepts floating point dtypes, but got "
                        f"desired dtype={dtype}")
    return device, dtype, non_blocking, memory_format


def _forward_unimplemented(self, *args, **kwargs):
    raise NotImplementedError(f'[Module.forward] Module [{type(self).__name__}] is missing the '
                              f'required "forward" function')


class Module:
    """Base class for layers: assign Parameters, buffers and Modules as attributes
    and they are registered, traversed, moved and saved with the module."""

    training: bool
    forward = _forward_unimplemented

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"[Module.__init__] {type(self).__name__}.__init__() got unexpected "
                            f"arguments {args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = HookDict()
        d["_forward_hooks"] = HookDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_pre_hooks_with_kwargs"] = set()

    # ---- calling ---------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("[Module.__call__] a forward pre-hook with kwargs must "
                                           f"return None or (args, kwargs), got {result!r}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped in one)."""
        return self._add_hook(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs, hook,
                              prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) -> None or a replacement output."""
        return self._add_hook(self._forward_hooks, self._forward_hooks_with_kwargs, hook, prepend,
                              with_kwargs)

    @staticmethod
    def _add_hook(hooks, with_kwargs_set, hook, prepend, with_kwargs):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            items = list(hooks.items())
            hooks.clear()
            hooks[handle.id] = hook
            hooks.update(items)
        if with_kwargs:
            with_kwargs_set.add(handle.id)
        return handle

    # ---- registration ----------------------------------------------------------------------

    def _check_name(self, name, what, method):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"[Module.{method}] cannot assign {what} before Module.__init__() "
                                 "call")
        if not isinstance(name, str):
            raise TypeError(f"[Module.{method}] {what} name should be a string, got "
                            f"{type(name).__name__}")
        if name == "":
            raise KeyError(f'[Module.{method}] {what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'[Module.{method}] {what} name can\'t contain ".", got {name!r}')

    def _forget(self, name, keep=None):
        """Drops `name` from every registry but `keep` and from the mirror (Note [Module
        attribute mirror]). Re-assigning keeps the entry in `keep`, so an existing parameter
        or submodule keeps its place in parameters(), children() and state_dict(), as in
        PyTorch (the optimizer's parameter order depends on it)."""
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                d[registry].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)
        d.pop(name, None)

    def register_parameter(self, name, param):
        """Adds a Parameter (or None: a declared but absent parameter) under `name`."""
        self._check_name(name, "parameter", "register_parameter")
        d = self.__dict__
        if name not in d["_parameters"] and (name in d or hasattr(type(self), name)):
            raise KeyError(f"[Module.register_parameter] attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"[Module.register_parameter] cannot assign '{_typename(param)}' "
                                f"object to parameter '{name}' (kiln.nn.Parameter or None "
                                "required)")
            if param.grad_fn is not None:
                raise ValueError(f"[Module.register_parameter] cannot assign non-leaf Tensor to "
                                 f"parameter '{name}'; create parameters explicitly, or compute "
                                 "this value from them in forward()")
        d["_parameters"][name] = param
        d[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a tensor (or None) that moves and saves with the module but is not trained;
        persistent=False keeps it out of state_dict."""
        self._check_name(name, "buffer", "register_buffer")
        d = self.__dict__
        if name not in d["_buffers"] and (name in d or hasattr(type(self), name)):
            raise KeyError(f"[Module.register_buffer] attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"[Module.register_buffer] cannot assign '{_typename(tensor)}' object "
                            f"to buffer '{name}' (kiln.Tensor or None required)")
        d["_buffers"][name] = tensor
        if persistent:
            d["_non_persistent_buffers_set"].discard(name)
        else:
            d["_non_persistent_buffers_set"].add(name)
        d[name] = tensor

    def register_module(self, name, module):
        """Adds a child module (or None) under `name`."""
        self._check_name(name, "module", "register_module")
        d = self.__dict__
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"[Module.register_module] {_typename(module)} is not a Module "
                            "subclass")
        if name not in d["_modules"] and (name in d or hasattr(type(self), name)):
            raise KeyError(f"[Module.register_module] attribute '{name}' already exists")
        d["_modules"][name] = module
        d[name] = module

    add_module = register_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("[Module.__setattr__] cannot assign parameters before "
                                     "Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as "
                                f"parameter '{name}' (kiln.nn.Parameter or None expected)")
            params[name] = None
            d[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("[Module.__setattr__] cannot assign module before "
                                     "Module.__init__() call")
            self._forget(name, keep="_modules")
            d["_modules"][name] = value
            d[name] = value
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as "
                                f"child module '{name}' (kiln.nn.Module or None expected)")
            d["_modules"][name] = None
            d[name] = None
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("[Module.__setattr__] cannot assign buffer before "
                                     "Module.__init__() call")
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, persistent=value.persistent)
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"[Module.__setattr__] cannot assign '{_typename(value)}' as "
                                f"buffer '{name}' (kiln.Tensor or None expected)")
            d["_buffers"][name] = value
            d[name] = value
        else:
            object.__setattr__(self, name, value)

    # kiln.save of a whole module (Note [Saving objects]), pickle and copy.deepcopy store this
    # state: the instance __dict__ without the attribute mirror (Note [Module attribute
    # mirror]), which __setstate__ rebuilds from the registries.
    def __getstate__(self):
        d = self.__dict__
        registered = set(d["_parameters"]) | set(d["_buffers"]) | set(d["_modules"])
        return {k: v for k, v in d.items() if k not in registered}

    def __setstate__(self, state):
        d = self.__dict__
        d.update(state)
        for registry in ("_parameters", "_buffers", "_modules"):
            d.setdefault(registry, {})
        d.setdefault("_non_persistent_buffers_set", set())
        for name in ("_forward_pre_hooks", "_forward_hooks"):
            d[name] = HookDict(d.get(name, ()))
        for name in ("_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs"):
            d[name] = set(d.get(name, ()))
        for registry in ("_parameters", "_buffers", "_modules"):
            d.update(d[registry])

    def __getattr__(self, name):
        # Only reached when `name` is not in __dict__ (Note [Module attribute mirror]).
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            values = d.get(registry)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", ()) or name in d.get("_buffers", ()) or \
                name in d.get("_modules", ()):
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = set(dir(type(self))) | set(self.__dict__) | set(self._parameters) | \
            set(self._buffers) | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    # ---- traversal -------------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yields (qualified name, module) for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + "." + name if prefix else name,
                                            remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in module.__dict__[registry].items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + "." + name if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yields (qualified name, Parameter), each shared parameter once by default."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target):
        """The module at dotted path `target` ("" is self)."""
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if item not in module._modules:
                raise AttributeError(f"[Module.get_submodule] {module._get_name()} has no "
                                     f"attribute `{item}`")
            module = module._modules[item]
            if not isinstance(module, Module):
                raise AttributeError(f"[Module.get_submodule] `{item}` is not an nn.Module")
        return module

    def get_parameter(self, target):
        """The Parameter at dotted path `target`."""
        return self._get_registered(target, "_parameters", "parameter")

    def get_buffer(self, target):
        """The buffer at dotted path `target`."""
        return self._get_registered(target, "_buffers", "buffer")

    def _get_registered(self, target, registry, kind):
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        entries = getattr(module, registry)
        if name not in entries:
            raise AttributeError(f"[Module.get_{kind}] {module._get_name()} has no {kind} "
                                 f"`{name}`")
        return entries[name]

    def apply(self, fn):
        """Calls fn on every submodule (children first) and on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients ---------------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"[Module.train] training mode is expected to be boolean, got "
                             f"{mode!r}")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Clears every parameter's .grad (set to None, or zeroed in place)."""
        for param in self.parameters():
            grad = param.grad
            if grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                grad.zero_()

    # ---- devices and dtypes ----------------------------------------------------------------

    def _apply(self, fn):
        """Replaces every parameter's data (keeping the Parameter object), grad and buffer
        by fn(tensor), recursively."""
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for param in self._parameters.values():
                if param is None:
                    continue
                param.data = fn(param)
                grad = param.grad
                if grad is not None:
                    grad.data = fn(grad)
            buffers = self._buffers
            for name, buf in buffers.items():
                if buf is not None:
                    buffers[name] = self.__dict__[name] = fn(buf)
        return self

    def share_memory(self):
        """Moves every parameter and buffer to shared memory (Note [Shared-memory tensors])."""
        return self._apply(lambda t: t.share_memory_())

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(tensor), to(device, dtype); dtype casts apply only to
        floating-point parameters and buffers."""
        device, dtype, non_blocking, memory_format = _parse_to(args, kwargs)
        float_kwargs = {"non_blocking": non_blocking}
        if device is not None:
            float_kwargs["device"] = device
        other_kwargs = dict(float_kwargs)
        if dtype is not None:
            float_kwargs["dtype"] = dtype

        def convert(t):
            kw = float_kwargs if t.is_floating_point() else other_kwargs
            # As in PyTorch, a memory format applies to the 4-d / 5-d parameters (conv weights).
            if memory_format is not None and t.dim() in (4, 5):
                kw = dict(kw, memory_format=memory_format)
            return t.to(**kw)

        return self._apply(convert)

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def _cast_floats(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        from kiln import float32
        return self._cast_floats(float32)

    def double(self):
        from kiln import float64
        return self._cast_floats(float64)

    def half(self):
        from kiln import float16
        return self._cast_floats(float16)

    def bfloat16(self):
        from kiln import bfloat16
        return self._cast_floats(bfloat16)

    # ---- state_dict ------------------------------------------------------------------------

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of parameters and persistent buffers by qualified name (detached
        unless keep_vars)."""
        if args:
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copies this module's own entries from state_dict, recording missing keys and
        shape mismatches; `assign` in local_metadata replaces tensors instead of copying."""
        assign = local_metadata.get("assign_to_params_buffers", False)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        local_state.update((k, v) for k, v in persistent.items() if v is not None)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  f"kiln.Tensor from checkpoint but received {type(value)}")
                continue
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{value.shape} from checkpoint, the shape in current model is "
                                  f"{param.shape}.")
                continue
            try:
                with no_grad():
                    if not assign:
                        param.copy_(value)
                    elif isinstance(param, Parameter):
                        new = value if isinstance(value, Parameter) else Parameter(
                            value, requires_grad=param.requires_grad)
                        new.requires_grad_(param.requires_grad)
                        setattr(self, name, new)
                    else:
                        setattr(self, name, value)
            except Exception as ex:  # noqa: BLE001  (reported with the key, like PyTorch)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f"in the model are {param.shape} and whose dimensions in the "
                                  f"checkpoint are {value.shape}, an exception occurred : "
                                  f"{ex.args}.")
        if strict:
            for key in state_dict:
                if not key.startswith(prefix):
                    continue
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local_state:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies parameters and buffers from state_dict; returns (missing_keys,
        unexpected_keys). strict raises RuntimeError on any mismatch; shape mismatches
        always raise."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"[Module.load_state_dict] expected a mapping for state_dict, got "
                            f"{type(state_dict).__name__}")
        missing, unexpected, errors = [], [], []
        metadata = {"assign_to_params_buffers": assign}

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, metadata, True, missing,
                                         unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("[Module.load_state_dict] Error(s) in loading state_dict for "
                               "{}:\n\t{}".format(type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- repr ------------------------------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside this module's parentheses in repr (override in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): " + _addindent(repr(module), 2)
                    for name, module in self._modules.items()]
        text = self._get_name() + "("
        if len(lines) == 1 and not children:
            text += lines[0]
        elif lines or children:
            text += "\n  " + "\n  ".join(lines + children) + "\n"
        return text + ")"
