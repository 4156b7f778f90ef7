"""Adagrad."""

import kiln
from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_flags, _check_value, _new_step

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """PyTorch's Adagrad: state ("step", "sum") is created when the optimizer is built."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False, "fused": None}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_value("Adagrad", 0.0 <= lr, "learning rate", lr)
        _check_value("Adagrad", 0.0 <= lr_decay, "lr_decay value", lr_decay)
        _check_value("Adagrad", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        _check_value("Adagrad", 0.0 <= initial_accumulator_value,
                     "initial_accumulator_value value", initial_accumulator_value)
        _check_value("Adagrad", 0.0 <= eps, "epsilon value", eps)
        _check_flags("Adagrad", foreach, fused, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    @staticmethod
    def _init_state(p, st, group):
        if not st:
            st["step"] = _new_step()
            st["sum"] = kiln.full_like(p, group["initial_accumulator_value"])

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        return self._fused_step(closure, _C._fused_adagrad_, self._step_args)

    @staticmethod
    def _step_args(group):
        return ("sum", "step"), (group["lr"], group["lr_decay"], group["weight_decay"],
                                 group["eps"], group["maximize"])
