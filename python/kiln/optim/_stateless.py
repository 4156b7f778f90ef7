"""swap_in_optimizer_params_and_state: run an optimizer's API on other parameters and state
for the length of a `with` block (PyTorch uses it to trace a step on stand-in tensors)."""

import contextlib
from collections import defaultdict

__all__ = ["swap_in_optimizer_params_and_state"]

_NAME = "swap_in_optimizer_params_and_state"


def _swapped(optimizer, swapin_parameters, swapin_optim_state):
    """(param_groups, state) built from the swap-in values, validated."""
    if not optimizer.state:
        raise RuntimeError(f"[{_NAME}] {_NAME} requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict) or \
            not {"state", "param_groups"} <= set(swapin_optim_state):
        raise ValueError(f"[{_NAME}] {_NAME} requires optimizer.state_dict()-style "
                         f"swapin_optim_state with 'state' and 'param_groups' keys")
    params = list(swapin_parameters.values())
    groups = swapin_optim_state["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise ValueError(f"[{_NAME}] swapin_optim_state has {len(groups)} param groups, the "
                         f"optimizer {len(optimizer.param_groups)}")
    count = sum(len(g["params"]) for g in optimizer.param_groups)
    if len(params) != count:
        raise ValueError(f"[{_NAME}] got {len(params)} swap-in parameters for an optimizer of "
                         f"{count}")
    saved_state = swapin_optim_state["state"]
    new_groups, new_state, start = [], defaultdict(dict), 0
    for live, saved in zip(optimizer.param_groups, groups):
        if len(saved["params"]) != len(live["params"]):
            raise ValueError(f"[{_NAME}] each optimizer param group must match the swap-in "
                             f"group's number of params ({len(live['params'])} vs "
                             f"{len(saved['params'])})")
        group_params = params[start:start + len(live["params"])]
        start += len(group_params)
        group = {k: v for k, v in saved.items() if k != "params"}
        group["params"] = group_params
        new_groups.append(group)
        for key, p in zip(saved["params"], group_params):
            if key in saved_state:
                # A shallow copy: in-place tensor edits reach the caller's dict, replacing
                # an entry does not.
                new_state[p] = dict(saved_state[key])
    return new_groups, new_state


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Within the block, optimizer.param_groups holds swapin_parameters (in the optimizer's
    parameter order) with swapin_optim_state's hyper-parameters, and optimizer.state holds
    its per-parameter state; the live ones come back on exit."""
    groups, state = _swapped(optimizer, swapin_parameters, swapin_optim_state)
    live = optimizer.param_groups, optimizer.state
    optimizer.param_groups, optimizer.state = groups, state
    try:
        yield
    finally:
        optimizer.param_groups, optimizer.state = live
