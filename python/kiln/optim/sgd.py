"""Stochastic gradient descent (optionally with momentum / Nesterov momentum)."""

from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_flags, _check_value

__all__ = ["SGD"]


class SGD(Optimizer):
    """PyTorch's SGD: momentum buffers start as the first (decayed) gradient."""

    _group_key_defaults = {
        "nesterov": False, "maximize": False, "foreach": None, "differentiable": False,
        "fused": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        _check_value("SGD", lr >= 0.0, "learning rate", lr)
        _check_value("SGD", momentum >= 0.0, "momentum value", momentum)
        _check_value("SGD", weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check_flags("SGD", foreach, fused, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("[SGD] Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        return self._fused_step(closure, _C._fused_sgd_, self._step_args)

    @staticmethod
    def _step_args(group):
        keys = ("momentum_buffer" if group["momentum"] != 0 else None,)
        return keys, (group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
                      group["nesterov"], group["maximize"])

    @staticmethod
    def _init_state(p, st, group):
        # The fused step makes a None buffer from the first gradient.
        st["momentum_buffer"] = None
