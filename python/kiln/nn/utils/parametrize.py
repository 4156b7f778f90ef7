"""kiln.nn.utils.parametrize: replace a parameter or buffer of a module by a function of
unconstrained tensors (register_parametrization), with PyTorch's module layout: the function
chain lives in module.parametrizations[name] (a ParametrizationList), the unconstrained
tensors in its `original` (or `original0`, `original1`, ...), and `module.name` is a property
that evaluates the chain."""

from collections.abc import Sequence
from contextlib import contextmanager

from kiln._C import Tensor
from kiln.autograd.grad_mode import no_grad
from kiln.nn.modules.container import ModuleDict, ModuleList
from kiln.nn.parameter import Parameter

# Note [Parametrized attribute]
# Module keeps registered values in the instance __dict__ as well (Note [Module attribute
# mirror]). A parametrized name is removed from the registries and from __dict__, and the
# module's class is swapped for a per-instance subclass holding a property of that name. A
# property is a data descriptor, so it wins over any instance attribute, and other instances of
# the original class are left alone.

_cache_depth = 0
_cache = {}


@contextmanager
def cached():
    """Within this context each parametrized tensor is computed once, on first access, and
    reused (e.g. a weight read at every step of a recurrent loop)."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _check_same(what, value, reference, op):
    if not isinstance(value, Tensor):
        raise ValueError(f"[{op}] {what} must return a tensor, got {type(value).__name__}")
    if value.dtype != reference.dtype:
        raise ValueError(f"[{op}] {what} may not change the dtype: expected {reference.dtype}, "
                         f"got {value.dtype}")
    if value.shape != reference.shape:
        raise ValueError(f"[{op}] {what} may not change the shape: expected "
                         f"{list(reference.shape)}, got {list(value.shape)}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to the tensors `original`
    (right_inverse gave one tensor or is absent) or `original0`, `original1`, ... (it gave a
    sequence); the first parametrization's forward takes them all."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("[ParametrizationList] needs at least one parametrization")
        super().__init__(modules)
        self.unsafe = unsafe
        op = "register_parametrization"
        with no_grad():
            new = original
            for module in reversed(self):
                # A right_inverse that raises NotImplementedError counts as the identity here
                # (e.g. orthogonal's Cayley map without trivialization): the original then
                # starts as the current value.
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor) and not isinstance(new, Sequence):
            raise ValueError(f"[{op}] right_inverse must return a tensor or a sequence of "
                             f"tensors, got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe:
                _check_same("right_inverse", new, original, op)
            with no_grad():
                original.data = new
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, value in enumerate(new):
                if not isinstance(value, Tensor):
                    raise ValueError(f"[{op}] right_inverse returned a sequence whose element "
                                     f"{i} is a {type(value).__name__}, not a tensor")
                value = value.detach()
                if isinstance(original, Parameter):
                    value = Parameter(value, original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", value)
        if not unsafe:
            _check_same("the parametrization", self(), original, op)

    def _originals(self):
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def right_inverse(self, value):
        """Sets the originals so that the chain evaluates to `value` (module.name = value)."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"[ParametrizationList.right_inverse] parametrization "
                                       f"{type(module).__name__} does not implement "
                                       "right_inverse")
                value = module.right_inverse(value)
            if self.is_tensor:
                value = (value,)
            elif not isinstance(value, Sequence) or len(value) != self.ntensors:
                raise ValueError(f"[ParametrizationList.right_inverse] right_inverse must return "
                                 f"a sequence of {self.ntensors} tensors, got {value!r}")
            for original, new in zip(self._originals(), value):
                if not self.unsafe:
                    _check_same("right_inverse", new, original,
                                "ParametrizationList.right_inverse")
                original.data = new

    def forward(self):
        x = self[0](*self._originals())
        for i in range(1, len(self)):
            x = self[i](x)
        return x


def _inject_new_class(module):
    cls = module.__class__
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__doc__": cls.__doc__})


def _inject_property(module, tensor_name):
    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def is_parametrized(module, tensor_name=None):
    """Whether `module` has any parametrization (tensor_name=None) or one on `tensor_name`."""
    parametrizations = module.__dict__.get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Makes module.<tensor_name> evaluate parametrization(original) on every access; a second
    registration on the same name appends to the chain. unsafe=True skips the checks that the
    parametrization keeps dtype and shape."""
    op = "register_parametrization"
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            current = getattr(module, tensor_name)
            value = parametrization(current)
            _check_same("the parametrization", value, current, op)
            if hasattr(parametrization, "right_inverse"):
                _check_same("right_inverse", parametrization.right_inverse(value), current, op)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"[{op}] module '{type(module).__name__}' does not have a parameter, a "
                         f"buffer, or a parametrized element with name '{tensor_name}'")
    original = getattr(module, tensor_name)
    if original is None:
        raise ValueError(f"[{op}] '{tensor_name}' of module '{type(module).__name__}' is None")
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_new_class(module)
        module.parametrizations = ModuleDict()
    _inject_property(module, tensor_name)
    module.parametrizations[tensor_name] = chain
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Turns module.<tensor_name> back into a plain parameter/buffer holding its current
    parametrized value (leave_parametrized=True) or the unconstrained `original`."""
    op = "remove_parametrizations"
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"[{op}] module '{type(module).__name__}' does not have a "
                         f"parametrization on '{tensor_name}'")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                original.data = getattr(module, tensor_name)
    else:
        if not leave_parametrized:
            raise ValueError(f"[{op}] cannot leave '{tensor_name}' unparametrized "
                             "(leave_parametrized=False): it is parametrized in terms of a "
                             "sequence of tensors")
        with no_grad():
            value = getattr(module, tensor_name).detach()
        first = chain.original0
        original = Parameter(value, first.requires_grad) if isinstance(first, Parameter) else value
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class `module` had before its first parametrization."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)
