"""Stochastic gradient descent (optionally with momentum / Nesterov momentum)."""

from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_flags, _check_value, _params_with_grads

__all__ = ["SGD"]


class SGD(Optimizer):
    """PyTorch's SGD: momentum buffers start as the first (decayed) gradient."""

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

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        loss = self._call_closure(closure)
        state = self.state
        for group in self.param_groups:
            params, grads = _params_with_grads(group)
            if not params:
                continue
            momentum = group["momentum"]
            bufs = ([state[p].get("momentum_buffer") if p in state else None for p in params]
                    if momentum != 0 else [])
            new_bufs = _C._fused_sgd_(params, grads, bufs, group["lr"], momentum,
                                      group["dampening"], group["weight_decay"],
                                      group["nesterov"], group["maximize"])
            if momentum != 0:
                for p, buf in zip(params, new_bufs):
                    state[p]["momentum_buffer"] = buf
        return loss
