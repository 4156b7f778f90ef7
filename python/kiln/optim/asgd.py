"""ASGD: SGD with a decaying step size and a running (Polyak) average of the iterates."""

import kiln
from kiln.optim.optimizer import _TensorOpOptimizer, _check_flags, _check_value, _new_step

__all__ = ["ASGD"]


class ASGD(_TensorOpOptimizer):
    """PyTorch's ASGD (Polyak and Juditsky, 1992): the step uses eta, and state["ax"] averages
    the iterates from step t0 on.

    eta and mu are 0-d float32 tensors on the parameter's device, as in PyTorch's state dicts.
    Like PyTorch's (non-capturable) step, each step reads them on the host: the update uses
    eta as a Python number, and ax is a plain copy of the parameter while mu is 1."""

    _group_key_defaults = {
        "foreach": None, "maximize": False, "differentiable": False, "capturable": False}

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_value("ASGD", 0.0 <= lr, "learning rate", lr)
        _check_value("ASGD", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        _check_flags("ASGD", foreach, None, differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @staticmethod
    def _init_state(p, st, group):
        st["step"] = _new_step()
        st["eta"] = kiln.full((), group["lr"], dtype=kiln.float32, device=p.device)
        st["mu"] = kiln.ones((), dtype=kiln.float32, device=p.device)
        st["ax"] = kiln.zeros_like(p)

    @staticmethod
    def _update(p, grad, st, group):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        if group["maximize"]:
            grad = grad.neg()
        st["step"] += 1
        t = st["step"].item()
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        eta, mu, ax = st["eta"], st["mu"], st["ax"]
        eta_value, mu_value = eta.item(), mu.item()
        p.mul_(1 - lambd * eta_value)
        p.add_(grad, alpha=-eta_value)
        if mu_value != 1:
            ax.add_(p.sub(ax).mul_(mu_value))
        else:
            ax.copy_(p)
        eta.fill_(lr / (1 + lambd * lr * t) ** alpha)
        mu.fill_(1 / max(1.0, t - t0))
