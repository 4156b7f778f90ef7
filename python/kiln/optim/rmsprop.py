"""RMSprop (optionally centered, with momentum)."""

import kiln
from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_flags, _check_value, _new_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """PyTorch's RMSprop: eps is added after the square root."""

    _group_key_defaults = {
        "momentum": 0, "centered": False, "foreach": None, "maximize": False,
        "differentiable": False, "capturable": False}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_value("RMSprop", 0.0 <= lr, "learning rate", lr)
        _check_value("RMSprop", 0.0 <= eps, "epsilon value", eps)
        _check_value("RMSprop", 0.0 <= momentum, "momentum value", momentum)
        _check_value("RMSprop", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        _check_value("RMSprop", 0.0 <= alpha, "alpha value", alpha)
        _check_flags("RMSprop", foreach, None, differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        return self._fused_step(closure, _C._fused_rmsprop_, self._step_args)

    @staticmethod
    def _step_args(group):
        momentum, centered = group["momentum"], group["centered"]
        keys = ("square_avg", "momentum_buffer" if momentum > 0 else None,
                "grad_avg" if centered else None, "step")
        return keys, (group["lr"], group["alpha"], group["eps"], group["weight_decay"], momentum,
                      centered, group["maximize"])

    @staticmethod
    def _init_state(p, st, group):
        if not st:
            st["step"] = _new_step()
            st["square_avg"] = kiln.zeros_like(p)
        if group["momentum"] > 0 and "momentum_buffer" not in st:
            st["momentum_buffer"] = kiln.zeros_like(p)
        if group["centered"] and "grad_avg" not in st:
            st["grad_avg"] = kiln.zeros_like(p)
