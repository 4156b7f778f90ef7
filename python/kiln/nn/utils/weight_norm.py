"""weight_norm / remove_weight_norm: the old hook-based reparametrisation w = g * v / ||v||,
with `name`_g and `name`_v as the module's parameters and `name` recomputed before every
forward."""

import kiln
from kiln.nn.parameter import Parameter


def _norm_except_dim(v, dim):
    """||v|| over every dimension but `dim`, shaped to broadcast against v; dim -1 (the value
    weight_norm uses for dim=None) means the norm of the whole tensor."""
    if dim == -1:
        return kiln.linalg.vector_norm(v)
    dims = [d for d in range(v.dim()) if d != dim]
    return kiln.linalg.vector_norm(v, 2.0, dim=dims, keepdim=True)


class _WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Splits parameter `name` of `module` into a magnitude `name`_g (norm over every dim but
    `dim`; dim=None: one norm for the whole tensor) and a direction `name`_v."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"[weight_norm] Cannot register two weight_norm hooks on the same "
                               f"parameter {name}")
    weight = module._parameters.get(name) if hasattr(module, "_parameters") else None
    if weight is None:
        raise AttributeError(f"[weight_norm] '{type(module).__name__}' object has no parameter "
                             f"'{name}'")
    if dim is None:
        dim = -1
    elif dim < -1 or dim >= weight.dim():
        raise IndexError(f"[weight_norm] dim {dim} is out of range for parameter '{name}' of "
                         f"size {list(weight.shape)}")
    fn = _WeightNorm(name, dim)
    del module._parameters[name]
    module.__dict__.pop(name, None)
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Folds `name`_g and `name`_v back into one parameter `name` and removes the hook."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            weight = hook.compute_weight(module).detach()
            del module._forward_pre_hooks[key]
            delattr(module, name + "_g")
            delattr(module, name + "_v")
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"[remove_weight_norm] weight_norm of '{name}' not found in {module}")
