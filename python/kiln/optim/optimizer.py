"""The Optimizer base class: parameter groups, per-parameter state, state dicts and hooks,
with PyTorch's behaviour. Subclasses implement ``step`` with one multi-tensor C++ call per
param group (``kiln._C._fused_*_``), or, for the less common optimizers, with in-place kiln
tensor ops per parameter (``_tensor_op_step``)."""

import copy
import functools
from collections import OrderedDict, defaultdict
from itertools import chain

import kiln
from kiln import _C

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyper-parameter that has no default."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _type_name(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__


class _RemovableHandle:
    """Removes a hook from the dict it was registered in."""

    _next_id = 0

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.remove()


def _copy_value(value):
    """A deep copy that clones tensors (kiln tensors do not implement __deepcopy__)."""
    if isinstance(value, _C.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return type(value)((k, _copy_value(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_value(v) for v in value)
    return copy.deepcopy(value)


def _with_hooks(step):
    """Runs the optimizer's step pre/post hooks around ``step``."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        # A subclass's step calling super().step() runs the hooks once, around the outer call.
        if self._in_hooked_step or not (self._step_pre_hooks or self._step_post_hooks):
            return step(self, *args, **kwargs)
        self._in_hooked_step = True
        try:
            for hook in list(self._step_pre_hooks.values()):
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            f"[{type(self).__name__}.step] a step pre-hook must return None or "
                            f"a tuple (new_args, new_kwargs), but returned {result!r}")
                    args, kwargs = result
            out = step(self, *args, **kwargs)
            for hook in list(self._step_post_hooks.values()):
                hook(self, args, kwargs)
            return out
        finally:
            self._in_hooked_step = False

    wrapper._kiln_hooked = True
    return wrapper


class Optimizer:
    """Base class of all optimizers.

    params: an iterable of tensors, or of dicts (param groups) each with a "params" entry and
    optional per-group hyper-parameters; defaults: the hyper-parameters' default values.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_kiln_hooked", False):
            cls.step = _with_hooks(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()
        self._in_hooked_step = False
        if isinstance(params, _C.Tensor):
            raise TypeError(
                f"[{type(self).__name__}] params argument given to the optimizer should be an "
                f"iterable of Tensors or dicts, but got {_type_name(params)}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError(f"[{type(self).__name__}] optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    # Param-group keys that older checkpoints may lack, with the value __setstate__ gives them
    # (each optimizer lists its own, as PyTorch's do in their __setstate__).
    _group_key_defaults = {}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_step_post_hooks", OrderedDict())
        self.__dict__.setdefault("_in_hooked_step", False)
        for group in self.param_groups:
            for key, value in self._group_key_defaults.items():
                group.setdefault(key, value)

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def add_param_group(self, param_group):
        """Adds a group of parameters with its own hyper-parameters (defaults fill the rest)."""
        name = f"{type(self).__name__}.add_param_group"
        if not isinstance(param_group, dict):
            raise TypeError(f"[{name}] param_group must be a dict, but got "
                            f"{type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                f"[{name}] optimizer parameters need to be organized in ordered collections, "
                "but the ordering of tensors in sets will change between runs. Please use a "
                "list instead.")
        else:
            param_group["params"] = list(params)
        params = param_group["params"]
        for i, p in enumerate(params):
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"[{name}] optimizer can only optimize Tensors, but params[{i}] "
                                f"is {_type_name(p)}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError(f"[{name}] can't optimize a non-leaf Tensor (params[{i}] with "
                                 f"shape {list(p.shape)} has grad_fn {p.grad_fn})")
        for key, default in self.defaults.items():
            if default is required and key not in param_group:
                raise ValueError(f"[{name}] parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            param_group.setdefault(key, default)
        # Duplicates are errors (PyTorch only warns within a group): a fused step would update
        # the parameter twice from one state.
        if len({id(p) for p in params}) != len(params):
            raise ValueError(f"[{name}] optimizer contains a parameter group with duplicate "
                             "parameters")
        existing = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError(f"[{name}] some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Resets every parameter's gradient: to None (default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        raise NotImplementedError(f"[{type(self).__name__}.step] is not implemented")

    def _call_closure(self, closure):
        if closure is None:
            return None
        with kiln.enable_grad():
            return closure()

    def _fused_step(self, closure, fused_op, step_args):
        """The step of kiln's built-in optimizers: per param group, one call
        fused_op(params, grads, *state_lists, *scalars) over the parameters that have a gradient
        (others are skipped, as in PyTorch), where (state_keys, scalars) = step_args(group) and
        each state list holds self.state[p][key] per parameter (an empty list where the key is
        None: that state is off for the group). Missing state is made by
        self._init_state(p, self.state[p], group). fused_op updates the state in place; one
        whose first state list may hold None (SGD's momentum buffers, made from the first
        gradient) returns the new list instead, stored back under the first key."""
        loss = None if closure is None else self._call_closure(closure)
        state = self.state
        for group in self.param_groups:
            keys, scalars = step_args(group)
            params, grads, lists = _C._step_inputs(group["params"], state, keys)
            if not params:
                continue
            if lists is None:
                for p in params:
                    self._init_state(p, state[p], group)
                params, grads, lists = _C._step_inputs(params, state, keys)
            made = fused_op(params, grads, *lists, *scalars)
            if made:
                key = keys[0]
                for p, value in zip(params, made):
                    state[p][key] = value
        return loss

    def _tensor_op_step(self, closure, update):
        """The step of optimizers that have no fused kernel: update(p, grad, state, group) per
        parameter with a gradient, written with in-place kiln tensor ops (so it runs on every
        device) under no_grad. Missing state is made first by self._init_state(p, state, group).
        """
        loss = None if closure is None else self._call_closure(closure)
        state = self.state
        with kiln.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    st = state[p]
                    if not st:
                        self._init_state(p, st, group)
                    update(p, grad, st, group)
        return loss

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before step."""
        handle = _RemovableHandle(self._step_pre_hooks)
        self._step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, after step."""
        handle = _RemovableHandle(self._step_post_hooks)
        self._step_post_hooks[handle.id] = hook
        return handle

    def state_dict(self):
        """{"state": {index: state}, "param_groups": [...]} with parameters replaced by their
        integer index (in group order), as PyTorch saves them. Values are references."""
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(mapping[id(k)] if isinstance(k, _C.Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    @staticmethod
    def _cast_state(param, value, key):
        # Counters stay float32 on the host (bias corrections are computed there without a
        # device sync); other floating state takes the parameter's dtype and device. Tensors
        # are copied, so the loaded optimizer never aliases the source's state.
        if key == "step":
            return value.to(dtype=kiln.float32, device="cpu").clone()
        if param.is_floating_point() and value.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device).clone()
        return value.to(device=param.device).clone()

    def load_state_dict(self, state_dict):
        """Loads a state dict made by state_dict() (kiln's or PyTorch's layout)."""
        name = f"{type(self).__name__}.load_state_dict"
        groups = self.param_groups
        saved_groups = [_copy_value(g) for g in state_dict["param_groups"]]
        if len(groups) != len(saved_groups):
            raise ValueError(f"[{name}] loaded state dict has a different number of parameter "
                             f"groups ({len(saved_groups)}) than the optimizer ({len(groups)})")
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    f"[{name}] loaded state dict contains a parameter group that doesn't match "
                    f"the size of optimizer's group: group {i} has {len(s['params'])} params, "
                    f"the optimizer's has {len(g['params'])}")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, _C.Tensor):
                return self._cast_state(param, value, key)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, key) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = _copy_value(v)
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.__setstate__({"state": state, "param_groups": new_groups})


class _TensorOpOptimizer(Optimizer):
    """An optimizer without a fused kernel: subclasses define _init_state(p, state, group) and
    _update(p, grad, state, group), and step runs them through _tensor_op_step."""

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        return self._tensor_op_step(closure, self._update)


def _check_flags(cls_name, foreach, fused, differentiable):
    """The implementation switches PyTorch takes. kiln always runs one multi-tensor step per
    group, so foreach/fused only select what PyTorch would; differentiable steps need autograd
    through the update, which the fused kernels do not record."""
    if fused and foreach:
        raise RuntimeError(f"[{cls_name}] `fused` and `foreach` cannot be `True` together.")
    if fused and differentiable:
        raise RuntimeError(f"[{cls_name}] `fused` does not support `differentiable`")
    if differentiable:
        raise NotImplementedError(f"[{cls_name}] differentiable=True is not supported by kiln")


def _check_value(cls_name, ok, what, value):
    if not ok:
        raise ValueError(f"[{cls_name}] Invalid {what}: {value}")


def _check_adam_args(cls_name, lr, eps, betas, weight_decay):
    """The hyperparameter checks the Adam family shares, in PyTorch's order."""
    _check_value(cls_name, 0.0 <= lr, "learning rate", lr)
    _check_value(cls_name, 0.0 <= eps, "epsilon value", eps)
    _check_value(cls_name, 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
    _check_value(cls_name, 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
    _check_value(cls_name, 0.0 <= weight_decay, "weight_decay value", weight_decay)


def _new_step():
    return kiln.zeros((), dtype=kiln.float32)
