"""RMSprop (optionally centered, with momentum)."""

import kiln
from kiln import _C
from kiln.optim.optimizer import Optimizer, _check_flags, _check_value, _new_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """PyTorch's RMSprop: eps is added after the square root."""

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

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss."""
        loss = self._call_closure(closure)
        state = self.state
        for group in self.param_groups:
            momentum, centered = group["momentum"], group["centered"]
            params, grads, square_avgs, bufs, grad_avgs, steps = [], [], [], [], [], []
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                st = state[p]
                if not st:
                    st["step"] = _new_step()
                    st["square_avg"] = kiln.zeros_like(p)
                if momentum > 0:
                    if "momentum_buffer" not in st:
                        st["momentum_buffer"] = kiln.zeros_like(p)
                    bufs.append(st["momentum_buffer"])
                if centered:
                    if "grad_avg" not in st:
                        st["grad_avg"] = kiln.zeros_like(p)
                    grad_avgs.append(st["grad_avg"])
                params.append(p)
                grads.append(g)
                square_avgs.append(st["square_avg"])
                steps.append(st["step"])
            if not params:
                continue
            _C._fused_rmsprop_(params, grads, square_avgs, bufs, grad_avgs, steps, group["lr"],
                               group["alpha"], group["eps"], group["weight_decay"], momentum,
                               centered, group["maximize"])
        return loss
